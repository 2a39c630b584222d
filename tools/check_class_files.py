#!/usr/bin/env python3
"""Counts the files each class's member functions are defined in.

A class lives in one file, two at most (STYLE.md: never sliced across a
folder to keep files short). For every out-of-class definition
`Type Foo::Bar(...)` that starts a line in a .cc or .h file under the given
folders (default: src/backends), this lists the files per class and exits 1
when a class has definitions in more than two.

Usage: tools/check_class_files.py [--all] [folder ...]
  --all  list every class, not only those over the limit.
"""

import pathlib
import re
import sys

LIMIT = 2
# The text before the first '(' of a definition ends with `Class::member`
# (Class may itself be qualified: Outer::Inner::member).
DEFINITION = re.compile(r"(?:^|[\s*&>])((?:\w+::)*\w+)::(~?\w+|operator\S*)\s*$")
SKIP = ("//", "#", "return", "using", "namespace", "}", "{", "case", "static_assert")


def classes_in(path):
    found = set()
    for line in path.read_text(errors="replace").splitlines():
        if not line or line[0].isspace() or line.startswith(SKIP):
            continue
        head = line.split("(", 1)[0]
        if "(" not in line or "=" in head:
            continue
        match = DEFINITION.search(head)
        if match:
            found.add(match.group(1))
    return found


def main(argv):
    show_all = "--all" in argv
    folders = [a for a in argv if not a.startswith("--")] or ["src/backends"]
    files_of = {}
    for folder in folders:
        for path in sorted(pathlib.Path(folder).rglob("*")):
            if path.suffix not in (".cc", ".h"):
                continue
            for name in classes_in(path):
                # Namespace-qualified free functions (absl::..., std::...)
                # are not ours to count.
                if name.split("::")[0] in ("absl", "std", "internal"):
                    continue
                files_of.setdefault(name, set()).add(str(path))
    over = {name: files for name, files in files_of.items() if len(files) > LIMIT}
    for name in sorted(files_of if show_all else over):
        files = sorted(files_of[name])
        print(f"{name}: {len(files)} file(s): {', '.join(files)}")
    print(f"class-files: {len(files_of)} classes, {len(over)} over {LIMIT} files")
    return 1 if over else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
