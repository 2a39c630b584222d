#!/usr/bin/env python3
"""Tables of allocator_peers_bench results, gpupool beside CUB.

    tools/peer_report.py [--svg=chart.svg] out/peers_run1.json [more.json ...]

Reads Google Benchmark JSON files, pools their repetitions (medians over all
of them) and prints Markdown: per case, runtime calls per cycle and time per
cycle (CPU time of the benchmark threads, and wall time; both divided by the
cycles of all threads) for gpupool, CUB with its defaults and CUB matched to
gpupool's limits, with gpupool / CUB ratios (below 1 gpupool is faster); per
trace, peak reserved / peak live bytes and runtime mallocs per peer; per
charged stand-in call, what the profile model adds to it against its figure
(the instrument's own check). Rows of
gpupool with deferred fences (peer gpupool_deferred), where the run has
them, get a table of their own per cost model and a column in the replays;
so do the rows of gpupool with CrossStreamPolicy::kWaitOnStream (peer
gpupool_wait, cross-stream only), without the column.
With --svg, also writes a bar chart of the CPU-time ratios (plain SVG, no
plotting library needed).
"""

import json
import re
import statistics
import sys
from collections import defaultdict

TIMED = re.compile(r"^peers/(\w+)/(null|profile|real)/(\w+)/real_time(?:/threads:(\d+))?$")
REPLAY = re.compile(r"^replay/(\w+)/(\w+)/iterations:1/real_time$")
STANDIN = re.compile(r"^standin/(\w+)/(null|profile)$")
PEERS = ("gpupool", "cub_default", "cub_fair")
DEFERRED = "gpupool_deferred"
WAIT = "gpupool_wait"
# gpupool variants, each with a table of its own per cost model: the peer,
# the table's title, the short name in its columns.
VARIANTS = ((DEFERRED, "deferred fences", "deferred"),
            (WAIT, "`kWaitOnStream`", "wait"))


def load(paths):
    """Pools every repetition of every file; medians per benchmark."""
    runs = defaultdict(list)
    context = {}
    for path in paths:
        with open(path) as f:
            data = json.load(f)
        context = context or data.get("context", {})
        for b in data["benchmarks"]:
            if b.get("run_type") == "aggregate":
                continue
            runs[b.get("run_name", b["name"])].append(b)
    out = {}
    for name, items in runs.items():
        row = dict(items[0])
        for key in ("real_time", "cpu_time", "calls_per_cycle"):
            if key in row:
                row[key] = statistics.median(i[key] for i in items)
        row["_n"] = len(items)
        out[name] = row
    return context, out


def ns(row, key):
    scale = {"ns": 1, "us": 1e3, "ms": 1e6, "s": 1e9}[row.get("time_unit", "ns")]
    return row[key] * scale


def write_svg(path, cases, order):
    """Bars of gpupool / CUB CPU time per case, one group per cost model."""
    bar_h, gap, left, width = 14, 6, 170, 420
    scale = width / 3.0  # 0..3x
    rows = []
    for costs in ("null", "profile", "real"):
        for label in order:
            peers = cases.get((costs, label), {})
            if all(p in peers for p in PEERS):
                t = [ns(peers[p], "cpu_time") for p in PEERS]
                rows.append((f"{label.replace('_', '-')}, {costs}",
                             t[0] / t[1], t[0] / t[2]))
    height = 40 + len(rows) * (2 * bar_h + gap) + 30
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{left + width + 60}" '
           f'height="{height}" font-family="sans-serif" font-size="11">',
           f'<text x="{left}" y="14">gpupool ÷ CUB, CPU time per cycle '
           f'(left of 1×: gpupool faster)</text>',
           f'<rect x="{left}" y="20" width="10" height="10" fill="#888"/>'
           f'<text x="{left + 14}" y="29">÷ CUB default</text>',
           f'<rect x="{left + 110}" y="20" width="10" height="10" '
           f'fill="#36c"/><text x="{left + 124}" y="29">÷ CUB fair</text>']
    y = 40
    for name, vs_default, vs_fair in rows:
        out.append(f'<text x="{left - 6}" y="{y + bar_h + 3}" '
                   f'text-anchor="end">{name}</text>')
        for value, color in ((vs_default, "#888"), (vs_fair, "#36c")):
            w = min(value, 3.0) * scale
            out.append(f'<rect x="{left}" y="{y}" width="{w:.1f}" '
                       f'height="{bar_h - 2}" fill="{color}"/>')
            out.append(f'<text x="{left + w + 3:.1f}" y="{y + bar_h - 3}">'
                       f'{value:.2f}×</text>')
            y += bar_h
        y += gap
    x1 = left + scale
    out.append(f'<line x1="{x1:.1f}" y1="36" x2="{x1:.1f}" y2="{y}" '
               f'stroke="black" stroke-dasharray="3,3"/>')
    out.append(f'<text x="{x1 - 6:.1f}" y="{y + 14}">1×</text>')
    out.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")


def main():
    args = sys.argv[1:]
    svg = next((a[len("--svg="):] for a in args if a.startswith("--svg=")),
               None)
    context, rows = load([a for a in args if not a.startswith("--svg=")])
    cases = defaultdict(dict)
    replays = defaultdict(dict)
    standin = defaultdict(dict)
    reps = set()
    for name, row in rows.items():
        m = TIMED.match(name)
        if m:
            case, costs, peer, threads = m.groups()
            label = case if threads is None else f"{threads} thread(s)"
            cases[(costs, label)][peer] = row
            reps.add(row["_n"])
            continue
        m = REPLAY.match(name)
        if m:
            replays[m.group(1)][m.group(2)] = row
            continue
        m = STANDIN.match(name)
        if m:
            standin[m.group(1)][m.group(2)] = row
    print(f"<!-- {context.get('date', '')}, repetitions per row: "
          f"{sorted(reps)} -->")
    order = ["same_stream", "cross_stream", "mixed_sizes", "cold_start"] + [
        f"{t} thread(s)" for t in (1, 2, 4, 8)]
    for costs in ("null", "profile", "real"):
        if not any(key[0] == costs for key in cases):
            continue
        print(f"\n**{costs} runtime**\n")
        print("| case | runtime calls per cycle (gpupool / CUB default / "
              "CUB fair) | CPU ns per cycle | gpupool ÷ CUB default | "
              "gpupool ÷ CUB fair | wall ns per cycle | gpupool ÷ CUB "
              "default | gpupool ÷ CUB fair |")
        print("|---|---|---|---:|---:|---|---:|---:|")
        for label in order:
            peers = cases.get((costs, label), {})
            if not all(p in peers for p in PEERS):
                continue
            c = [peers[p].get("calls_per_cycle", float("nan")) for p in PEERS]
            cells = [" / ".join(f"{x:.3g}" for x in c)]
            for key in ("cpu_time", "real_time"):
                t = [ns(peers[p], key) for p in PEERS]
                cells += [" / ".join(f"{x:,.0f}" for x in t),
                          f"{t[0] / t[1]:.2f}×", f"{t[0] / t[2]:.2f}×"]
            print(f"| {label.replace('_', '-')} | " + " | ".join(cells) + " |")
        for peer, title, short in VARIANTS:
            variant_rows = [label for label in order
                            if all(p in cases.get((costs, label), {})
                                   for p in PEERS + (peer,))]
            if not variant_rows:
                continue
            print(f"\n*gpupool with {title} ({costs} runtime)*\n")
            print(f"| case | runtime calls per cycle ({short} / gpupool) | "
                  f"CPU ns per cycle ({short} / gpupool) | {short} ÷ "
                  f"gpupool | {short} ÷ CUB default | {short} ÷ CUB fair "
                  f"| wall: {short} ÷ CUB fair |")
            print("|---|---|---|---:|---:|---:|---:|")
            for label in variant_rows:
                peers = cases[(costs, label)]
                d, g = peers[peer], peers["gpupool"]
                calls = " / ".join(
                    f"{r.get('calls_per_cycle', float('nan')):.3g}"
                    for r in (d, g))
                cpu = [ns(r, "cpu_time") for r in
                       (d, g, peers["cub_default"], peers["cub_fair"])]
                wall = ns(d, "real_time") / ns(peers["cub_fair"], "real_time")
                print(f"| {label.replace('_', '-')} | {calls} | "
                      f"{cpu[0]:,.0f} / {cpu[1]:,.0f} | "
                      f"{cpu[0] / cpu[1]:.2f}× | {cpu[0] / cpu[2]:.2f}× | "
                      f"{cpu[0] / cpu[3]:.2f}× | {wall:.2f}× |")
    if svg:
        write_svg(svg, cases, order)
    calls = [c for c in sorted(standin) if len(standin[c]) == 2]
    if calls:
        print("\n**the profile model's charges**, from the same run (one "
              "stand-in call timed alone, ns per call; profile minus null is "
              "what the model adds to it)\n")
        print("| call | charged | profile − null |")
        print("|---|---:|---:|")
        for call in calls:
            rows_ = standin[call]
            added = ns(rows_["profile"], "cpu_time") - ns(rows_["null"],
                                                           "cpu_time")
            print(f"| `{call}` | {rows_['profile']['charged_ns']:.0f} | "
                  f"{added:.0f} |")
    print("\n**trace replays** (peak reserved ÷ peak live; runtime mallocs)\n")
    with_deferred = all(DEFERRED in peers for peers in replays.values())
    columns = (PEERS[:1] + ((DEFERRED,) if with_deferred else ()) +
               PEERS[1:] + ("raw",))
    print("| trace | peak live | " + " | ".join(
        {"gpupool": "gpupool", DEFERRED: "gpupool, deferred fences",
         "cub_default": "CUB default", "cub_fair": "CUB fair",
         "raw": "raw"}[c] for c in columns) + " |")
    print("|---|---:|" + "---:|" * len(columns))
    for trace in sorted(replays):
        peers = replays[trace]
        live = peers["raw"]["peak_live_mib"]
        cells = []
        for p in columns:
            r = peers[p]
            cells.append(f"{r['reserved_over_live']:.2f} "
                         f"({r['runtime_mallocs']:,.0f})")
        print(f"| {trace.replace('_', ' ')} | {live:,.0f} MiB | "
              + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
