#!/usr/bin/env python3
"""Turn a deepinfer-bench JSON file into an SVG bar chart (no dependencies beyond Python 3).

One group of bars per benchmark shape: the sm_80 default (the portable Ampere baseline, run as
PTX), the sm_86 default, the local arch's default and the tuned (best measured) config, median
device time on a log scale. A red tick marks the shape's target; the right column gives the
tuned speed-up over the sm_80 default and the tuned time's share of the measured roofline.

usage: plot.py RESULTS.json [-o OUT.svg]     (default: RESULTS.svg next to the JSON)
"""
import argparse
import json
import math
import sys
from xml.sax.saxutils import escape

SERIES = [  # (summary key, legend, colour)
    ("sm80_default_us", "sm_80 default (PTX, baseline)", "#9e9e9e"),
    ("sm86_default_us", "sm_86 default (PTX)", "#64b5f6"),
    ("local_default_us", "local default", "#1565c0"),
    ("tuned_us", "tuned (best candidate)", "#2e7d32"),
]
BAR, GAP = 9, 10
LEFT, PLOT_W, RIGHT = 250, 620, 190
TOP, BOTTOM = 96, 56


def log_ticks(lo, hi):
    ticks = []
    for e in range(math.floor(math.log10(lo)), math.ceil(math.log10(hi)) + 1):
        for m in (1, 2, 5):
            v = m * 10 ** e
            if lo <= v <= hi:
                ticks.append(v)
    return ticks


def fmt_us(v):
    return f"{v:.3g}" if v < 1000 else f"{v:,.0f}"


def tuned_fraction(doc, op, shape):
    for r in doc.get("rows", []):
        if r.get("op") == op and r.get("shape") == shape and r.get("tuned"):
            return r.get("roofline_fraction")
    return None


def render(doc):
    groups = [s for s in doc.get("summary", []) if any(s.get(k) for k, _, _ in SERIES)]
    if not groups:
        raise SystemExit("plot.py: the JSON has no timed rows to plot")
    values = [s[k] for s in groups for k, _, _ in SERIES if s.get(k)]
    values += [s["target_us"] for s in groups if s.get("target_us")]
    lo = 10 ** math.floor(math.log10(min(values)))
    hi = 10 ** math.ceil(math.log10(max(values)))
    span = math.log10(hi) - math.log10(lo)

    def x(v):
        return LEFT + PLOT_W * (math.log10(v) - math.log10(lo)) / span

    group_h = len(SERIES) * BAR + GAP
    height = TOP + len(groups) * group_h + BOTTOM
    width = LEFT + PLOT_W + RIGHT
    gpu = doc.get("gpu", {})
    ceil = doc.get("ceilings", {})
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'font-family="sans-serif" font-size="11">',
        f'<rect width="{width}" height="{height}" fill="white"/>',
        f'<text x="12" y="22" font-size="15" font-weight="bold">deepinfer-bench: '
        f'{escape(str(gpu.get("name", "?")))} ({escape(str(gpu.get("arch", "?")))}, {gpu.get("sm_count", "?")} SMs)</text>',
        f'<text x="12" y="40">{escape(str(doc.get("date", "")))}, commit {escape(str(doc.get("commit", "?")))}, '
        f'driver {escape(str(gpu.get("driver", "?")))}, NVRTC {escape(str(doc.get("nvrtc", "?")))}; median device time, '
        f'L2 flushed; ceilings: copy {ceil.get("copy_gbs") or 0:.0f} GB/s, mma bf16 {ceil.get("mma_bf16_tflops") or 0:.0f} TFLOP/s</text>',
    ]
    lx = 12
    for _, label, colour in SERIES:
        out.append(f'<rect x="{lx:.0f}" y="52" width="12" height="10" fill="{colour}"/>')
        out.append(f'<text x="{lx + 16:.0f}" y="61">{escape(label)}</text>')
        lx += 30 + 6.2 * len(label)  # roughly the label's width at 11 px
    out.append(f'<line x1="{lx:.0f}" y1="51" x2="{lx:.0f}" y2="63" stroke="#d32f2f" stroke-width="2"/>')
    out.append(f'<text x="{lx + 6:.0f}" y="61">target</text>')
    out.append(f'<text x="{LEFT + PLOT_W + 10}" y="{TOP - 10}" font-weight="bold">tuned vs sm80 | roofline</text>')

    for i in range(0, len(groups), 2):  # zebra bands first, so grid lines and bars stay on top
        out.append(f'<rect x="0" y="{TOP + i * group_h - GAP / 2}" width="{width}" height="{group_h}" fill="#f5f5f5"/>')
    for t in log_ticks(lo, hi):
        xt = x(t)
        out.append(f'<line x1="{xt:.1f}" y1="{TOP - 4}" x2="{xt:.1f}" y2="{height - BOTTOM}" stroke="#e0e0e0"/>')
        out.append(f'<text x="{xt:.1f}" y="{height - BOTTOM + 14}" text-anchor="middle">{fmt_us(t)}</text>')
    out.append(f'<text x="{LEFT + PLOT_W / 2}" y="{height - BOTTOM + 34}" text-anchor="middle">'
               f'median time per launch of the whole plan (us, log scale)</text>')

    for i, s in enumerate(groups):
        y0 = TOP + i * group_h
        out.append(f'<text x="{LEFT - 8}" y="{y0 + 2 * BAR}" text-anchor="end" font-weight="bold">'
                   f'{escape(s["op"])}</text>')
        out.append(f'<text x="{LEFT - 8}" y="{y0 + 3 * BAR + 3}" text-anchor="end">{escape(s["shape"])}</text>')
        for j, (key, label, colour) in enumerate(SERIES):
            v = s.get(key)
            if not v:
                continue
            yb = y0 + j * BAR
            out.append(f'<rect x="{LEFT}" y="{yb}" width="{max(x(v) - LEFT, 1):.1f}" height="{BAR - 1}" '
                       f'fill="{colour}"><title>{escape(label)}: {v:.3f} us</title></rect>')
            out.append(f'<text x="{x(v) + 3:.1f}" y="{yb + BAR - 1}" font-size="8">{fmt_us(v)}</text>')
        if s.get("target_us"):
            xt = x(s["target_us"])
            out.append(f'<line x1="{xt:.1f}" y1="{y0 - 2}" x2="{xt:.1f}" y2="{y0 + len(SERIES) * BAR + 1}" '
                       f'stroke="#d32f2f" stroke-width="2"><title>target {s["target_us"]} us</title></line>')
        speed = s.get("tuned_vs_sm80_default")
        frac = tuned_fraction(doc, s["op"], s["shape"])
        cells = [f"{speed:.2f}x" if speed else "-", f"{100 * frac:.0f}%" if frac else "-"]
        met = s.get("target_met")
        colour = "#2e7d32" if met is True else "#d32f2f" if met is False else "black"
        out.append(f'<text x="{LEFT + PLOT_W + 10}" y="{y0 + 2 * BAR + 3}" fill="{colour}">'
                   f'{cells[0]} | {cells[1]}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("results", help="JSON written by deepinfer-bench")
    ap.add_argument("-o", "--out", help="SVG to write (default: the JSON's name with .svg)")
    a = ap.parse_args()
    try:
        with open(a.results) as f:
            doc = json.load(f)
    except (OSError, json.JSONDecodeError) as e:
        sys.exit(f"plot.py: cannot read {a.results}: {e}")
    out = a.out or (a.results[:-5] if a.results.endswith(".json") else a.results) + ".svg"
    with open(out, "w") as f:
        f.write(render(doc))
    print(f"plot.py: wrote {out}")


if __name__ == "__main__":
    main()
