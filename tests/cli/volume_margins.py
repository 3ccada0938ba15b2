"""One-process top-2 softmax margins of a volume, from an independent implementation.

Usage: volume_margins.py MODEL_PT MODEL_JSON VOLUME TILE REF_LABELS TIE MARGINS_NPY

MODEL_PT / MODEL_JSON are what `tessera export` writes for the checkpoint that `tessera infer`
ran; python/tessera_unet.py rebuilds the network in PyTorch, here in float64. The volume
(NIfTI, read with nibabel) is cut into tiles as Tessera's TileGrid does for `same` padding
(core/base/src/tile_grid.cpp): inset side S = min(TILE, extent rounded up to the pooling
alignment) per axis, input window [o - halo, o + S + halo) read with reflect_index
(core/base/src/geometry.cpp), clipped and normalised as core/src/tensor_io.cpp does with
model.json's "normalization", the network run on the whole window and its inset [o, min(o + S,
N)) kept. Saves, in (k, j, i) order (the NIfTI voxel (i, j, k) at [k, j, i]), the difference of
the two largest class probabilities (the margin) of every voxel.

Also checks that this is the network `tessera infer` ran: its argmax equals the one-process
labels REF_LABELS except at voxels whose margin is <= TIE (where float32 rounding may swap the
top two), and that such near-ties are rare (else a comparison allowing flips there proves
nothing). Exit 1 with a message otherwise.
"""
import json
import os
import sys

import nibabel
import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
import tessera_unet  # noqa: E402

MAX_TIE_FRACTION = 0.01


def fail(msg):
    print(msg)
    sys.exit(1)


def reflect_index(i, n):
    """geometry.cpp's reflect_index: mirror without repeating the edge, any distance out."""
    if n == 1:
        return np.zeros_like(i)
    m = np.mod(i, 2 * (n - 1))
    return np.where(m < n, m, 2 * (n - 1) - m)


def volume(path, normalization):
    """The normalised volume (channels, k, j, i), float64; ITK's axis order (z, y, x)."""
    img = nibabel.load(path)
    x = np.asarray(img.get_fdata(dtype=np.float64))
    x = x[..., None] if x.ndim == 3 else x.reshape(x.shape[:3] + (-1,))
    x = np.transpose(x, (3, 2, 1, 0))  # (i, j, k, c) -> (c, k, j, i)
    bshape = (-1, 1, 1, 1)
    if normalization.get("clip_low"):
        low = np.asarray(normalization["clip_low"], np.float64).reshape(bshape)
        high = np.asarray(normalization["clip_high"], np.float64).reshape(bshape)
        x = np.maximum(np.minimum(x, high), low)
    offset = np.asarray(normalization["offset"], np.float64).reshape(bshape)
    scale = np.asarray(normalization["scale"], np.float64).reshape(bshape)
    if np.isnan(x).any():
        fail(f"{path}: has NaN voxels; this check does not model nodata")
    return (x - offset) / scale


def probabilities(net, x, tile, halo, alignment):
    """Softmax of the tiled logits (classes, k, j, i), as Tessera stitches them."""
    extent = x.shape[1:]
    steps = [min(tile, -(-n // alignment) * alignment) for n in extent]
    out = np.zeros((net.spec.classes,) + extent)
    for origin in np.ndindex(*[-(-n // s) for n, s in zip(extent, steps)]):
        o = [k * s for k, s in zip(origin, steps)]
        idx = [reflect_index(np.arange(a - halo, a + s + halo), n) for a, s, n in zip(o, steps, extent)]
        window = torch.from_numpy(np.ascontiguousarray(x[np.ix_(range(x.shape[0]), *idx)]))[None]
        with torch.no_grad():
            p = torch.softmax(net(window), 1)[0].numpy()
        inset = tuple(slice(a, min(a + s, n)) for a, s, n in zip(o, steps, extent))
        keep = tuple(slice(halo, halo + (i.stop - i.start)) for i in inset)
        out[(slice(None),) + inset] = p[(slice(None),) + keep]
    return out


def main(model_pt, model_json, image, tile, ref_labels, tie, margins_npy):
    tile, tie = int(tile), float(tie)
    net = tessera_unet.load(model_pt, model_json).double()
    if net.spec.padding != "same":
        fail(f"{model_json}: padding {net.spec.padding}; this tiling is the `same` one")
    with open(model_json, encoding="utf-8") as f:
        description = json.load(f)
    normalization, geometry = description["normalization"], description["geometry"]
    if normalization.get("kind") not in ("ct", "affine"):
        fail(f"{model_json}: normalization {normalization.get('kind')!r}: only fixed (ct, affine) ones are modelled")
    x = volume(image, normalization)
    p = probabilities(net, x, tile, int(geometry["halo"]), int(geometry["alignment"]))
    top = np.sort(p, axis=0)
    margin = top[-1] - top[-2]
    np.save(margins_npy, margin)

    ref = np.asarray(nibabel.load(ref_labels).dataobj).T  # (i, j, k) -> (k, j, i)
    labels = p.argmax(0)
    if ref.shape != labels.shape:
        fail(f"{ref_labels}: shape {ref.shape[::-1]} but the volume is {labels.shape[::-1]}")
    ties = margin <= tie
    flips = np.argwhere(labels != ref)
    untied = [tuple(int(v) for v in f[::-1]) for f in flips if not ties[tuple(f)]]
    counts = np.bincount(labels.ravel(), minlength=net.spec.classes).tolist()
    print(f"PyTorch float64, tile {tile}: labels {counts} per class, {len(flips)} differ from one process's, "
          f"{int(ties.sum())} of {margin.size} voxels within {tie:.0e} (closest {margin.min():.1e})"
          + (f"; {len(untied)} differ away from a near-tie, e.g. (i,j,k) {untied[:3]}" if untied else ""))
    if untied:
        sys.exit(1)
    if sum(c > 0 for c in counts) < 2:
        fail("one class everywhere: a label comparison would prove nothing")
    if ties.sum() > MAX_TIE_FRACTION * margin.size:
        fail(f"more than {MAX_TIE_FRACTION:.0%} of the voxels are near-ties: a comparison allowing flips there proves little")


if __name__ == "__main__":
    if len(sys.argv) != 8:
        fail(__doc__.strip().splitlines()[2])
    main(*sys.argv[1:])
