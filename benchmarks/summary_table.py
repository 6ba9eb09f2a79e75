#!/usr/bin/env python3
"""Markdown table of a deepinfer-bench JSON (benchmarks/results/*.json) for the README."""
import json, sys

# Later files (re-runs of some ops) replace the earlier file's rows for the same op and shape.
d = json.load(open(sys.argv[1]))
for extra in sys.argv[2:]:
    e = json.load(open(extra))
    keys = {(s["op"], s["shape"]) for s in e["summary"]}
    d["summary"] = [s for s in d["summary"] if (s["op"], s["shape"]) not in keys] + e["summary"]
    d["rows"] = [r for r in d["rows"] if (r["op"], r["shape"]) not in keys] + e["rows"]
order = {}
for s in d["summary"]:
    order.setdefault(s["op"], len(order))
d["summary"].sort(key=lambda s: order[s["op"]])
rows = {(r["op"], r["shape"], "tuned"): r for r in d["rows"] if r.get("tuned")}
c = d["ceilings"]
print(f'{d["gpu"]["name"]}, driver {d["gpu"].get("driver", "?")}, commit {d["commit"]}, {d["date"]}; '
      f'measured ceilings: copy {c["copy_gbs"]:.0f} GB/s, mma.sync bf16 {c["mma_bf16_tflops"]:.0f} TFLOP/s. '
      'Device time, L2 flushed, median of 30.\n')


def floor_of(s):
    """The shape's floor (us) and what bounds it: from the JSON, or for files written before
    deepinfer-bench recorded it, from its bytes, FLOPs and the run's ceilings."""
    if s.get("roofline_floor_us") is not None:
        return s["roofline_floor_us"], s.get("roofline_bound") or "?"
    copy = s["bytes"] / (c["copy_gbs"] * 1e3) if s.get("bytes") and c.get("copy_gbs") else 0
    mma = s["flops"] / (c["mma_bf16_tflops"] * 1e6) if s.get("flops") and c.get("mma_bf16_tflops") else 0
    if not copy and not mma:
        return None, None
    return max(copy, mma), "copy" if copy >= mma else "mma"


print("| op | shape | sm_80 default (PTX) | local default | tuned | tuned vs sm_80 | floor (bound) | of floor | target "
      "| best public |")
print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
fmt = lambda v: "-" if v is None else f"{v:.1f}"
for s in d["summary"]:
    t = rows.get((s["op"], s["shape"], "tuned"))
    roof = f'{100 * t["roofline_fraction"]:.0f}%' if t and t.get("roofline_fraction") else "-"
    floor_us, bound = floor_of(s)
    floor = "-" if floor_us is None else f"{floor_us:.2f} ({bound})"
    tuned = fmt(s.get("tuned_us")) if not s.get("failed_checks") else f'{fmt(s.get("tuned_us"))} (check FAILED)'
    sp = s.get("tuned_vs_sm80_default")
    target = s.get("target_us")
    met = "" if target is None else (" met" if s.get("target_met") else " missed")
    print(f'| {s["op"]} | {s["shape"]} | {fmt(s.get("sm80_default_us"))} | {fmt(s.get("local_default_us"))} | {tuned} | '
          f'{"-" if sp is None else f"{sp:.2f}x"} | {floor} | {roof} | '
          f'{"-" if target is None else f"<= {target}{met}"} | '
          f'{fmt(s.get("public_best_us"))} |')
