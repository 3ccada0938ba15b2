"""Tessera's U-Net in PyTorch, rebuilt from what `tessera export` writes.

`tessera export --checkpoint RUN/checkpoints/last.pt --out model.pt` writes two files:
model.pt, a dict {parameter name -> tensor} that `torch.load` reads, and model.json, the
architecture, the input normalisation and the class names. This module rebuilds the same
network (2-D NCHW or 3-D NCDHW) as a plain `torch.nn.Module` with the same parameter
names, so the weights load strictly and the logits agree with Tessera's to float rounding.

Usage (needs only PyTorch; put this folder on sys.path)::

    import torch, tessera_unet
    net = tessera_unet.load("model.pt", "model.json")      # eval mode, strict names/shapes
    x = tessera_unet.normalize(raw, net.normalization)    # raw: N x C x H x W float
    logits = net(x)                                       # N x classes x H' x W'
    labels = logits.argmax(1)                             # indices into net.class_names

With `valid` padding the output is smaller than the input by 2 * halo per axis and the
input side must be valid: see model.json "geometry" (input side = S + remainder + 2 * halo
with S a multiple of alignment). With `same` padding any multiple of alignment works.
Pixels that are nodata in the source image are NaN after reading; Tessera masks them,
replace them before calling the network.

Back to Tessera after fine-tuning in Python::

    torch.save(net.state_dict(), "tuned.pt")
    # tessera import --weights tuned.pt --arch model.json --out tuned.ckpt
    # tessera infer --checkpoint tuned.ckpt --input scene.tif --output labels.tif

The network (core/src/unet.cpp): level l has `convs_per_level` x (conv K^D -> norm -> ReLU)
with base_filters * 2^l filters, then 2^D max pooling except at the bottom; the decoder
goes up with a transposed 2^D convolution of stride 2 (or a 1x1 convolution followed by
nearest upsampling), concatenates [centre-cropped skip, upsampled] along channels, applies
the level's convolutions, and a 1x1 head gives the logits. Normalisation: batch (running
statistics in eval mode), group (gcd(8, channels) groups) or instance (group norm with one
channel per group, affine), eps 1e-5.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import List, Sequence

import torch
import torch.nn.functional as F
from torch import nn

FORMAT = "tessera-model"
VERSION = 1

__all__ = ["UNetSpec", "TesseraUNet", "load", "read_spec", "normalize"]


@dataclass
class UNetSpec:
    """model.json's "model" object (Tessera's UNetOptions) plus normalisation and classes."""

    dims: int = 2
    in_channels: int = 4
    classes: int = 4
    levels: int = 5
    convs_per_level: int = 2
    base_filters: int = 64
    kernel: int = 3
    padding: str = "valid"  # valid | same
    norm: str = "none"  # none | batch | group | instance
    decoder: str = "transposed"  # transposed | upsample
    offset: List[float] = field(default_factory=list)
    scale: List[float] = field(default_factory=list)
    class_names: List[str] = field(default_factory=list)

    def validate(self, where: str = "model") -> None:
        def bad(name: str, why: str) -> None:
            raise ValueError(f"{where}: {name} {why}")

        if self.dims not in (2, 3):
            bad("dims", f"must be 2 or 3, got {self.dims}")
        for name in ("in_channels", "classes", "levels", "convs_per_level", "base_filters"):
            if getattr(self, name) < 1:
                bad(name, "must be >= 1")
        if self.kernel < 1 or self.kernel % 2 == 0:
            bad("kernel", f"must be odd and >= 1, got {self.kernel}")
        if self.padding not in ("valid", "same"):
            bad("padding", f"must be valid or same, got {self.padding!r}")
        if self.norm not in ("none", "batch", "group", "instance"):
            bad("norm", f"must be none, batch, group or instance, got {self.norm!r}")
        if self.decoder not in ("transposed", "upsample"):
            bad("decoder", f"must be transposed or upsample, got {self.decoder!r}")


def read_spec(model_json: str) -> UNetSpec:
    """Reads model.json written by `tessera export`; ValueError naming the file when wrong."""
    with open(model_json, encoding="utf-8") as f:
        j = json.load(f)
    if not isinstance(j, dict) or j.get("format") != FORMAT:
        raise ValueError(f'{model_json}: not a Tessera model description ("format": "{FORMAT}" missing)')
    if int(j.get("version", 0)) > VERSION:
        raise ValueError(f"{model_json}: version {j['version']} is newer than this module understands ({VERSION})")
    m = j["model"]
    spec = UNetSpec(
        dims=int(m["dims"]), in_channels=int(m["in_channels"]), classes=int(m["classes"]),
        levels=int(m["levels"]), convs_per_level=int(m["convs_per_level"]),
        base_filters=int(m["base_filters"]), kernel=int(m["kernel"]), padding=m["padding"],
        norm=m["norm"], decoder=m["decoder"],
        offset=[float(v) for v in j["normalization"]["offset"]],
        scale=[float(v) for v in j["normalization"]["scale"]],
        class_names=list(j["class_names"]))
    spec.validate(model_json)
    return spec


class NormNd(nn.Module):
    """Tessera's NormNdImpl: parameters weight/bias, buffers running_mean/var (batch only)."""

    def __init__(self, kind: str, channels: int):
        super().__init__()
        self.kind = kind
        self.groups = channels if kind == "instance" else math.gcd(8, channels)
        self.weight = nn.Parameter(torch.ones(channels))
        self.bias = nn.Parameter(torch.zeros(channels))
        if kind == "batch":
            self.register_buffer("running_mean", torch.zeros(channels))
            self.register_buffer("running_var", torch.ones(channels))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.kind == "batch":
            return F.batch_norm(x, self.running_mean, self.running_var, self.weight, self.bias,
                                self.training, 0.1, 1e-5)
        return F.group_norm(x, self.groups, self.weight, self.bias, 1e-5)


def _conv(dims: int, cin: int, cout: int, kernel: int, padding: int = 0) -> nn.Module:
    return (nn.Conv2d if dims == 2 else nn.Conv3d)(cin, cout, kernel, padding=padding)


class ConvBlock(nn.Module):
    """n_c x (conv -> norm -> ReLU); children conv0, norm0, conv1, ... as in Tessera."""

    def __init__(self, s: UNetSpec, cin: int, cout: int):
        super().__init__()
        pad = (s.kernel - 1) // 2 if s.padding == "same" else 0
        self.n = s.convs_per_level
        self.has_norm = s.norm != "none"
        for i in range(self.n):
            self.add_module(f"conv{i}", _conv(s.dims, cin if i == 0 else cout, cout, s.kernel, pad))
            if self.has_norm:
                self.add_module(f"norm{i}", NormNd(s.norm, cout))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for i in range(self.n):
            x = getattr(self, f"conv{i}")(x)
            if self.has_norm:
                x = getattr(self, f"norm{i}")(x)
            x = F.relu(x)
        return x


def center_crop(x: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """Centre crop of x's spatial axes to like's spatial sizes."""
    for d in range(2, x.dim()):
        diff = x.shape[d] - like.shape[d]
        if diff < 0 or diff % 2:
            raise ValueError(f"skip of side {x.shape[d]} cannot be centre-cropped to {like.shape[d]}: invalid input size")
        if diff:
            x = x.narrow(d, diff // 2, like.shape[d])
    return x


class TesseraUNet(nn.Module):
    """Tessera's U-Net. Input N x in_channels x spatial (normalised), output logits
    N x classes x spatial (smaller by 2 * halo per axis with valid padding). Parameter
    names match `tessera export`: enc0.conv0.weight, enc0.norm0.running_mean, up0.weight,
    dec0.conv1.bias, head.weight, ..."""

    def __init__(self, spec: UNetSpec):
        super().__init__()
        spec.validate()
        self.spec = spec
        self.class_names = list(spec.class_names)
        self.normalization = {"offset": list(spec.offset), "scale": list(spec.scale)}
        s = spec
        filters = [s.base_filters << l for l in range(s.levels)]
        for l in range(s.levels):
            self.add_module(f"enc{l}", ConvBlock(s, s.in_channels if l == 0 else filters[l - 1], filters[l]))
        for l in range(s.levels - 1):
            if s.decoder == "transposed":
                tconv = nn.ConvTranspose2d if s.dims == 2 else nn.ConvTranspose3d
                up = tconv(filters[l + 1], filters[l], 2, stride=2)
            else:
                up = _conv(s.dims, filters[l + 1], filters[l], 1)
            self.add_module(f"up{l}", up)
            self.add_module(f"dec{l}", ConvBlock(s, 2 * filters[l], filters[l]))
        self.head = _conv(s.dims, filters[0], s.classes, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        s = self.spec
        if x.dim() != s.dims + 2 or x.shape[1] != s.in_channels:
            raise ValueError(f"input of shape {tuple(x.shape)}: expected N x {s.in_channels} x {s.dims} spatial axes")
        pool = F.max_pool2d if s.dims == 2 else F.max_pool3d
        skips = []
        for l in range(s.levels):
            x = getattr(self, f"enc{l}")(x)
            if l < s.levels - 1:
                skips.append(x)
                x = pool(x, 2)
        for l in range(s.levels - 2, -1, -1):
            x = getattr(self, f"up{l}")(x)
            if s.decoder == "upsample":
                x = F.interpolate(x, scale_factor=2, mode="nearest")
            x = torch.cat([center_crop(skips[l], x), x], 1)
            x = getattr(self, f"dec{l}")(x)
        return self.head(x)


def normalize(x: torch.Tensor, normalization: dict) -> torch.Tensor:
    """x' = (x - offset) / scale per channel (axis 1), as Tessera does before the network."""
    shape = [1, -1] + [1] * (x.dim() - 2)
    offset = torch.tensor(normalization["offset"], dtype=x.dtype, device=x.device).view(shape)
    scale = torch.tensor(normalization["scale"], dtype=x.dtype, device=x.device).view(shape)
    return (x - offset) / scale


def load(model_pt: str, model_json: str, map_location: str | torch.device = "cpu") -> TesseraUNet:
    """The network of model.json with the weights of model.pt (strict), in eval mode."""
    net = TesseraUNet(read_spec(model_json))
    state = torch.load(model_pt, map_location=map_location)
    if not isinstance(state, dict):
        raise ValueError(f"{model_pt}: holds a {type(state).__name__}, not a dict of tensors")
    try:
        net.load_state_dict(state, strict=True)
    except RuntimeError as e:
        raise ValueError(f"{model_pt}: does not match {model_json}: {e}") from None
    return net.eval()


def parameter_names(spec: UNetSpec) -> Sequence[str]:
    """The names a weights file for this architecture must hold."""
    return list(TesseraUNet(spec).state_dict().keys())
