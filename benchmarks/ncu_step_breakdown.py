#!/usr/bin/env python3
"""Per-kernel breakdown of one model step from an Nsight Compute CSV (Python 3 only).

Takes `ncu --graph-profiling node --metrics gpu__time_duration.sum --csv --page raw` output of a
deepinfer-model-bench run and keeps the last N kernel rows (one decode step's graph nodes: the
bench's last call), then prints, per kernel kind (the name without its config hash), the summed
device time, the count and the mean, and writes those rows as a small CSV when asked.
Each kernel was timed alone with caches flushed, so the sum is below a step's graph replay time
by the launch gaps between nodes (and above it where a kernel gains from a warm L2).

usage: ncu_step_breakdown.py NCU.csv --last N [--rows-out STEP.csv]
"""
import argparse
import collections
import csv
import re


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("csv")
    ap.add_argument("--last", type=int, required=True, help="kernel rows of the step (its graph's kernel nodes)")
    ap.add_argument("--rows-out", help="write the step's rows (name, grid, block, ns) here")
    a = ap.parse_args()
    with open(a.csv) as f:
        rows = list(csv.reader(line for line in f if line.startswith('"')))
    hdr, units, data = rows[0], rows[1], rows[2:]
    name, grid, block, t = (hdr.index(k) for k in ("Kernel Name", "Grid Size", "Block Size", "gpu__time_duration.sum"))
    if units[t] not in ("ns", "nsecond"):
        raise SystemExit(f"gpu__time_duration.sum is in {units[t]}, expected ns")
    step = data[-a.last:]
    kind = lambda n: re.sub(r"_[0-9a-f]{16}", "", n).split("<")[0][:60]
    agg = collections.defaultdict(lambda: [0, 0.0])
    for r in step:
        ns = float(r[t].replace(",", ""))
        agg[kind(r[name])][0] += 1
        agg[kind(r[name])][1] += ns
    total = sum(v[1] for v in agg.values())
    print(f"{len(step)} kernels, {total / 1e3:.1f} us of device time")
    print(f"{'us':>9} {'share':>6} {'count':>5} {'mean us':>8}  kernel")
    for k, (c, ns) in sorted(agg.items(), key=lambda kv: -kv[1][1]):
        print(f"{ns / 1e3:9.1f} {100 * ns / total:5.1f}% {c:5d} {ns / 1e3 / c:8.1f}  {k}")
    if a.rows_out:
        with open(a.rows_out, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["kernel", "grid", "block", "ns"])
            for r in step:
                w.writerow([r[name], r[grid], r[block], r[t].replace(",", "")])


if __name__ == "__main__":
    main()
