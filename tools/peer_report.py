#!/usr/bin/env python3
"""Tables of allocator_peers_bench results, gpupool beside CUB.

    tools/peer_report.py out/peers.json

Reads Google Benchmark JSON (with or without repetitions: medians are used
when present) and prints Markdown: per case, time per cycle and runtime calls
per cycle for gpupool, CUB with its defaults and CUB matched to gpupool's
limits, and gpupool / CUB ratios (below 1 gpupool is faster or calls less);
per trace, peak reserved / peak live bytes and runtime mallocs per peer.
"""

import json
import re
import statistics
import sys
from collections import defaultdict

TIMED = re.compile(r"^peers/(\w+)/(null|profile)/(\w+)/real_time(?:/threads:(\d+))?$")
REPLAY = re.compile(r"^replay/(\w+)/(\w+)/iterations:1/real_time$")
PEERS = ("gpupool", "cub_default", "cub_fair")


def load(path):
    with open(path) as f:
        data = json.load(f)
    runs = defaultdict(list)
    medians = {}
    for b in data["benchmarks"]:
        name = b.get("run_name", b["name"])
        if b.get("run_type") == "aggregate":
            if b.get("aggregate_name") == "median":
                medians[name] = b
            continue
        runs[name].append(b)
    out = {}
    for name, items in runs.items():
        if name in medians:
            out[name] = medians[name]
            out[name]["_n"] = len(items)
            continue
        row = dict(items[0])
        row["real_time"] = statistics.median(i["real_time"] for i in items)
        for key in ("calls_per_cycle",):
            if key in row:
                row[key] = statistics.median(i[key] for i in items)
        row["_n"] = len(items)
        out[name] = row
    return data.get("context", {}), out


def ns(row):
    scale = {"ns": 1, "us": 1e3, "ms": 1e6, "s": 1e9}[row.get("time_unit", "ns")]
    return row["real_time"] * scale


def main():
    context, rows = load(sys.argv[1])
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
    for costs in ("null", "profile"):
        print(f"\n**{costs} runtime**\n")
        print("| case | ns per cycle: gpupool / CUB default / CUB fair "
              "| runtime calls per cycle | gpupool ÷ CUB default | "
              "gpupool ÷ CUB fair |")
        print("|---|---|---|---:|---:|")
        order = ["same_stream", "cross_stream", "mixed_sizes"] + [
            f"{t} thread(s)" for t in (1, 2, 4, 8)]
        for label in order:
            peers = cases.get((costs, label), {})
            if not all(p in peers for p in PEERS):
                continue
            t = [ns(peers[p]) for p in PEERS]
            c = [peers[p].get("calls_per_cycle", float("nan")) for p in PEERS]
            print(f"| {label.replace('_', '-')} | "
                  + " / ".join(f"{x:,.0f}" for x in t) + " | "
                  + " / ".join(f"{x:.3g}" for x in c) + " | "
                  + f"{t[0] / t[1]:.2f}× | {t[0] / t[2]:.2f}× |")
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
