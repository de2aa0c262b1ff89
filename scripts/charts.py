#!/usr/bin/env python3
"""Tables and SVG line charts for BENCHMARKS.md, from measured results.

  scripts/charts.py timers [--criterion target/criterion] [--memory FILE] [--out docs]
      ns per operation of the timer benchmarks (`cargo bench -p
      timer-bench --bench timers`), one table and one chart per operation
      (enroll, refresh, unenroll, expire all) over the timer count; with
      --memory, the Markdown table printed by `cargo bench -p timer-bench
      --bench timer_memory`, charted as bytes per timer.
  scripts/charts.py scale FILE [--out docs]
      the CSV written by scripts/scale.sh: requests/s and p99 over the
      number of keep-alive connections, per server.
  scripts/charts.py idle FILE [--out docs]
      the CSV written by scripts/idle-sweep.sh: RSS per idle connection
      over the number of connections.

Prints the Markdown tables on stdout and names each SVG it writes. Axes
spanning more than a decade are logarithmic. Standard library only.
"""

import argparse
import csv
import json
import math
import os
import sys
from pathlib import Path

COLOURS = {
    "lists": "#1f77b4",
    "kas": "#1f77b4",
    "binheap": "#ff7f0e",
    "nginx": "#2ca02c",
    "uvheap": "#2ca02c",
    "node": "#9467bd",
    "delayqueue": "#d62728",
}
FALLBACK = ["#8c564b", "#e377c2", "#7f7f7f", "#bcbd22"]


def nice_ticks(lo, hi, log):
    """Tick values: powers of ten (and 2x, 5x when few) on a log axis,
    a 1-2-5 step on a linear one."""
    if log:
        ticks = []
        first, last = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
        few = last - first <= 2
        for e in range(first, last + 1):
            for m in (1, 2, 5) if few else (1,):
                v = m * 10**e
                if lo <= v * 1.0001 and v <= hi * 1.0001:
                    ticks.append(v)
        return ticks
    raw = (hi - lo) / 6 or 1
    base = 10 ** math.floor(math.log10(raw))
    step = next(m * base for m in (1, 2, 5, 10) if m * base >= raw)
    start = math.ceil(lo / step) * step
    return [start + i * step for i in range(int((hi - start) / step) + 1)]


def label(v):
    if v >= 1e6 and v % 1e6 == 0:
        return f"{v / 1e6:g}M"
    if v >= 1e3 and v % 1e3 == 0:
        return f"{v / 1e3:g}k"
    if v >= 100:
        return f"{v:,.0f}"
    return f"{v:g}"


def line_chart(path, title, series, x_label, y_label, y_log=None, subtitle=""):
    """series: list of (name, [(x, y), ...]). Writes an SVG to path."""
    W, H, L, R, T, B = 760, 440, 80, 150, 62, 58
    pw, ph = W - L - R, H - T - B
    xs = [x for _, pts in series for x, _ in pts]
    ys = [y for _, pts in series for _, y in pts if y is not None]
    x_lo, x_hi = min(xs), max(xs)
    x_log = x_hi / x_lo > 20
    y_lo, y_hi = min(ys), max(ys)
    if y_log is None:
        y_log = y_lo > 0 and y_hi / y_lo > 20
    if y_log:
        y_lo = 10 ** math.floor(math.log10(y_lo))
        y_hi = 10 ** math.ceil(math.log10(y_hi))
    else:
        y_lo = 0
        y_hi = y_hi * 1.1 or 1

    def fx(x):
        if x_log:
            return L + (math.log10(x) - math.log10(x_lo)) / (math.log10(x_hi) - math.log10(x_lo)) * pw
        return L + (x - x_lo) / ((x_hi - x_lo) or 1) * pw

    def fy(y):
        if y_log:
            return T + ph - (math.log10(y) - math.log10(y_lo)) / (math.log10(y_hi) - math.log10(y_lo)) * ph
        return T + ph - (y - y_lo) / ((y_hi - y_lo) or 1) * ph

    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" viewBox="0 0 {W} {H}" font-family="DejaVu Sans, Arial, sans-serif">',
        f'<rect width="{W}" height="{H}" fill="#ffffff"/>',
        f'<text x="{L + pw / 2}" y="24" font-size="16" font-weight="bold" text-anchor="middle">{esc(title)}</text>',
    ]
    if subtitle:
        out.append(f'<text x="{L + pw / 2}" y="44" font-size="12" text-anchor="middle">{esc(subtitle)}</text>')
    for v in nice_ticks(y_lo, y_hi, y_log):
        y = fy(v)
        out.append(f'<line x1="{L}" y1="{y:.1f}" x2="{L + pw}" y2="{y:.1f}" stroke="#e0e0e0"/>')
        out.append(f'<text x="{L - 8}" y="{y + 4:.1f}" font-size="12" text-anchor="end">{label(v)}</text>')
    x_ticks = sorted(set(xs)) if x_log else nice_ticks(x_lo, x_hi, False)
    for v in x_ticks:
        x = fx(v)
        out.append(f'<line x1="{x:.1f}" y1="{T}" x2="{x:.1f}" y2="{T + ph}" stroke="#f0f0f0"/>')
        out.append(f'<text x="{x:.1f}" y="{T + ph + 18}" font-size="12" text-anchor="middle">{label(v)}</text>')
    out.append(f'<line x1="{L}" y1="{T}" x2="{L}" y2="{T + ph}" stroke="#000"/>')
    out.append(f'<line x1="{L}" y1="{T + ph}" x2="{L + pw}" y2="{T + ph}" stroke="#000"/>')
    out.append(
        f'<text x="{L + pw / 2}" y="{H - 14}" font-size="13" text-anchor="middle">{esc(x_label)}{" (log scale)" if x_log else ""}</text>'
    )
    out.append(
        f'<text x="18" y="{T + ph / 2}" font-size="13" text-anchor="middle" transform="rotate(-90 18 {T + ph / 2})">{esc(y_label)}{" (log scale)" if y_log else ""}</text>'
    )
    for i, (name, pts) in enumerate(series):
        colour = COLOURS.get(name, FALLBACK[i % len(FALLBACK)])
        pts = [(x, y) for x, y in pts if y is not None]
        path_d = " ".join(f"{'M' if j == 0 else 'L'}{fx(x):.1f},{fy(y):.1f}" for j, (x, y) in enumerate(pts))
        out.append(f'<path d="{path_d}" fill="none" stroke="{colour}" stroke-width="2"/>')
        for x, y in pts:
            out.append(
                f'<circle cx="{fx(x):.1f}" cy="{fy(y):.1f}" r="3.5" fill="{colour}"><title>{esc(name)}: {label(x)} → {y:.4g}</title></circle>'
            )
        ly = T + 14 + 20 * i
        out.append(f'<line x1="{L + pw + 14}" y1="{ly - 4}" x2="{L + pw + 38}" y2="{ly - 4}" stroke="{colour}" stroke-width="2"/>')
        out.append(f'<text x="{L + pw + 44}" y="{ly}" font-size="12">{esc(name)}</text>')
    out.append("</svg>\n")
    Path(path).write_text("\n".join(out))
    print(f"wrote {path}", file=sys.stderr)


def esc(s):
    return str(s).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def criterion_results(root):
    """{(group, contender, n): ns per timer operation} from criterion's
    estimates (slope where criterion fitted one, else the mean)."""
    results = {}
    for bench in Path(root).glob("**/new/benchmark.json"):
        meta = json.loads(bench.read_text())
        est = json.loads((bench.parent / "estimates.json").read_text())
        ns = (est.get("slope") or est["mean"])["point_estimate"]
        group = meta["group_id"]
        if group not in dict(OPERATIONS) or "/" not in meta["function_id"]:
            continue
        contender, n = meta["function_id"].split("/")
        n = int(n)
        elements = (meta.get("throughput") or {}).get("Elements", 1)
        results[(group, contender, n)] = ns / elements
    return results


CONTENDERS = ["lists", "binheap", "uvheap", "delayqueue"]
OPERATIONS = [
    ("enroll", "enroll"),
    ("refresh", "refresh"),
    ("unenroll", "unenroll"),
    ("expire_all", "expire all"),
]


def timers(args):
    results = criterion_results(args.criterion)
    if not results:
        sys.exit(f"no criterion results under {args.criterion}: run cargo bench -p timer-bench --bench timers")
    print("| operation | timers | " + " | ".join(CONTENDERS) + " |")
    print("|---|---|" + "---|" * len(CONTENDERS))
    for group, name in OPERATIONS:
        sizes = sorted({n for (g, _, n) in results if g == group})
        for n in sizes:
            cells = [results.get((group, c, n)) for c in CONTENDERS]
            print(f"| {name} | {label(n)} | " + " | ".join("-" if v is None else f"{v:.1f}" for v in cells) + " |")
        series = [(c, [(n, results.get((group, c, n))) for n in sizes]) for c in CONTENDERS]
        line_chart(
            os.path.join(args.out, f"timers-{group.replace('_', '-')}.svg"),
            f"Timer {name}: ns per timer",
            series,
            "timers enrolled",
            "ns per operation",
            subtitle="criterion, cargo bench -p timer-bench --bench timers; four durations, shuffled order",
        )
    if args.memory:
        rows = [
            [c.strip() for c in line.strip().strip("|").split("|")]
            for line in Path(args.memory).read_text().splitlines()
            if line.startswith("| ") and line[2].isdigit()
        ]
        series = [(c, [(int(r[0]), float(r[i + 1])) for r in rows]) for i, c in enumerate(CONTENDERS)]
        print()
        print("| timers | " + " | ".join(CONTENDERS) + " |")
        print("|---|" + "---|" * len(CONTENDERS))
        for r in rows:
            print(f"| {label(int(r[0]))} | " + " | ".join(r[1:]) + " |")
        line_chart(
            os.path.join(args.out, "timers-memory.svg"),
            "Heap bytes per timer",
            series,
            "timers enrolled",
            "bytes per timer",
            y_log=False,
            subtitle="cargo bench -p timer-bench --bench timer_memory; sized up front, every timer refreshed once",
        )


def read_csv(path):
    with open(path) as f:
        return list(csv.DictReader(f))


def scale(args):
    rows = read_csv(args.file)
    servers = list(dict.fromkeys(r["server"] for r in rows))
    conns = sorted({int(r["connections"]) for r in rows})
    by = {(r["server"], int(r["connections"])): r for r in rows}
    print("| connections | server | req/s | p50 ms | p99 ms | CPU µs/req | wrk CPU % | errors |")
    print("|---|---|---|---|---|---|---|---|")
    for n in conns:
        for s in servers:
            r = by.get((s, n))
            if r:
                print(f"| {n:,} | {s} | {float(r['rps']):,.0f} | {r['p50_ms']} | {r['p99_ms']} | "
                      f"{r['cpu_us_per_req']} | {r.get('wrk_cpu_pct', '-')} | {r['errors']} |")

    def num(v):
        try:
            return float(v)
        except ValueError:
            return None

    for key, name, unit in (("rps", "requests/s", "requests/s"), ("p99_ms", "p99 latency", "ms")):
        series = [(s, [(n, num(by[(s, n)][key]) if (s, n) in by else None) for n in conns]) for s in servers]
        line_chart(
            os.path.join(args.out, f"scale-{key.split('_')[0]}.svg"),
            f"Keep-alive {name} by connection count",
            series,
            "keep-alive connections (wrk -t1)",
            unit,
            y_log=(key == "p99_ms"),
            subtitle="scripts/scale.sh; one worker each; medians of alternating rounds",
        )


def idle(args):
    rows = read_csv(args.file)
    servers = list(dict.fromkeys(r["server"] for r in rows))
    print("| connections | " + " | ".join(f"{s} B/conn" for s in servers) + " |")
    print("|---|" + "---|" * len(servers))
    conns = sorted({int(r["connections"]) for r in rows})
    by = {(r["server"], int(r["connections"])): float(r["bytes_per_conn"]) for r in rows}
    for n in conns:
        print(f"| {n:,} | " + " | ".join(f"{by[(s, n)]:.1f}" if (s, n) in by else "-" for s in servers) + " |")
    line_chart(
        os.path.join(args.out, "idle-memory.svg"),
        "RSS per idle keep-alive connection",
        [(s, [(n, by.get((s, n))) for n in conns]) for s in servers],
        "idle connections",
        "bytes per connection",
        y_log=False,
        subtitle="scripts/idle-sweep.sh: RSS growth over N idle connections / N",
    )


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="what", required=True)
    t = sub.add_parser("timers")
    t.add_argument("--criterion", default="target/criterion")
    t.add_argument("--memory")
    t.add_argument("--out", default="docs")
    s = sub.add_parser("scale")
    s.add_argument("file")
    s.add_argument("--out", default="docs")
    i = sub.add_parser("idle")
    i.add_argument("file")
    i.add_argument("--out", default="docs")
    args = parser.parse_args()
    {"timers": timers, "scale": scale, "idle": idle}[args.what](args)


if __name__ == "__main__":
    main()
