#!/usr/bin/env bash
# Prints the python3 that can import matplotlib, or exits 1 when none can.
# Debian's python3-matplotlib belongs to /usr/bin/python3, which another
# python3 earlier on PATH (pyenv, a venv) cannot import.
for candidate in python3 /usr/bin/python3; do
  if command -v "$candidate" >/dev/null 2>&1 &&
     "$candidate" -c 'import matplotlib' >/dev/null 2>&1; then
    echo "$candidate"
    exit 0
  fi
done
exit 1
