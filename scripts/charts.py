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
spanning more than a decade are logarithmic. Draws with matplotlib:
`pip install matplotlib` (or Debian's `apt-get install python3-matplotlib`).
"""

import argparse
import csv
import json
import math
import os
import sys
from pathlib import Path

try:
    import matplotlib

    matplotlib.use("svg")
    matplotlib.rcParams.update(
        {
            "svg.fonttype": "none",  # text as text, not paths
            "svg.hashsalt": "kas",  # the same data draws the same file
        }
    )
    import matplotlib.pyplot as plt
    from matplotlib import ticker
except ImportError:
    sys.exit("scripts/charts.py draws with matplotlib: pip install matplotlib")

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


def label(v):
    if v >= 1e6 and v % 1e6 == 0:
        return f"{v / 1e6:g}M"
    if v >= 1e3 and v % 1e3 == 0:
        return f"{v / 1e3:g}k"
    if v >= 100:
        return f"{v:,.0f}"
    return f"{v:g}"


def line_chart(path, title, series, x_label, y_label, y_log=None, subtitle=""):
    """series: list of (name, [(x, y), ...]); a None y is left out. Writes
    an SVG to path, text kept as text."""
    xs = [x for _, pts in series for x, _ in pts]
    ys = [y for _, pts in series for _, y in pts if y is not None]
    x_log = max(xs) / min(xs) > 20
    if y_log is None:
        y_log = min(ys) > 0 and max(ys) / min(ys) > 20
    fig, ax = plt.subplots(figsize=(7.6, 4.4), dpi=100, layout="constrained")
    fig.suptitle(title, fontsize=14, fontweight="bold")
    if subtitle:
        ax.set_title(subtitle, fontsize=10)
    for i, (name, pts) in enumerate(series):
        pts = [(x, y) for x, y in pts if y is not None]
        colour = COLOURS.get(name, FALLBACK[i % len(FALLBACK)])
        ax.plot([x for x, _ in pts], [y for _, y in pts], "o-", color=colour, label=name, linewidth=2, markersize=5)
    if x_log:
        ax.set_xscale("log")
        ax.xaxis.set_major_locator(ticker.FixedLocator(sorted(set(xs))))
        ax.xaxis.set_minor_locator(ticker.NullLocator())
    if y_log:
        # Whole decades; 2x and 5x ticks too when they are few.
        lo, hi = 10 ** math.floor(math.log10(min(ys))), 10 ** math.ceil(math.log10(max(ys)))
        ax.set_yscale("log")
        ax.set_ylim(lo, hi)
        ax.yaxis.set_major_locator(ticker.LogLocator(subs=(1, 2, 5) if hi / lo <= 100 else (1,)))
        ax.yaxis.set_minor_formatter(ticker.NullFormatter())
    else:
        ax.set_ylim(bottom=0, top=max(ys) * 1.1 or 1)
    ax.xaxis.set_major_formatter(ticker.FuncFormatter(lambda v, _: label(v)))
    ax.yaxis.set_major_formatter(ticker.FuncFormatter(lambda v, _: label(v)))
    ax.set_xlabel(x_label + (" (log scale)" if x_log else ""))
    ax.set_ylabel(y_label + (" (log scale)" if y_log else ""))
    ax.grid(True, axis="y", color="#e0e0e0")
    ax.grid(True, axis="x", color="#f0f0f0")
    ax.set_axisbelow(True)
    ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1), frameon=False)
    fig.savefig(path, format="svg", metadata={"Date": None})
    plt.close(fig)
    print(f"wrote {path}", file=sys.stderr)


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
