#!/usr/bin/python3
"""The inference a PyTorch user writes instead of `tessera infer`: the scene read whole with
rasterio, Tessera's U-Net rebuilt in PyTorch from `tessera export` (python/tessera_unet.py),
and MONAI-style sliding-window inference: windows of the training tile, overlap 0.25,
Gaussian importance blending as MONAI's
`sliding_window_inference(mode="gaussian", sigma_scale=0.125)` computes it, argmax, labels
written with rasterio. CPU, fp32, NCHW, one window per forward (MONAI's sw_batch_size=1).

    sliding_window.py SCENE.tif --weights model.pt [--arch model.json] --roi 384 \
        [--labels labels.tif] [--threads N]

Needs Debian's python3-torch, python3-rasterio and python3-numpy only (no MONAI: the few
lines of MONAI it follows are written out here). Prints one JSON line (the last line of
stdout) that `tessera bench infer` parses: seconds, mpix_per_s, peak_rss_mib, windows, ...

On a GPU (tessera-gpu-check, scripts/gpu_check.sh): --device cuda keeps the scene, the
blend and the network on the device, as a PyTorch user there would; --precision bf16 runs
the network's weights and windows in bfloat16; a SCENE.pt (a (C, H, W) float tensor saved with
torch.save) needs no rasterio. --repeats N times the inference N times (infer_seconds: the
fastest; peak_device_mib: torch.cuda.max_memory_allocated). TF32 stays off on the device
(IEEE fp32, as the check runs Tessera).

Geometry. MONAI feeds windows of side roi to a network whose output has the input's size.
Tessera's networks may use `valid` padding: the output of an input window of side
roi + r + 2*halo is roi + r (model.json "geometry"). A PyTorch user of such a network
reflect-pads the scene by the halo (as Tessera does at the scene border) and blends the
network's *output* windows, side roi + r, over the scene's grid with MONAI's scan: interval
int(side * (1 - overlap)), the last window moved back to end at the scene's edge.

A valid U-Net is not shift invariant: max pooling makes an output pixel depend on where its
window started modulo the pooling alignment 2^(L-1). MONAI's scan ignores that, so windows
that overlap disagree slightly and the blend is not the network applied to the scene. By
default this script rounds every window start to the alignment (interval down, the last
start up, the scene padded for the few extra pixels), so every window computes exactly the
network applied to the padded scene and the blend changes nothing but float rounding;
--unaligned keeps MONAI's positions as they are.
"""
import argparse
import json
import math
import os
import resource
import sys
import time

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))
import tessera_unet  # noqa: E402  (the project's python/ folder)

NODATA_LABEL = 255  # Tessera's label nodata (kNoDataLabel)


def peak_rss_mib():
    """This process's own peak resident memory (VmHWM), as Tessera's children report theirs:
    getrusage's ru_maxrss starts from the high-water mark of the process that started it."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def gaussian_importance(side, sigma_scale):
    """MONAI's compute_importance_map(mode="gaussian"): a separable Gaussian centred on the
    window, sigma = side * sigma_scale, clamped below at 1e-3 (peak 1 for an odd side)."""
    x = torch.arange(-(side - 1) / 2.0, (side - 1) / 2.0 + 1, dtype=torch.float)
    g = torch.exp(x ** 2 / (-2 * (side * sigma_scale) ** 2))
    w = g[:, None] * g[None, :]
    return torch.clamp(w, min=max(w.min().item(), 1e-3)).numpy()


def window_starts(n, side, overlap, alignment):
    """MONAI's dense_patch_slices along one axis of n output pixels, for windows of `side`
    outputs; with alignment > 1, every start rounded onto the pooling grid."""
    if side >= n:
        return [0]
    interval = max(int(side * (1 - overlap)), 1)
    if alignment > 1:
        interval = max(interval // alignment * alignment, alignment)
    starts = []
    for i in range(int(math.ceil(n / interval))):
        s = i * interval
        s -= max(s + side - n, 0)  # the last window ends at the scene's edge
        if alignment > 1:
            s = -(-s // alignment) * alignment  # and onto the grid (overhangs < alignment)
        if starts and s <= starts[-1]:
            break
        starts.append(s)
        if s + side >= n:
            break
    return starts


def blend(net, scene, windows, side, halo, shape, importance, batch, dtype):
    """MONAI's blend on the scene's device: each window's output logits weighted by the
    Gaussian importance, summed, divided by the summed weights; the argmax labels (H x W)."""
    classes, H, W = shape
    out = torch.zeros(shape, dtype=torch.float32, device=scene.device)
    count = torch.zeros((H, W), dtype=torch.float32, device=scene.device)
    with torch.inference_mode():
        for k in range(0, len(windows), batch):
            chunk = windows[k:k + batch]
            x_in = torch.stack([scene[:, y:y + side + 2 * halo, x:x + side + 2 * halo] for y, x in chunk])
            logits = net(x_in.to(dtype)).float()
            for (y, x), p in zip(chunk, logits):
                h, w = min(side, H - y), min(side, W - x)  # an aligned last window overhangs
                out[:, y:y + h, x:x + w] += p[:, :h, :w] * importance[:h, :w]
                count[y:y + h, x:x + w] += importance[:h, :w]
        out /= count
        return out.argmax(0)


def read_scene(path):
    """Bands x rows x columns float32; nodata values as NaN; and the file's profile (a .pt
    tensor: no profile, no nodata)."""
    if path.endswith(".pt"):
        return torch.load(path).to(torch.float32).numpy(), {}
    import rasterio  # only for GeoTIFF scenes (the GPU machine has none)
    with rasterio.open(path) as ds:
        img = ds.read().astype(np.float32)
        for b, nodata in enumerate(ds.nodatavals):
            if nodata is not None:
                img[b][img[b] == nodata] = np.nan
        return img, ds.profile


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("input", help="GeoTIFF scene, or a (C, H, W) tensor saved with torch.save (.pt)")
    ap.add_argument("--weights", required=True, help="model.pt written by `tessera export`")
    ap.add_argument("--arch", help="model.json written by `tessera export` (default: WEIGHTS with .json)")
    ap.add_argument("--roi", type=int, required=True, help="training tile side (Tessera's train.tile)")
    ap.add_argument("--overlap", type=float, default=0.25)
    ap.add_argument("--sigma-scale", type=float, default=0.125)
    ap.add_argument("--batch", type=int, default=1, help="windows per forward (MONAI's sw_batch_size)")
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0: PyTorch's default)")
    ap.add_argument("--labels", help="write the labels here (GeoTIFF, uint8, nodata 255)")
    ap.add_argument("--unaligned", action="store_true", help="MONAI's window starts, not rounded to the pooling grid")
    ap.add_argument("--device", default="cpu", help="cpu or cuda: where the scene, blend and network live")
    ap.add_argument("--precision", default="fp32", choices=["fp32", "bf16"], help="the network's weights and windows")
    ap.add_argument("--repeats", type=int, default=1, help="inference passes; infer_seconds is the fastest")
    a = ap.parse_args()
    if a.threads:
        torch.set_num_threads(a.threads)
    device = torch.device(a.device)
    if device.type == "cuda":
        torch.backends.cudnn.allow_tf32 = False
        torch.backends.cuda.matmul.allow_tf32 = False
    arch = a.arch or os.path.splitext(a.weights)[0] + ".json"

    t0 = time.perf_counter()
    net = tessera_unet.load(a.weights, arch)
    with open(arch, encoding="utf-8") as f:
        geometry = json.load(f)["geometry"]
    spec = net.spec
    if spec.dims != 2:
        sys.exit(f"{arch}: a {spec.dims}-D model; this reference is 2-D")
    valid = spec.padding == "valid"
    halo = int(geometry["halo"]) if valid else 0
    alignment = 1 if a.unaligned else int(geometry["alignment"])
    side = a.roi + (int(geometry["remainder"]) if valid else 0)  # output pixels per window

    img, profile = read_scene(a.input)  # the whole scene, as users do
    C, H, W = img.shape
    nodata = np.isnan(img).any(axis=0)
    offset = np.asarray(net.normalization["offset"], np.float32)[:, None, None]
    scale = np.asarray(net.normalization["scale"], np.float32)[:, None, None]
    img -= offset
    img /= scale
    np.nan_to_num(img, copy=False, nan=0.0)
    ys, xs = window_starts(H, side, a.overlap, alignment), window_starts(W, side, a.overlap, alignment)
    # Reflect padding by the halo, and below/right for windows that overhang the scene.
    extra_y, extra_x = max(ys[-1] + side - H, 0), max(xs[-1] + side - W, 0)
    img = np.pad(img, ((0, 0), (halo, halo + extra_y), (halo, halo + extra_x)), mode="reflect")

    dtype = torch.bfloat16 if a.precision == "bf16" else torch.float32
    net = net.to(device=device, dtype=dtype)
    scene = torch.from_numpy(img).to(device)
    importance = torch.from_numpy(gaussian_importance(side, a.sigma_scale)).to(device)
    windows = [(y, x) for y in ys for x in xs]
    infer_seconds, peak_device = None, 0
    for _ in range(max(a.repeats, 1)):
        if device.type == "cuda":
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats(device)
        t_infer = time.perf_counter()
        labels_t = blend(net, scene, windows, side, halo, (spec.classes, H, W), importance, a.batch, dtype)
        if device.type == "cuda":
            torch.cuda.synchronize()
            peak_device = torch.cuda.max_memory_allocated(device) / 2**20
        dt_infer = time.perf_counter() - t_infer
        infer_seconds = dt_infer if infer_seconds is None else min(infer_seconds, dt_infer)
    labels = labels_t.cpu().numpy().astype(np.uint8)
    labels[nodata] = NODATA_LABEL
    if a.labels:
        import rasterio
        with rasterio.open(a.labels, "w", driver="GTiff", width=W, height=H, count=1, dtype="uint8",
                           crs=profile.get("crs"), transform=profile.get("transform"), nodata=NODATA_LABEL,
                           compress="deflate", tiled=True, blockxsize=256, blockysize=256) as dst:
            dst.write(labels, 1)
    dt = time.perf_counter() - t0
    rss = peak_rss_mib()
    print(json.dumps({"seconds": round(dt, 3), "mpix_per_s": round(H * W / 1e6 / dt, 4),
                      "peak_rss_mib": round(rss, 1), "windows": len(windows), "size": [H, W],
                      "window_input": side + 2 * halo, "window_output": side,
                      "interval": [ys[1] - ys[0] if len(ys) > 1 else 0, xs[1] - xs[0] if len(xs) > 1 else 0],
                      "aligned": alignment > 1, "threads": torch.get_num_threads(),
                      "classes_seen": int(len(np.unique(labels))),
                      "device": str(device), "precision": a.precision,
                      "infer_seconds": round(infer_seconds, 4), "peak_device_mib": round(peak_device, 1),
                      "label_counts": np.bincount(labels.ravel(), minlength=spec.classes)[:spec.classes].tolist()}))


if __name__ == "__main__":
    main()
