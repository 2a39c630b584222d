#!/usr/bin/env python3
"""Tables of allocator_peers_bench results, gpupool beside CUB.

    tools/peer_report.py out/peers_run1.json [out/peers_run2.json ...]

Reads Google Benchmark JSON files, pools their repetitions (medians over all
of them) and prints Markdown: per case, runtime calls per cycle and time per
cycle (CPU time of the benchmark threads, and wall time; both divided by the
cycles of all threads) for gpupool, CUB with its defaults and CUB matched to
gpupool's limits, with gpupool / CUB ratios (below 1 gpupool is faster); per
trace, peak reserved / peak live bytes and runtime mallocs per peer.
"""

import json
import re
import statistics
import sys
from collections import defaultdict

TIMED = re.compile(r"^peers/(\w+)/(null|profile)/(\w+)/real_time(?:/threads:(\d+))?$")
REPLAY = re.compile(r"^replay/(\w+)/(\w+)/iterations:1/real_time$")
PEERS = ("gpupool", "cub_default", "cub_fair")


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


def main():
    context, rows = load(sys.argv[1:])
    cases = defaultdict(dict)
    replays = defaultdict(dict)
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
    print(f"<!-- {context.get('date', '')}, repetitions per row: "
          f"{sorted(reps)} -->")
    order = ["same_stream", "cross_stream", "mixed_sizes"] + [
        f"{t} thread(s)" for t in (1, 2, 4, 8)]
    for costs in ("null", "profile"):
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
    print("\n**trace replays** (peak reserved ÷ peak live; runtime mallocs)\n")
    print("| trace | peak live | gpupool | CUB default | CUB fair | raw |")
    print("|---|---:|---:|---:|---:|---:|")
    for trace in sorted(replays):
        peers = replays[trace]
        live = peers["raw"]["peak_live_mib"]
        cells = []
        for p in PEERS + ("raw",):
            r = peers[p]
            cells.append(f"{r['reserved_over_live']:.2f} "
                         f"({r['runtime_mallocs']:,.0f})")
        print(f"| {trace.replace('_', ' ')} | {live:,.0f} MiB | "
              + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
