#!/usr/bin/env python3
"""Plots metrics of finished (or running) troupe runs against the step or time, as one SVG file.

Each run is a directory with metrics.jsonl (what `troupe run` writes under logging.dir); each
--metric becomes one panel with a line per run. No dependencies beyond Python 3's standard library,
so it works wherever the runs are.

    tools/plot_runs.py --out bench/plots/demo_entropy.svg \\
        --metric val/accuracy --metric actor/entropy \\
        demo=runs/grpo-arith dapo=runs/grpo-arith-95

A run is NAME=DIR or DIR (then its name is DIR's last component). A metric no row of a run holds
is an error naming the run and the metric; a line of metrics.jsonl that is not a JSON object is an
error naming the file and line. --smooth K plots the mean of the last K points (noisy per-step
metrics such as the entropy); evaluations (val/...) are plotted as recorded. --x minutes plots
against the minutes since the run's first record (its "time"), e.g. to compare runs by wall time;
a row without a numeric "time" is then an error naming the file and line.
"""

import argparse
import json
import math
import os
import sys
from xml.sax.saxutils import escape

COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#17becf"]
PANEL_W, PANEL_H = 640, 220
MARGIN_L, MARGIN_R, MARGIN_T, MARGIN_B = 64, 300, 34, 36


class PlotError(Exception):
    pass


def read_run(directory):
    path = os.path.join(directory, "metrics.jsonl")
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except OSError as e:
        raise PlotError(f"{path}: {e.strerror}") from e
    rows = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as e:
            raise PlotError(f"{path}:{number}: not JSON ({e.msg})") from e
        if not isinstance(row, dict) or not isinstance(row.get("step"), (int, float)):
            raise PlotError(f"{path}:{number}: expected an object with a numeric \"step\"")
        row["_where"] = f"{path}:{number}"
        rows.append(row)
    return rows


def x_of(rows, x):
    """The x value of each row: its step, or minutes since the run's first record."""
    if x == "step":
        return [r["step"] for r in rows]
    for r in rows:
        if not isinstance(r.get("time"), (int, float)):
            raise PlotError(f"{r['_where']}: --x minutes needs a numeric \"time\"")
    t0 = min((r["time"] for r in rows), default=0)
    return [(r["time"] - t0) / 60 for r in rows]


def series(rows, metric, smooth, x="step"):
    points = [(xv, r[metric]) for xv, r in zip(x_of(rows, x), rows)
              if isinstance(r.get(metric), (int, float)) and math.isfinite(r[metric])]
    points.sort()
    if smooth > 1:
        out = []
        for i, (step, _) in enumerate(points):
            window = points[max(0, i - smooth + 1):i + 1]
            out.append((step, sum(v for _, v in window) / len(window)))
        points = out
    return points


def nice_ticks(lo, hi, count=5):
    if hi <= lo:
        hi = lo + 1
    raw = (hi - lo) / count
    magnitude = 10 ** math.floor(math.log10(raw))
    step = min((m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= raw),
               default=10 * magnitude)
    first = math.floor(lo / step + 1e-9)
    last = math.ceil(hi / step - 1e-9)
    return [round(i * step, 10) for i in range(first, max(last, first + 1) + 1)]


def fmt(v):
    return f"{v:g}" if abs(v) >= 1e-3 or v == 0 else f"{v:.1e}"


def panel(svg, top, metric, runs, smooth, x="step"):
    all_points = [p for _, pts in runs for p in pts]
    xs = [x for x, _ in all_points]
    ys = [y for _, y in all_points]
    xticks = nice_ticks(0, max(xs))
    yticks = nice_ticks(min(ys), max(ys))
    x0, x1 = xticks[0], xticks[-1]
    y0, y1 = yticks[0], yticks[-1]
    left, right = MARGIN_L, MARGIN_L + PANEL_W
    bottom = top + PANEL_H

    def px(x):
        return left + (x - x0) / (x1 - x0) * PANEL_W

    def py(y):
        return bottom - (y - y0) / (y1 - y0) * PANEL_H

    title = metric + (f" (mean of last {smooth} steps)" if smooth > 1 else "")
    svg.append(f'<text x="{left}" y="{top - 10}" font-weight="bold">{escape(title)}</text>')
    for t in yticks:
        svg.append(f'<line x1="{left}" x2="{right}" y1="{py(t):.1f}" y2="{py(t):.1f}" '
                   'stroke="#ddd"/>')
        svg.append(f'<text x="{left - 6}" y="{py(t) + 4:.1f}" text-anchor="end">{fmt(t)}</text>')
    for t in xticks:
        svg.append(f'<line x1="{px(t):.1f}" x2="{px(t):.1f}" y1="{top}" y2="{bottom}" '
                   'stroke="#eee"/>')
        svg.append(f'<text x="{px(t):.1f}" y="{bottom + 16}" text-anchor="middle">{fmt(t)}</text>')
    svg.append(f'<rect x="{left}" y="{top}" width="{PANEL_W}" height="{PANEL_H}" fill="none" '
               'stroke="#888"/>')
    svg.append(f'<text x="{right}" y="{bottom + 30}" text-anchor="end">{x}</text>')
    for i, (name, pts) in enumerate(runs):
        color = COLORS[i % len(COLORS)]
        path = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in pts)
        svg.append(f'<polyline class="run" data-run="{escape(name)}" fill="none" '
                   f'stroke="{color}" stroke-width="1.6" points="{path}"/>')
        if len(pts) <= 60:
            for x, y in pts:
                svg.append(f'<circle cx="{px(x):.1f}" cy="{py(y):.1f}" r="2.2" fill="{color}"/>')
        ly = top + 14 + 18 * i
        svg.append(f'<line x1="{right + 12}" x2="{right + 32}" y1="{ly - 4}" y2="{ly - 4}" '
                   f'stroke="{color}" stroke-width="2"/>')
        svg.append(f'<text x="{right + 38}" y="{ly}">{escape(name)}</text>')


def plot(runs, metrics, smooth, x="step"):
    svg = []
    height = len(metrics) * (PANEL_H + MARGIN_T + MARGIN_B) + 10
    width = MARGIN_L + PANEL_W + MARGIN_R
    svg.append(f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
               'font-family="sans-serif" font-size="12">')
    svg.append(f'<rect width="{width}" height="{height}" fill="white"/>')
    for i, metric in enumerate(metrics):
        k = 1 if metric.startswith("val/") else smooth
        lines = []
        for name, rows in runs:
            pts = series(rows, metric, k, x)
            if not pts:
                raise PlotError(f"run {name}: no row has the metric {metric}")
            lines.append((name, pts))
        panel(svg, MARGIN_T + i * (PANEL_H + MARGIN_T + MARGIN_B), metric, lines, k, x)
    svg.append("</svg>")
    return "\n".join(svg) + "\n"


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", help="NAME=DIR or DIR (a run's logging.dir)")
    parser.add_argument("--metric", action="append", required=True, help="a metric to plot")
    parser.add_argument("--out", required=True, help="the SVG file to write")
    parser.add_argument("--smooth", type=int, default=1, help="mean of the last K points")
    parser.add_argument("--x", choices=["step", "minutes"], default="step",
                        help="the x axis: the step, or minutes since the run's first record")
    args = parser.parse_args(argv)
    if args.smooth < 1:
        parser.error("--smooth must be at least 1")
    try:
        runs = []
        for spec in args.runs:
            name, sep, directory = spec.partition("=")
            if not sep:
                directory, name = spec, os.path.basename(os.path.normpath(spec))
            runs.append((name, read_run(directory)))
        text = plot(runs, args.metric, args.smooth, args.x)
    except PlotError as e:
        print(f"plot_runs: {e}", file=sys.stderr)
        return 1
    tmp = args.out + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, args.out)
    print(f"plot_runs: wrote {args.out} ({len(runs)} runs, {len(args.metric)} panels)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
