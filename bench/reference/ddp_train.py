#!/usr/bin/python3
"""The data-parallel training a PyTorch user runs instead of `tessera train` under mpirun:
PyTorch DistributedDataParallel over the gloo backend on the CPU, one process per rank
(torch.multiprocessing), Tessera's U-Net rebuilt in PyTorch (python/tessera_unet.py), random
tiles cut from a scene read whole with rasterio, MONAI's DiceCELoss written out, Adam.

    ddp_train.py --image scene.tif --labels scene_labels.tif --ranks 2 --tile 128 \
        --global-batch 4 --steps 16 --threads 2 [--check]

Same work per step as `tessera bench train` gives Tessera: unet-tiny with `same` padding
(4 levels, 16 base filters, 2 convolutions per level, no normalisation, transposed-convolution
decoder), tiles of side --tile (a `same` network trains on plain tiles), --global-batch tiles
per step split evenly over the ranks, Adam at lr 1e-3, Dice + cross-entropy, fp32. The
--threads cores are shared by the ranks (threads // ranks each), as Tessera's ranks share them.

Needs Debian's python3-torch, python3-rasterio and python3-numpy only. Prints one JSON line
(the last line of stdout) that `tessera bench train` parses: step_s_ddp, the median seconds
per step of rank 0 (the first step, which includes start-up, left out), and tiles_per_s_ddp.
--check also trains one process on the whole global batch and reports max_rel_param_diff,
the largest relative difference of its parameters from the DDP run's (float rounding: DDP
averages gradients of per-sample losses, which equals the global batch's gradient).
"""
import argparse
import json
import os
import socket
import statistics
import sys
import tempfile
import time

import numpy as np
import rasterio
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))
import tessera_unet  # noqa: E402  (the project's python/ folder)


def read_pair(image_path, labels_path, classes):
    """The scene standardised per band (mean 0, std 1) and its labels (int64; values outside
    0..classes-1 become -100, ignored by the cross-entropy)."""
    with rasterio.open(image_path) as ds:
        img = ds.read().astype(np.float32)
    img -= img.mean(axis=(1, 2), keepdims=True)
    img /= img.std(axis=(1, 2), keepdims=True) + 1e-6
    with rasterio.open(labels_path) as ds:
        lab = ds.read(1).astype(np.int64)
    lab[(lab < 0) | (lab >= classes)] = -100
    return torch.from_numpy(img), torch.from_numpy(lab)


def global_batch(img, lab, step, n, tile, seed):
    """The step's n random tiles (every rank draws the same ones and keeps its slice)."""
    g = torch.Generator().manual_seed(seed * 100003 + step)
    H, W = lab.shape
    ys = torch.randint(0, H - tile + 1, (n,), generator=g).tolist()
    xs = torch.randint(0, W - tile + 1, (n,), generator=g).tolist()
    x = torch.stack([img[:, y:y + tile, x:x + tile] for y, x in zip(ys, xs)])
    t = torch.stack([lab[y:y + tile, x:x + tile] for y, x in zip(ys, xs)])
    return x, t


def dice_ce_loss(logits, target, smooth=1e-5):
    """MONAI's DiceCELoss(to_onehot_y=True, softmax=True): cross-entropy (mean over pixels)
    plus 1 - Dice, Dice per sample and class, averaged (ignored pixels count for neither)."""
    ce = F.cross_entropy(logits, target, ignore_index=-100)
    keep = (target >= 0).unsqueeze(1)
    p = torch.softmax(logits, 1) * keep
    onehot = F.one_hot(target.clamp(min=0), logits.shape[1]).permute(0, 3, 1, 2).to(p.dtype) * keep
    inter = (p * onehot).sum((2, 3))
    denom = p.sum((2, 3)) + onehot.sum((2, 3))
    dice = 1 - (2 * inter + smooth) / (denom + smooth)
    return ce + dice.mean()


def spec(a, channels):
    return tessera_unet.UNetSpec(dims=2, in_channels=channels, classes=a.classes, levels=a.levels,
                                 convs_per_level=2, base_filters=a.filters, kernel=3, padding="same",
                                 norm="none", decoder="transposed")


def train(rank, world, a, port, out):
    torch.set_num_threads(max(1, a.threads // world))
    if world > 1:
        os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = "127.0.0.1", str(port)
        dist.init_process_group("gloo", rank=rank, world_size=world)
    img, lab = read_pair(a.image, a.labels, a.classes)
    torch.manual_seed(a.seed)
    net = tessera_unet.TesseraUNet(spec(a, img.shape[0]))
    model = torch.nn.parallel.DistributedDataParallel(net) if world > 1 else net
    opt = torch.optim.Adam(model.parameters(), lr=a.lr)
    per = a.global_batch // world
    times = []
    for step in range(a.steps):
        t0 = time.perf_counter()
        x, t = global_batch(img, lab, step, a.global_batch, a.tile, a.seed)
        x, t = x[rank * per:(rank + 1) * per], t[rank * per:(rank + 1) * per]
        opt.zero_grad()
        loss = dice_ce_loss(model(x), t)
        loss.backward()
        opt.step()
        times.append(time.perf_counter() - t0)
    if rank == 0:
        torch.save({"params": [p.detach().clone() for p in net.parameters()], "times": times,
                    "loss": loss.item()}, out)
    if world > 1:
        dist.destroy_process_group()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--image", required=True, help="training scene (GeoTIFF)")
    ap.add_argument("--labels", required=True, help="its label raster (one band of class ids)")
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--steps", type=int, default=16)
    ap.add_argument("--global-batch", type=int, default=4)
    ap.add_argument("--tile", type=int, default=128)
    ap.add_argument("--threads", type=int, default=os.cpu_count(), help="cores shared by all ranks")
    ap.add_argument("--levels", type=int, default=4)
    ap.add_argument("--filters", type=int, default=16)
    ap.add_argument("--classes", type=int, default=4)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--check", action="store_true", help="also train one process on the global batch and compare")
    a = ap.parse_args()
    if a.ranks < 1 or a.global_batch % a.ranks:
        sys.exit("--global-batch must be a multiple of --ranks")
    if a.steps < 2:
        sys.exit("--steps must be >= 2 (the first step is not timed)")
    with tempfile.TemporaryDirectory() as d:
        many = os.path.join(d, "ddp.pt")
        if a.ranks > 1:
            mp.spawn(train, args=(a.ranks, a, free_port(), many), nprocs=a.ranks, join=True)
        else:
            train(0, 1, a, 0, many)
        ddp = torch.load(many)
        report = {"ranks": a.ranks, "tile": a.tile, "global_batch": a.global_batch, "steps": a.steps,
                  "threads_per_rank": max(1, a.threads // a.ranks)}
        med = statistics.median(ddp["times"][1:])
        report.update(step_s_ddp=round(med, 4), tiles_per_s_ddp=round(a.global_batch / med, 2),
                      final_loss=round(ddp["loss"], 4))
        if a.check:
            one = os.path.join(d, "one.pt")
            train(0, 1, a, 0, one)
            single = torch.load(one)
            med1 = statistics.median(single["times"][1:])
            report.update(step_s_1rank=round(med1, 4), tiles_per_s_1rank=round(a.global_batch / med1, 2),
                          max_rel_param_diff=max((p - q).abs().max().item() / (p.abs().max().item() + 1e-12)
                                                 for p, q in zip(single["params"], ddp["params"])))
    print(json.dumps(report))


if __name__ == "__main__":
    main()
