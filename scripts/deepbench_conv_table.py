#!/usr/bin/python3
"""Regenerates a device's convolution table (clusters/devices/*-deepbench.yaml) from DeepBench.

DeepBench (github.com/baidu-research/DeepBench) publishes, per GPU, a spreadsheet of measured
training kernels; its "Convolution" section lists for every layer shape (W, H, C, N, K, filter
S × R, padding, stride) the milliseconds of the forward, the backward wrt inputs (data
gradient) and the backward wrt parameters (weight gradient), and the forward algorithm cuDNN
chose. This script copies those rows (nothing fitted, nothing dropped but rows without a
forward time) into the YAML that parallel/plan/src/conv_table.cpp reads, with the file's
provenance (repository, path, commit, sheet) and the spreadsheet's own "Specs" sheet.

Usage (Debian's python3-openpyxl; the repository read through git, never vendored):
  /usr/bin/python3 scripts/deepbench_conv_table.py --git-dir DEEPBENCH/.git \
      --path results/train/DeepBench_NV_V100.xlsx --device V100-SXM2-16GB \
      --fp32-flops 15.7e12 --fp16-flops 125e12 --out clusters/devices/v100-deepbench.yaml
  /usr/bin/python3 scripts/deepbench_conv_table.py --git-dir DEEPBENCH/.git \
      --path results/train/DeepBench_NV_TitanXp.xlsx --device "TITAN Xp (GP102)" \
      --fp32-flops 12.15e12 --out clusters/devices/gp102-deepbench.yaml
--fp32-flops / --fp16-flops are the measured GPU's datasheet peaks: the simulator turns each
time into an efficiency against them, so a table measured on one chip serves another of the
same architecture (the P40 reads the TITAN Xp's table, both GP102).
"""
import argparse
import io
import subprocess
import sys

import openpyxl

COLUMNS = {  # our key: the header DeepBench writes (row after "Convolution")
    "W": "W", "H": "H", "C": "C", "N": "N", "K": "K", "S": "S", "R": "R",
    "pad_w": "pad_w", "pad_h": "pad_h", "stride_w": "Horizontal stride", "stride_h": "Vertical stride",
    "fwd_ms": "Forward (msec)", "bwd_data_ms": "wrt Inputs (msec)", "bwd_weights_ms": "wrt Parameters (msec)",
    "algorithm": "Forward Algorithm",
}


def header_key(cell):
    text = str(cell or "").strip()
    for key, name in COLUMNS.items():
        if text == name or (len(name) == 1 and text.startswith(name + " (")):
            return key
    return None


def convolution_rows(ws):
    rows = list(ws.iter_rows(values_only=True))
    start = next(i for i, r in enumerate(rows) if r and str(r[0] or "").startswith("Convolution"))
    header = next(i for i in range(start, start + 3) if "W" in [str(c or "").strip() for c in rows[i]])
    cols = {header_key(c): j for j, c in enumerate(rows[header]) if header_key(c)}
    missing = set(COLUMNS) - set(cols)
    if missing:
        sys.exit(f"{ws.title}: convolution header lacks {sorted(missing)}")
    out = []
    for r in rows[header + 1:]:
        if not r or r[cols["W"]] in (None, "") or not isinstance(r[cols["W"]], (int, float)):
            if out:
                break  # the section ends at the first row without a shape
            continue
        row = {k: r[j] for k, j in cols.items()}
        for k in ("fwd_ms", "bwd_data_ms", "bwd_weights_ms"):
            row[k] = row[k] if isinstance(row[k], (int, float)) and row[k] > 0 else None  # "N/A*": not measured
        if row["fwd_ms"] is not None:
            out.append(row)
    return out


def specs(wb):
    ws = next((w for w in wb.worksheets if w.title.strip().lower() == "specs"), None)
    if ws is None:
        return {}
    return {str(r[0]).strip(): str(r[1]).strip() for r in ws.iter_rows(values_only=True)
            if r and r[0] and len(r) > 1 and r[1] not in (None, "", "-")}


def yaml_row(r):
    shape = [int(r[k]) for k in ("W", "H", "C", "N", "K", "S", "R", "pad_w", "pad_h", "stride_w", "stride_h")]
    times = ["null" if r[k] is None else f"{float(r[k]):.6g}" for k in ("fwd_ms", "bwd_data_ms", "bwd_weights_ms")]
    return f"  - [{', '.join(map(str, shape))}, {', '.join(times)}, {str(r['algorithm']).strip()}]"


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--git-dir", required=True, help="DeepBench's git directory (its HEAD is read)")
    p.add_argument("--path", required=True, help="the spreadsheet inside the repository")
    p.add_argument("--device", required=True, help="the measured GPU's name")
    p.add_argument("--fp32-flops", type=float, required=True, help="its datasheet FP32 peak, FLOP/s")
    p.add_argument("--fp16-flops", type=float, default=0, help="its datasheet FP16 (tensor-core) peak, FLOP/s")
    p.add_argument("--out", required=True)
    a = p.parse_args()

    git = ["git", "--git-dir", a.git_dir]
    commit = subprocess.run(git + ["rev-parse", "HEAD"], check=True, capture_output=True, text=True).stdout.strip()
    blob = subprocess.run(git + ["show", f"HEAD:{a.path}"], check=True, capture_output=True).stdout
    if blob.startswith(b"version https://git-lfs"):
        sys.exit(f"{a.path}: a Git LFS pointer, not the spreadsheet")
    wb = openpyxl.load_workbook(io.BytesIO(blob), data_only=True)
    sheets = [ws for ws in wb.worksheets if ws.title.strip().lower() != "specs"]
    fp32 = next(ws for ws in sheets if "32" in ws.title)
    fp16 = next((ws for ws in sheets if "16" in ws.title), None)

    lines = [
        f"# Convolution kernels measured on {a.device} by DeepBench, copied row by row (nothing fitted):",
        f"#   regenerate: /usr/bin/python3 scripts/deepbench_conv_table.py --git-dir DEEPBENCH/.git \\",
        f"#     --path {a.path} --device \"{a.device}\" --fp32-flops {a.fp32_flops:g}"
        + (f" --fp16-flops {a.fp16_flops:g}" if a.fp16_flops else "") + f" --out {a.out}",
        "# Each row: [W, H, C, N, K, S, R, pad_w, pad_h, stride_w, stride_h, forward ms, backward-data ms,",
        "#            backward-weights ms, forward algorithm]; null = not measured (DeepBench's N/A*).",
        "source:",
        "  repository: baidu-research/DeepBench",
        f"  path: {a.path}",
        f"  commit: {commit}",
    ]
    for k, v in specs(wb).items():
        if k in ("GPU Model", "CUDA Version", "Cudnn Version", "Nvidia Driver"):
            lines.append(f"  {k.lower().replace(' ', '_')}: \"{v}\"")
    lines += [f"device: \"{a.device}\"", f"fp32_flops: {a.fp32_flops:g}", f"fp16_flops: {a.fp16_flops:g}"]
    for name, ws in (("fp32", fp32), ("fp16", fp16)):
        if ws is None:
            continue
        rows = convolution_rows(ws)
        lines.append(f"{name}:  # sheet \"{ws.title}\", {len(rows)} shapes")
        lines += [yaml_row(r) for r in rows]
    with open(a.out, "w") as f:
        f.write("\n".join(lines) + "\n")
    print(f"{a.out}: {commit[:12]} {a.path}")


if __name__ == "__main__":
    main()
