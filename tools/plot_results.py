#!/usr/bin/env python3
"""Draws the charts of docs/benchmarks.md from docs/results/results.json.

results.json holds the figures of the page's main comparisons, transcribed
from its tables cell for cell, each chart with the device, date, commit and
command of its table rows. This script draws one SVG per chart into
docs/images/results/, titled with that device and date.

  tools/plot_results.py            redraw the charts in place
  tools/plot_results.py --check    exit 1 when a figure in results.json is
                                   not the cell of its table row in
                                   docs/benchmarks.md, when the page does not
                                   show a chart, or when a committed SVG
                                   differs from what this script draws now

The SVGs are deterministic for a given matplotlib (svg.hashsalt fixed, no
date) and draw text as outlines, so they look the same without DejaVu Sans;
the committed ones come from Debian 12's python3-matplotlib (3.6.3). Where
the running python3 cannot import matplotlib, the script re-runs itself
under /usr/bin/python3 (Debian's package belongs to it); with no matplotlib
at all, --check still checks the figures against the page, then exits 77
(skipped) instead of comparing the charts, and drawing exits 1.
"""

import argparse
import filecmp
import json
import os
import re
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS = os.path.join(ROOT, "docs", "results", "results.json")
SKIP = 77
SYSTEM_PYTHON = "/usr/bin/python3"
ANCHOR = re.compile(r'<a id="[^"]*"></a>')


def import_matplotlib():
    """Returns pyplot, or None. Re-executes under Debian's python3 once."""
    try:
        import matplotlib
    except ImportError:
        if (os.environ.get("GPUPOOL_PLOT_REEXEC") != "1"
                and os.path.exists(SYSTEM_PYTHON)
                and os.path.realpath(sys.executable)
                != os.path.realpath(SYSTEM_PYTHON)):
            os.environ["GPUPOOL_PLOT_REEXEC"] = "1"
            sys.stdout.flush()
            os.execv(SYSTEM_PYTHON,
                     [SYSTEM_PYTHON, os.path.abspath(__file__)] + sys.argv[1:])
        return None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


# --- The page's tables ------------------------------------------------------

def cells_of(line):
    """The cells of a Markdown table line, anchors removed, stripped."""
    return [ANCHOR.sub("", c).strip() for c in line.strip().strip("|").split("|")]


def table_after(lines, marker):
    """(headers, rows) of the first table after the line starting with marker."""
    start = next((i for i, l in enumerate(lines) if l.startswith(marker)), None)
    if start is None:
        return None
    i = start + 1
    while i < len(lines) and not lines[i].startswith("|"):
        if lines[i].startswith("## ") and i > start + 1:
            return None
        i += 1
    if i + 1 >= len(lines):
        return None
    headers = cells_of(lines[i])
    rows = []
    i += 2  # the |---| line
    while i < len(lines) and lines[i].startswith("|"):
        rows.append(cells_of(lines[i]))
        i += 1
    return headers, rows


def groups_of(chart):
    if "groups" in chart:
        return chart["groups"]
    return [{"name": None, "table_after": chart["table_after"],
             "rows": chart["rows"]}]


def check_figures(results, page_text):
    """Problems: figures not in the page verbatim, charts not shown."""
    problems = []
    lines = page_text.splitlines()
    flat = " ".join(page_text.split())
    page_dir = os.path.dirname(os.path.join(ROOT, results["page"]))
    for chart in results["charts"]:
        cid = chart["id"]
        for quote in chart.get("doc_quotes", []):
            if " ".join(quote.split()) not in flat:
                problems.append(f"{cid}: the page does not say {quote!r}")
        for field in ("date", "commit"):
            if chart.get(field) and chart[field] not in page_text:
                problems.append(f"{cid}: {field} {chart[field]!r} not in the page")
        image = os.path.relpath(os.path.join(ROOT, results["image_dir"],
                                             cid + ".svg"), page_dir)
        if f"]({image})" not in page_text:
            problems.append(f"{cid}: the page does not show the chart ({image})")
        for group in groups_of(chart):
            table = table_after(lines, group["table_after"])
            if table is None:
                problems.append(f"{cid}: no table after {group['table_after']!r}")
                continue
            headers, rows = table
            for row in group["rows"]:
                want = row["cells"]
                missing = [h for h in want if h not in headers]
                if missing:
                    problems.append(f"{cid}: table after {group['table_after']!r} "
                                    f"has no column {missing[0]!r}")
                    continue
                cols = {h: headers.index(h) for h in want}
                if not any(all(len(r) > cols[h] and r[cols[h]] == v
                               for h, v in want.items()) for r in rows):
                    problems.append(
                        f"{cid}: no row of the table after "
                        f"{group['table_after']!r} reads {want}")
    return problems


# --- Figures ----------------------------------------------------------------

NUMBER = re.compile(r"[0-9][0-9,]*(?:\.[0-9]+)?")
UNIT_NS = {"ns": 1.0, "µs": 1e3, "us": 1e3, "ms": 1e6, "s": 1e9}


def number(cell):
    """The first number in a cell ('**1.37 (186)**' -> 1.37)."""
    m = NUMBER.search(cell)
    if not m:
        raise ValueError(f"no number in {cell!r}")
    return float(m.group(0).replace(",", ""))


def nanoseconds(cell):
    m = re.fullmatch(r"\s*([0-9][0-9,]*(?:\.[0-9]+)?)\s*(ns|µs|us|ms|s)\s*", cell)
    if not m:
        raise ValueError(f"not a time: {cell!r}")
    return float(m.group(1).replace(",", "")) * UNIT_NS[m.group(2)]


def plain(cell):
    return cell.replace("**", "").replace("`", "")


def subtitle(chart):
    when = chart["date"] + (f", commit {chart['commit']}" if chart.get("commit") else "")
    return f"{chart['device']} · {when}"


def frame(fig, ax, chart):
    """Title (what, then device and date) at the top, command at the foot."""
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    height = fig.get_figheight()
    fig.text(0.01, 1 - 0.08 / height, chart["title"], fontsize=10,
             fontweight="bold", ha="left", va="top")
    fig.text(0.01, 1 - 0.30 / height, subtitle(chart), fontsize=9,
             ha="left", va="top")
    fig.text(0.01, 0.06 / height, f"command: {chart['command']}",
             fontsize=7, color="#555555", ha="left", va="bottom")
    fig.tight_layout(rect=(0, 0.28 / height, 1, 1 - 0.58 / height))


GREY, BLUE, ORANGE, GREEN, PURPLE = ("#8c8c8c", "#3366cc", "#e0802b",
                                     "#3a9a4a", "#8a5cb8")


def draw_raw_vs_pooled(plt, chart):
    rows = chart["rows"]
    col = chart["columns"]
    n = len(rows)
    fig, ax = plt.subplots(figsize=(8.6, 1.6 + 0.7 * n))
    h = 0.36
    raw = [nanoseconds(r["cells"][col["raw"]]) for r in rows]
    pooled = [nanoseconds(r["cells"][col["pooled"]]) for r in rows]
    ys = list(range(n))
    ax.barh([y - h / 2 for y in ys], raw, h, color=GREY,
            label=chart["legend"]["raw"])
    ax.barh([y + h / 2 for y in ys], pooled, h, color=BLUE,
            label=chart["legend"]["pooled"])
    top = max(raw + pooled)
    for y, r, p, row in zip(ys, raw, pooled, rows):
        ax.text(r, y - h / 2, " " + row["cells"][col["raw"]], va="center",
                fontsize=8)
        ax.text(p, y + h / 2, " " + row["cells"][col["pooled"]], va="center",
                fontsize=8)
    ax.set_yticks(ys)
    ax.set_yticklabels([f"{r['label']}\n{col['ratio']}: "
                        f"{plain(r['cells'][col['ratio']])}" for r in rows],
                       fontsize=8.5)
    ax.invert_yaxis()
    if chart.get("log_scale"):
        ax.set_xscale("log")
        ax.set_xlim(min(raw + pooled) / 2, top * 8)
        ax.set_xlabel("ns per cycle (log scale)")
    else:
        ax.set_xlim(0, top * 1.22)
        ax.set_xlabel("ns per cycle")
    ax.grid(axis="x", color="#dddddd", linewidth=0.6)
    ax.set_axisbelow(True)
    ax.legend(loc="lower left", bbox_to_anchor=(0, 1.01), ncol=2,
              fontsize=8, frameon=False, borderaxespad=0)
    frame(fig, ax, chart)
    return fig


def draw_ratio(plt, chart):
    headers = list(chart["columns"])
    colors = chart.get("colors", [GREY, BLUE, ORANGE, GREEN, PURPLE])
    labels, values, texts, bands = [], [], [], []
    for group in groups_of(chart):
        first = len(labels)
        for row in group["rows"]:
            labels.append(row["label"])
            values.append([number(row["cells"][h]) for h in headers])
            texts.append([plain(row["cells"][h]).split(" (")[0] for h in headers])
        bands.append((group["name"], first, len(labels)))
    n, k = len(labels), len(headers)
    h = 0.8 / k
    fig, ax = plt.subplots(figsize=(8.6, 1.5 + (0.14 + 0.15 * k) * n))
    for j, header in enumerate(headers):
        ys = [i - 0.4 + h * (j + 0.5) for i in range(n)]
        xs = [v[j] for v in values]
        ax.barh(ys, xs, h * 0.92, color=colors[j % len(colors)],
                label=chart["columns"][header])
        for y, x, t in zip(ys, xs, texts):
            ax.text(x, y, " " + t[j], va="center", fontsize=7, zorder=4,
                    bbox=dict(facecolor="white", edgecolor="none", alpha=0.75,
                              pad=0.3))
    top = max(max(v) for v in values)
    ax.axvline(1.0, color="#cc3333", linewidth=1.2, linestyle="--", zorder=3,
               label=chart.get("one", "1×"))
    ax.set_xlim(0, top * 1.15)
    ax.set_ylim(n - 0.5, -0.5)
    ax.set_yticks(range(n))
    named = any(name for name, _, _ in bands)
    ax.set_yticklabels([f"{lab} ({name})" if named else lab
                        for lab, name in zip(labels, [
                            name for name, a, b in bands for _ in range(a, b)])],
                       fontsize=8.5)
    for name, a, b in bands[1:]:
        ax.axhline(a - 0.5, color="#999999", linewidth=0.8)
    ax.set_xlabel("ratio (×)")
    ax.grid(axis="x", color="#dddddd", linewidth=0.6)
    ax.set_axisbelow(True)
    ax.legend(loc="lower left", bbox_to_anchor=(0, 1.01),
              ncol=3 if k < 3 else 2,
              fontsize=8, frameon=False, borderaxespad=0)
    frame(fig, ax, chart)
    return fig


DRAW = {"raw_vs_pooled": draw_raw_vs_pooled, "ratio": draw_ratio}


def draw_all(plt, results, out_dir):
    import matplotlib
    matplotlib.rcdefaults()
    matplotlib.rcParams.update({
        "svg.hashsalt": "gpupool-results",
        "svg.fonttype": "path",
        "font.family": "sans-serif",
        "font.sans-serif": ["DejaVu Sans"],
        "font.size": 9,
    })
    os.makedirs(out_dir, exist_ok=True)
    written = []
    for chart in results["charts"]:
        fig = DRAW[chart["kind"]](plt, chart)
        path = os.path.join(out_dir, chart["id"] + ".svg")
        fig.savefig(path, format="svg",
                    metadata={"Date": None,
                              "Creator": "gpupool tools/plot_results.py"})
        plt.close(fig)
        written.append(path)
    return written


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true",
                        help="compare instead of writing; exit 1 on a difference")
    parser.add_argument("--results", default=RESULTS)
    args = parser.parse_args()

    plt = import_matplotlib()  # first: it may re-run this script
    with open(args.results, encoding="utf-8") as f:
        results = json.load(f)
    with open(os.path.join(ROOT, results["page"]), encoding="utf-8") as f:
        page = f.read()
    image_dir = os.path.join(ROOT, results["image_dir"])

    problems = check_figures(results, page)
    for p in problems:
        print(f"plot_results: {p}")
    figures = sum(len(r["cells"]) for c in results["charts"]
                  for g in groups_of(c) for r in g["rows"])
    if not args.check:
        # A chart the page does not show yet is drawn all the same.
        if any("does not show the chart" not in p for p in problems):
            return 1
        if plt is None:
            print("plot_results: matplotlib is not installed "
                  "(Debian: python3-matplotlib)")
            return 1
        for path in draw_all(plt, results, image_dir):
            print(f"wrote {os.path.relpath(path, ROOT)}")
        return 0

    print(f"plot_results: {figures} table cells of {len(results['charts'])} "
          f"charts checked against {results['page']}: "
          f"{len(problems)} problem(s)")
    if plt is None:
        print("plot_results: charts not compared: matplotlib is not installed "
              "(Debian: python3-matplotlib)")
        return 1 if problems else SKIP
    import matplotlib
    if matplotlib.__version__ != results.get("matplotlib"):
        print(f"plot_results: note: drawing with matplotlib "
              f"{matplotlib.__version__}; the committed charts were drawn "
              f"with {results.get('matplotlib')}")
    chart_problems = []
    with tempfile.TemporaryDirectory() as tmp:
        drawn = {os.path.basename(p) for p in draw_all(plt, results, tmp)}
        committed = ({n for n in os.listdir(image_dir) if n.endswith(".svg")}
                     if os.path.isdir(image_dir) else set())
        for name in sorted(drawn | committed):
            rel = os.path.relpath(os.path.join(image_dir, name), ROOT)
            if name not in committed:
                chart_problems.append(f"{rel} is missing")
            elif name not in drawn:
                chart_problems.append(f"{rel} is not drawn from results.json")
            elif not filecmp.cmp(os.path.join(tmp, name),
                                 os.path.join(image_dir, name), shallow=False):
                chart_problems.append(f"{rel} differs from what the script draws")
    for p in chart_problems:
        print(f"plot_results: {p}")
    problems += chart_problems
    if problems:
        print("plot_results: FAILED (make results.json match the page, then "
              "redraw with tools/plot_results.py)")
        return 1
    print(f"plot_results: ok: {len(drawn)} charts in "
          f"{os.path.relpath(image_dir, ROOT)} match results.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
