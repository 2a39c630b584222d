#!/usr/bin/env python3
"""Validates gpupool memory snapshots against docs/snapshot.schema.json.

    tools/check_snapshot_schema.py [--schema=PATH] [--consistency] FILE...

Checks each FILE (a snapshot as gpupool::SnapshotToJson or GPUPOOL_SNAPSHOT
writes it) against the JSON Schema (draft 2020-12) and prints one line per
file. On the first file that does not conform it prints the JSON path of the
error (e.g. /devices/0/memory/1/segments/0/blocks/2/state) and what is wrong,
and exits 1; a file that cannot be read or parsed exits 1 too, and a missing
jsonschema module exits 2 (Debian: apt-get install python3-jsonschema).

--consistency also checks what the schema cannot say: every kind's
reserved_bytes is the sum of its segments' bytes, and a segment's blocks lie
inside it, in offset order, without overlapping.
"""

import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_SCHEMA = os.path.join(HERE, "..", "docs", "snapshot.schema.json")


def pointer(path):
    """A JSON pointer ("/devices/0/kind") for a jsonschema error path."""
    return "/" + "/".join(str(p) for p in path) if path else "(the document)"


def consistency_errors(snapshot):
    """Yields (path, message) for what the schema cannot check."""
    for d, device in enumerate(snapshot["devices"]):
        for m, memory in enumerate(device["memory"]):
            base = f"/devices/{d}/memory/{m}"
            total = sum(s["bytes"] for s in memory["segments"])
            if total != memory["reserved_bytes"]:
                yield (base + "/reserved_bytes",
                       f"{memory['reserved_bytes']} is not the sum of the "
                       f"segments' bytes ({total})")
            for s, segment in enumerate(memory["segments"]):
                end = 0
                for b, block in enumerate(segment["blocks"]):
                    where = f"{base}/segments/{s}/blocks/{b}"
                    if block["offset"] < end:
                        yield (where + "/offset",
                               f"block at {block['offset']} overlaps or precedes "
                               f"the previous block (which ends at {end})")
                    end = block["offset"] + block["bytes"]
                    if end > segment["bytes"]:
                        yield (where + "/bytes",
                               f"block ends at {end}, past its segment's "
                               f"{segment['bytes']} bytes")


def main():
    parser = argparse.ArgumentParser(
        description="Validate gpupool snapshots against the JSON Schema.")
    parser.add_argument("files", nargs="+", metavar="FILE")
    parser.add_argument("--schema", default=DEFAULT_SCHEMA,
                        help="the schema (default: docs/snapshot.schema.json)")
    parser.add_argument("--consistency", action="store_true",
                        help="also check sizes and offsets across blocks")
    args = parser.parse_args()

    try:
        import jsonschema
    except ImportError:
        print(f"check_snapshot_schema: {sys.executable} cannot import jsonschema "
              "(Debian: apt-get install python3-jsonschema, for /usr/bin/python3)",
              file=sys.stderr)
        return 2

    with open(args.schema, encoding="utf-8") as f:
        schema = json.load(f)
    validator_class = jsonschema.validators.validator_for(schema)
    validator_class.check_schema(schema)
    validator = validator_class(schema)

    for path in args.files:
        try:
            with open(path, encoding="utf-8") as f:
                snapshot = json.load(f)
        except (OSError, ValueError) as error:
            print(f"{path}: cannot read a JSON document: {error}", file=sys.stderr)
            return 1
        errors = sorted(validator.iter_errors(snapshot),
                        key=lambda e: list(map(str, e.absolute_path)))
        if errors:
            error = jsonschema.exceptions.best_match(errors)
            print(f"{path}: {pointer(error.absolute_path)}: {error.message}",
                  file=sys.stderr)
            if len(errors) > 1:
                print(f"{path}: ({len(errors) - 1} more error(s))", file=sys.stderr)
            return 1
        if args.consistency:
            for where, message in consistency_errors(snapshot):
                print(f"{path}: {where}: {message}", file=sys.stderr)
                return 1
        print(f"{path}: ok (gpupool.snapshot version {snapshot['version']})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
