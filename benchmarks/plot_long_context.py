#!/usr/bin/env python3
"""Turn a `deepinfer-model-bench --long-context` JSON file into an SVG chart (Python 3 only).

Left: prefill tok/s per segment of positions (bars) with the segment's fraction of its FLOP floor
(line, right axis), so a collapse would show as a falling fraction, not only falling tok/s.
Right: single-stream decode tok/s at each measured context.

usage: plot_long_context.py RESULTS.json [-o OUT.svg]     (default: RESULTS.svg next to the JSON)
"""
import argparse
import json
from xml.sax.saxutils import escape

W, H = 900, 360
PX0, PX1, PY0, PY1 = 70, 560, 60, 300  # prefill panel
DX0, DX1 = 650, 860  # decode panel


def kilo(n):
    return f"{n // 1024}K" if n % 1024 == 0 or n > 100000 else str(n)


def chart(d):
    lc = d["long_context"]
    segs = lc["prefill"]["segments"]
    dec = [(x["context"], x["decode"]["tok_s"]) for x in lc["decode"] if x.get("decode", {}).get("tok_s")]
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" font-size="11">',
           f'<rect width="{W}" height="{H}" fill="white"/>']
    title = (f"{d['model']['dir']} on {d['gpu']['name']}, commit {d['commit']}: "
             f"{lc['context']:,} tokens of context, time to first token {lc['prefill']['seconds']:.1f} s")
    out.append(f'<text x="10" y="22" font-size="13" font-weight="bold">{escape(title)}</text>')
    # Prefill bars.
    top = max(s["tok_s"] for s in segs) * 1.15
    bw = (PX1 - PX0) / len(segs)
    out.append(f'<text x="{PX0}" y="{PY0 - 12}">prefill tok/s per segment (bars) and fraction of the FLOP floor (line)</text>')
    pts = []
    for i, s in enumerate(segs):
        h = (PY1 - PY0) * s["tok_s"] / top
        x = PX0 + i * bw
        out.append(f'<rect x="{x + 4:.1f}" y="{PY1 - h:.1f}" width="{bw - 8:.1f}" height="{h:.1f}" fill="#1565c0"/>')
        out.append(f'<text x="{x + bw / 2:.1f}" y="{PY1 - h - 4:.1f}" text-anchor="middle">{s["tok_s"]:,.0f}</text>')
        out.append(f'<text x="{x + bw / 2:.1f}" y="{PY1 + 14}" text-anchor="middle">{kilo(s["begin"])}..</text>')
        frac = s.get("roofline_fraction") or 0.0
        pts.append((x + bw / 2, PY1 - (PY1 - PY0) * frac / 0.25))
        out.append(f'<text x="{x + bw / 2:.1f}" y="{pts[-1][1] - 6:.1f}" text-anchor="middle" fill="#c62828">{100 * frac:.1f}%</text>')
    out.append('<polyline fill="none" stroke="#c62828" stroke-width="2" points="' +
               " ".join(f"{x:.1f},{y:.1f}" for x, y in pts) + '"/>')
    out.append(f'<line x1="{PX0}" y1="{PY1}" x2="{PX1}" y2="{PY1}" stroke="black"/>')
    out.append(f'<text x="{PX0}" y="{PY1 + 32}">segment start (positions); red axis: 0..25% of the floor</text>')
    # Decode bars.
    if dec:
        dtop = max(t for _, t in dec) * 1.15
        dw = (DX1 - DX0) / len(dec)
        out.append(f'<text x="{DX0}" y="{PY0 - 12}">decode tok/s, 1 stream</text>')
        for i, (c, t) in enumerate(dec):
            h = (PY1 - PY0) * t / dtop
            x = DX0 + i * dw
            out.append(f'<rect x="{x + 6:.1f}" y="{PY1 - h:.1f}" width="{dw - 12:.1f}" height="{h:.1f}" fill="#2e7d32"/>')
            out.append(f'<text x="{x + dw / 2:.1f}" y="{PY1 - h - 4:.1f}" text-anchor="middle">{t:.1f}</text>')
            out.append(f'<text x="{x + dw / 2:.1f}" y="{PY1 + 14}" text-anchor="middle">{kilo(c)}</text>')
        out.append(f'<line x1="{DX0}" y1="{PY1}" x2="{DX1}" y2="{PY1}" stroke="black"/>')
        flat = lc.get("decode_flatness", {}).get("ratio")
        if flat:
            out.append(f'<text x="{DX0}" y="{PY1 + 32}">{kilo(dec[-1][0])} runs at {flat:.2f}x the {kilo(dec[0][0])} rate</text>')
    out.append("</svg>")
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("results")
    ap.add_argument("-o", "--out")
    a = ap.parse_args()
    with open(a.results) as f:
        d = json.load(f)
    out = a.out or a.results.rsplit(".", 1)[0] + ".svg"
    with open(out, "w") as f:
        f.write(chart(d))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
