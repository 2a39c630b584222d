#!/usr/bin/env python3
"""Turns gpupool benchmark results into PNG charts and a ratio summary.

Inputs are Google Benchmark JSON files (written with
--benchmark_format=json --benchmark_out=FILE by the suites in benchmarks/)
and the demo's demo_results.json. Each benchmark JSON is tagged with the
backend and sim profile it ran on (the suites record them in the JSON
context), so results of different profiles never share a chart.

Charts written to --out_dir (those whose data is present):
  <tag>_pooled_vs_raw.png     raw create+destroy vs pooled acquire+release per
                              resource and config (log scale)
  <tag>_pool_overhead.png     the floor (mutex + vector) vs the pool alone
                              (null backend) vs pooled on the backend
  <tag>_allocation_sizes.png  allocation size sweep: raw vs cache hit (and
                              cudaMallocAsync on CUDA)
  <tag>_contention.png        threads vs acquire+release throughput, sharded
                              vs one global lock
  demo.png                    the demo's per-lifecycle times, raw vs pooled

--summary prints Markdown tables of the ratios (always from one file, so raw
and pooled come from the same run).

Needs matplotlib (Debian: python3-matplotlib) for charts; --summary alone
does not. Usage:
  tools/plot_benchmarks.py --out_dir docs/images out/bench/*.json \\
      --demo out/demo/demo_results.json
"""

import argparse
import json
import math
import os
import re
import sys
from collections import defaultdict

TIME_UNIT_NS = {"ns": 1.0, "us": 1e3, "ms": 1e6, "s": 1e9}
# Name tokens Google Benchmark appends that are not part of our names.
SUFFIX = re.compile(r"^(real_time|process_time|manual_time|iterations:\d+|"
                    r"repeats:\d+|min_time:[\d.]+|threads:\d+)$")


class Result:
    """One benchmark result: parsed name, time per iteration, counters."""

    def __init__(self, entry):
        tokens = [t for t in entry["run_name"].split("/") if not SUFFIX.match(t)]
        self.resource = tokens[0]
        self.variant = tokens[1] if len(tokens) > 1 else ""
        self.config = "/".join(tokens[2:])
        self.threads = int(entry.get("threads", 1))
        unit = TIME_UNIT_NS[entry.get("time_unit", "ns")]
        self.ns = float(entry["real_time"]) * unit
        self.items_per_second = entry.get("items_per_second")
        self.label = entry.get("label", "")
        self.error = entry.get("error_occurred", False)


class Run:
    """The results of one benchmark JSON file, and what it ran on."""

    def __init__(self, path):
        with open(path) as f:
            data = json.load(f)
        context = data.get("context", {})
        self.path = path
        self.backend = context.get("gpupool_backend", "unknown")
        self.profile = context.get("gpupool_sim_profile", "")
        self.simulated = context.get("gpupool_simulated", "true") == "true"
        self.date = context.get("date", "")
        self.num_cpus = context.get("num_cpus", 0)
        self.deadlock_detection = context.get(
            "gpupool_mutex_deadlock_detection", "default")
        self.tag = self.backend + (("-" + self.profile) if self.profile else "")
        if self.deadlock_detection == "off":
            self.tag += "-nodeadlockcheck"
        entries = data.get("benchmarks", [])
        # With --benchmark_repetitions use the medians; otherwise every run.
        medians = [e for e in entries if e.get("aggregate_name") == "median"]
        chosen = medians if medians else [
            e for e in entries if e.get("run_type", "iteration") == "iteration"]
        self.results = [Result(e) for e in chosen]
        self.results = [r for r in self.results if not r.error]

    def title(self):
        what = "simulated: SimBackend " + self.profile if self.backend == "sim" \
            else ("no runtime (null backend)" if self.backend == "null"
                  else self.backend + " GPU")
        if self.deadlock_detection == "off":
            what += ", absl deadlock detection off"
        return what

    def find(self, resource, variant, config="", threads=1):
        for r in self.results:
            if (r.resource, r.variant, r.config, r.threads) == (
                    resource, variant, config, threads):
                return r
        return None


def merge_runs(paths):
    """Runs grouped by tag; a later file's result replaces an earlier one."""
    by_tag = {}
    for path in paths:
        run = Run(path)
        if run.tag in by_tag:
            by_tag[run.tag].results.extend(run.results)
        else:
            by_tag[run.tag] = run
    return by_tag


def format_ns(ns):
    if ns >= 1e9:
        return "%.3g s" % (ns / 1e9)
    if ns >= 1e6:
        return "%.3g ms" % (ns / 1e6)
    if ns >= 1e3:
        return "%.3g µs" % (ns / 1e3)
    return "%.3g ns" % ns


def raw_pooled_pairs(run):
    """(group label, raw result, pooled result) for every raw/pooled pair."""
    pairs = []
    for r in run.results:
        if not r.variant.startswith("raw") or r.resource in ("allocation",):
            continue
        pooled_variant = "pooled" + r.variant[len("raw"):]
        p = run.find(r.resource, pooled_variant, r.config)
        if p is None:
            continue
        label = r.resource + ("/" + r.config if r.config else "")
        if r.variant != "raw":
            label += " (" + r.variant[len("raw_"):] + ")"
        pairs.append((label, r, p))
    return pairs


# --------------------------------------------------------------------------
# Summary (Markdown)
# --------------------------------------------------------------------------

def summary(by_tag, demo):
    out = []
    for tag, run in sorted(by_tag.items()):
        out.append("### %s (%s)\n" % (tag, run.title()))
        pairs = raw_pooled_pairs(run)
        if pairs:
            out.append("| benchmark | raw | pooled | raw / pooled |")
            out.append("|---|---|---|---|")
            for label, r, p in pairs:
                out.append("| %s | %s | %s | %.1f× |" % (
                    label, format_ns(r.ns), format_ns(p.ns), r.ns / p.ns))
            out.append("")
        floor = run.find("stream", "floor", "mutex_vector")
        if floor:
            out.append("| pool overhead | per acquire+release | / floor |")
            out.append("|---|---|---|")
            for variant, config in (("floor", "mutex_vector"),
                                    ("floor", "std_mutex_vector"),
                                    ("pool_only_lean", "null_backend"),
                                    ("pool_only", "null_backend"),
                                    ("pooled", "default"),
                                    ("pooled_validated", "default")):
                r = run.find("stream", variant, config)
                if r:
                    out.append("| stream/%s/%s | %s | %.2f× |" % (
                        variant, config, format_ns(r.ns), r.ns / floor.ns))
            out.append("")
        sizes = sorted({int(r.config) for r in run.results
                        if r.resource == "allocation" and r.config.isdigit()})
        if sizes:
            variants = [v for v in ("raw", "cached", "cached_no_stream",
                                    "cuda_malloc_async")
                        if any(run.find("allocation", v, str(s)) for s in sizes)]
            out.append("| bytes | " + " | ".join(variants) +
                       " | raw / cached |")
            out.append("|---" * (len(variants) + 2) + "|")
            for s in sizes:
                cells = []
                for v in variants:
                    r = run.find("allocation", v, str(s))
                    cells.append(format_ns(r.ns) if r else "–")
                raw = run.find("allocation", "raw", str(s))
                cached = run.find("allocation", "cached", str(s))
                ratio = "%.1f×" % (raw.ns / cached.ns) if raw and cached else "–"
                out.append("| %s | %s | %s |" % (human_bytes(s),
                                                 " | ".join(cells), ratio))
            out.append("")
        threads = sorted({r.threads for r in run.results
                          if r.resource == "contention"})
        if threads:
            out.append("| threads | sharded ops/s | global lock ops/s | "
                       "sharded / 1 thread | sharded / global lock |")
            out.append("|---|---|---|---|---|")
            one = run.find("contention", "sharded", "", 1)
            for t in threads:
                s = run.find("contention", "sharded", "", t)
                g = run.find("contention", "global_lock", "", t)
                if not (s and g and one):
                    continue
                out.append("| %d | %.3g | %.3g | %.2f× | %.2f× |" % (
                    t, s.items_per_second, g.items_per_second,
                    s.items_per_second / one.items_per_second,
                    s.items_per_second / g.items_per_second))
            out.append("")
    if demo:
        out.append("### demo (%s)\n" % demo.get("date", ""))
        out.append("| backend | profile | lifecycles | raw / lifecycle | "
                   "pooled / lifecycle (warm) | pooled, first | speed-up | "
                   "streams created raw / pooled |")
        out.append("|---|---|---|---|---|---|---|---|")
        for row in demo["rows"]:
            out.append("| %s%s | %s | %d | %s | %s | %s | %.0f× | %d / %d |" % (
                row["backend"], " (simulated)" if row["simulated"] else "",
                row["profile"] or "–", row["lifecycles"],
                format_ns(row["raw_ms_mean"] * 1e6),
                format_ns(row["pooled_warm_ms_mean"] * 1e6),
                format_ns(row["pooled_first_ms"] * 1e6), row["speedup"],
                row["streams_created_raw"], row["streams_created_pooled"]))
        out.append("")
    return "\n".join(out)


def human_bytes(n):
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024:
            return "%d %s" % (n, unit)
        n //= 1024
    return "%d TiB" % n


# --------------------------------------------------------------------------
# Charts
# --------------------------------------------------------------------------

def plot_pooled_vs_raw(plt, run, path):
    pairs = raw_pooled_pairs(run)
    if not pairs:
        return False
    fig, ax = plt.subplots(figsize=(max(6, 1.3 * len(pairs) + 2), 4.5))
    xs = range(len(pairs))
    width = 0.38
    raw = [r.ns for _, r, _ in pairs]
    pooled = [p.ns for _, _, p in pairs]
    ax.bar([x - width / 2 for x in xs], raw, width, label="raw create + destroy",
           color="#c0504d")
    ax.bar([x + width / 2 for x in xs], pooled, width,
           label="pooled acquire + release", color="#4f81bd")
    for x, r, p in zip(xs, raw, pooled):
        ax.annotate("%.0f×" % (r / p) if r / p >= 10 else "%.1f×" % (r / p),
                    (x, max(r, p)), ha="center", va="bottom", fontsize=8)
    ax.set_yscale("log")
    ax.set_ylabel("time per operation (wall, log scale)")
    ax.set_xticks(list(xs))
    ax.set_xticklabels([label for label, _, _ in pairs], rotation=25,
                       ha="right", fontsize=8)
    set_time_ticks(ax)
    ax.set_title("Pooled vs raw — " + run.title(), fontsize=10)
    ax.legend(fontsize=8)
    save(plt, fig, path)
    return True


def plot_pool_overhead(plt, run, path):
    bars = []
    for variant, config, label in (
            ("floor", "mutex_vector", "floor:\nmutex + vector"),
            ("pool_only_lean", "null_backend",
             "pool alone,\nno lease sites"),
            ("pool_only", "null_backend", "pool alone\n(null backend)"),
            ("pooled", "default", "pooled on backend"),
            ("pooled_validated", "default",
             "pooled on backend,\nvalidated at acquire")):
        r = run.find("stream", variant, config)
        if r:
            bars.append((label, r.ns))
    if len(bars) < 2:
        return False
    floor = bars[0][1]
    fig, ax = plt.subplots(figsize=(7.5, 4.2))
    ax.bar(range(len(bars)), [ns for _, ns in bars],
           color=["#9bbb59"] + ["#4f81bd"] * (len(bars) - 1))
    for x, (_, ns) in enumerate(bars):
        ax.annotate("%s\n%.1f× floor" % (format_ns(ns), ns / floor), (x, ns),
                    ha="center", va="bottom", fontsize=8)
    ax.set_xticks(range(len(bars)))
    ax.set_xticklabels([label for label, _ in bars], fontsize=8)
    ax.set_ylabel("ns per acquire + release")
    ax.set_ylim(0, max(ns for _, ns in bars) * 1.3)
    ax.set_title("Stream pool overhead vs floor — " + run.title(), fontsize=10)
    save(plt, fig, path)
    return True


def plot_allocation_sizes(plt, run, path):
    series = defaultdict(list)
    for r in run.results:
        if r.resource == "allocation" and r.config.isdigit():
            series[r.variant].append((int(r.config), r.ns))
    if not series:
        return False
    names = {"raw": "raw allocate + free", "cached": "cache hit (on a stream)",
             "cached_no_stream": "cache hit (no stream)",
             "cuda_malloc_async": "cudaMallocAsync + cudaFreeAsync"}
    fig, ax = plt.subplots(figsize=(7.5, 4.5))
    for variant in ("raw", "cuda_malloc_async", "cached", "cached_no_stream"):
        if variant not in series:
            continue
        points = sorted(series[variant])
        ax.plot([p[0] for p in points], [p[1] for p in points], marker="o",
                label=names[variant])
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    sizes = sorted({p[0] for pts in series.values() for p in pts})
    ax.set_xticks(sizes)
    ax.set_xticklabels([human_bytes(s) for s in sizes], rotation=30, fontsize=8)
    ax.set_xlabel("allocation size")
    ax.set_ylabel("time per allocate + free (wall, log scale)")
    set_time_ticks(ax)
    ax.set_title("Allocation sweep — " + run.title(), fontsize=10)
    ax.legend(fontsize=8)
    save(plt, fig, path)
    return True


def plot_contention(plt, run, path):
    series = defaultdict(list)
    for r in run.results:
        if r.resource == "contention" and r.items_per_second:
            series[r.variant].append((r.threads, r.items_per_second))
    if not series:
        return False
    names = {"sharded": "sharded (lock per device/config)",
             "global_lock": "one global lock"}
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for variant in ("sharded", "global_lock"):
        if variant in series:
            points = sorted(series[variant])
            ax.plot([p[0] for p in points], [p[1] for p in points], marker="o",
                    label=names[variant])
    threads = sorted({p[0] for pts in series.values() for p in pts})
    ax.set_xscale("log", base=2)
    ax.set_xticks(threads)
    ax.set_xticklabels([str(t) for t in threads])
    ax.set_xlabel("threads (spread over 8 devices)")
    ax.set_ylabel("acquire + release per second (all threads)")
    ax.set_ylim(bottom=0)
    import matplotlib.ticker as ticker
    ax.yaxis.set_major_formatter(ticker.FuncFormatter(
        lambda v, _: "%gM" % (v / 1e6)))
    ax.set_title("Contention — %s\n(ran on %d CPUs: more threads than CPUs "
                 "cannot add throughput)" % (run.title(), run.num_cpus),
                 fontsize=9)
    ax.legend(fontsize=8)
    save(plt, fig, path)
    return True


def plot_demo(plt, demo, path):
    rows = demo["rows"]
    fig, ax = plt.subplots(figsize=(max(6, 2.6 * len(rows) + 1.5), 4.5))
    width = 0.27
    for i, row in enumerate(rows):
        values = [row["raw_ms_mean"], row["pooled_first_ms"],
                  row["pooled_warm_ms_mean"]]
        colors = ["#c0504d", "#f79646", "#4f81bd"]
        for j, (value, color) in enumerate(zip(values, colors)):
            ax.bar(i + (j - 1) * width, value, width, color=color,
                   label=["raw (every lifecycle)", "pooled, first lifecycle",
                          "pooled, later lifecycles"][j] if i == 0 else None)
            ax.annotate(format_ns(value * 1e6), (i + (j - 1) * width, value),
                        ha="center", va="bottom", fontsize=7)
        ax.annotate("%.0f× faster" % row["speedup"] if row["speedup"] >= 10
                    else "%.1f× faster" % row["speedup"],
                    (i, max(values) * 3), ha="center", fontsize=9,
                    fontweight="bold")
    ax.set_yscale("log")
    top = max(max(r["raw_ms_mean"], r["pooled_first_ms"]) for r in rows)
    ax.set_ylim(top=top * 20)
    ax.set_xticks(range(len(rows)))
    ax.set_xticklabels([
        "%s%s\n%s" % (r["backend"], ":" + r["profile"] if r["profile"] else "",
                      "simulated" if r["simulated"] else "GPU")
        for r in rows], fontsize=8)
    ax.set_ylabel("ms per client lifecycle (log scale)")
    client = demo.get("client", {})
    title = ("PJRT-style client lifecycle, %d devices × (%d streams + %d "
             "events + scratch)" % (rows[0]["devices"],
                                    client.get("streams_per_device", 14),
                                    client.get("events_per_device", 16)))
    if any(r["simulated"] for r in rows):
        title += ("\nsimulated rows: SimBackend, no GPU measured; rocm-mi300x "
                  "latencies from published MI300X\nmeasurements (stream "
                  "create 3.4 ms, destroy 3.3 ms); cuda profile latencies are "
                  "estimates")
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=8, loc="upper right")
    save(plt, fig, path)


def set_time_ticks(ax):
    import matplotlib.ticker as ticker
    ax.yaxis.set_major_formatter(ticker.FuncFormatter(
        lambda v, _: format_ns(v) if v > 0 else "0"))


def save(plt, fig, path):
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    print("wrote " + path)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("inputs", nargs="*",
                        help="Google Benchmark JSON files")
    parser.add_argument("--demo", help="the demo's demo_results.json")
    parser.add_argument("--out_dir", default="out/plots")
    parser.add_argument("--summary", action="store_true",
                        help="print Markdown ratio tables")
    parser.add_argument("--no_plots", action="store_true",
                        help="only --summary; no matplotlib needed")
    args = parser.parse_args()

    by_tag = merge_runs(args.inputs)
    demo = None
    if args.demo:
        with open(args.demo) as f:
            demo = json.load(f)
    if args.summary:
        print(summary(by_tag, demo))
    if args.no_plots:
        return 0
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("plot skipped: matplotlib is not installed "
              "(tools/install_deps.sh python3-matplotlib)", file=sys.stderr)
        return 3
    os.makedirs(args.out_dir, exist_ok=True)
    for tag, run in sorted(by_tag.items()):
        base = os.path.join(args.out_dir, tag.replace("/", "_"))
        plot_pooled_vs_raw(plt, run, base + "_pooled_vs_raw.png")
        plot_pool_overhead(plt, run, base + "_pool_overhead.png")
        plot_allocation_sizes(plt, run, base + "_allocation_sizes.png")
        plot_contention(plt, run, base + "_contention.png")
    if demo:
        plot_demo(plt, demo, os.path.join(args.out_dir, "demo.png"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
