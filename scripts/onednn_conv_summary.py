#!/usr/bin/env python3
"""Where a run's oneDNN time goes, from its ONEDNN_VERBOSE=1 log (README, "Inference against
what a PyTorch user writes instead"):

    ONEDNN_VERBOSE=1 tessera infer --model unet-small --init random --seed 0 --classes 4 \
        --input scene.tif --output l.tif --tile 384 --no-progress > verbose.log 2>&1
    scripts/onednn_conv_summary.py verbose.log

Prints, per primitive kind, the executions and their seconds, and for the convolutions the
FLOPs their problem descriptors imply and the GFLOP/s they ran at.
"""
import collections
import re
import sys


def main(path):
    seconds = collections.Counter()
    count = collections.Counter()
    conv_flops = 0.0
    for line in open(path):
        if not line.startswith("onednn_verbose,exec,"):
            continue
        f = line.strip().split(",")
        kind, ms, problem = f[3], float(f[-1]), f[-2]
        seconds[kind] += ms / 1e3
        count[kind] += 1
        if kind == "convolution":
            g = {k: int(re.search(k + r"(\d+)", problem).group(1)) for k in ("mb", "ic", "oc", "oh", "ow", "kh", "kw")}
            conv_flops += 2.0 * g["mb"] * g["ic"] * g["oc"] * g["oh"] * g["ow"] * g["kh"] * g["kw"]
    if not count:
        sys.exit(f"{path}: no onednn_verbose exec lines (run with ONEDNN_VERBOSE=1)")
    for kind, s in seconds.most_common():
        print(f"{kind:14s} {count[kind]:6d} executions {s:9.2f} s")
    if seconds["convolution"] > 0:
        print(f"convolutions: {conv_flops / 1e9:.1f} GFLOP at {conv_flops / seconds['convolution'] / 1e9:.1f} GFLOP/s")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
