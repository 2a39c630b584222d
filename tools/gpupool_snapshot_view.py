#!/usr/bin/env python3
"""Renders a gpupool memory snapshot as one self-contained HTML page.

    tools/gpupool_snapshot_view.py SNAPSHOT.json [-o PAGE.html]

Reads a snapshot (what gpupool::SnapshotToJson or GPUPOOL_SNAPSHOT=path
writes; format docs/snapshot.schema.json), checks that it is one this viewer
reads (format "gpupool.snapshot", version 1) and embeds it in the viewer
page (tools/viewer/snapshot_viewer.html). The page needs no network: open it
in any browser. Without -o the page is written beside the snapshot
(SNAPSHOT.html); "-o -" writes it to standard output.

Exit status: 0 on success, 1 when the snapshot cannot be read or is not one
this viewer reads (the message says why).
"""

import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
TEMPLATE = os.path.join(HERE, "viewer", "snapshot_viewer.html")
PLACEHOLDER = "__GPUPOOL_SNAPSHOT_JSON__"
FORMAT = "gpupool.snapshot"
VERSIONS = (1,)


class SnapshotError(Exception):
    pass


def check(snapshot):
    """Raises SnapshotError unless `snapshot` is a snapshot this viewer reads."""
    if not isinstance(snapshot, dict):
        raise SnapshotError("not a gpupool snapshot: the document is not a JSON object")
    if snapshot.get("format") != FORMAT:
        if "format" not in snapshot:
            raise SnapshotError(f'not a gpupool snapshot: it has no "format" key '
                                f'(expected "format": "{FORMAT}")')
        raise SnapshotError(f'not a gpupool snapshot: "format" is '
                            f'{json.dumps(snapshot["format"])}, expected "{FORMAT}"')
    version = snapshot.get("version")
    if version not in VERSIONS or isinstance(version, bool):
        supported = ", ".join(str(v) for v in VERSIONS)
        if isinstance(version, int) and not isinstance(version, bool) and version > max(VERSIONS):
            raise SnapshotError(f"snapshot version {version} is newer than this viewer "
                                f"reads (version {supported}); use the viewer of the "
                                f"gpupool that wrote it")
        raise SnapshotError(f'unsupported snapshot "version": {json.dumps(version)} '
                            f"(this viewer reads version {supported})")
    if not isinstance(snapshot.get("devices", []), list):
        raise SnapshotError('"devices" is not a list')


def embed(snapshot, template):
    """The page: `template` with `snapshot` in its script element.

    Every "<" of the JSON is written as the escape \\u003c (and ">", "&" as
    \\u003e, \\u0026), so no "</script>" or "<!--" inside a string can end or
    alter the script element; JSON.parse reads the same text back.
    """
    if template.count(PLACEHOLDER) != 1:
        raise SnapshotError(f"{TEMPLATE}: expected exactly one {PLACEHOLDER}")
    text = json.dumps(snapshot, ensure_ascii=False, separators=(",", ":"))
    text = (text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
            .replace("\u2028", "\\u2028").replace("\u2029", "\\u2029"))
    return template.replace(PLACEHOLDER, text)


def main():
    parser = argparse.ArgumentParser(
        description="Render a gpupool memory snapshot as a self-contained HTML page.")
    parser.add_argument("snapshot", metavar="SNAPSHOT.json")
    parser.add_argument("-o", "--output", metavar="PAGE.html",
                        help="where to write the page (default: beside the snapshot; - for stdout)")
    args = parser.parse_args()

    try:
        try:
            with open(args.snapshot, encoding="utf-8") as f:
                snapshot = json.load(f)
        except OSError as error:
            raise SnapshotError(f"cannot read: {error.strerror}")
        except ValueError as error:
            raise SnapshotError(f"not JSON: {error}")
        check(snapshot)
        with open(TEMPLATE, encoding="utf-8") as f:
            page = embed(snapshot, f.read())
    except SnapshotError as error:
        print(f"gpupool_snapshot_view: {args.snapshot}: {error}", file=sys.stderr)
        return 1

    output = args.output
    if output is None:
        output = os.path.splitext(args.snapshot)[0] + ".html"
    if output == "-":
        sys.stdout.write(page)
    else:
        try:
            with open(output, "w", encoding="utf-8") as f:
                f.write(page)
        except OSError as error:
            print(f"gpupool_snapshot_view: cannot write {output}: {error.strerror}",
                  file=sys.stderr)
            return 1
        print(f"gpupool_snapshot_view: wrote {output}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
