#!/usr/bin/env bash
# The snapshot viewer's checks (CTest: viewer_browser, label browser):
#  1. the fixture conforms to docs/snapshot.schema.json, and the schema check
#     and the view command refuse what they must (a bad state, a newer
#     version), each naming what is wrong;
#  2. tests/viewer/viewer_test.mjs: the page in Debian's chromium, headless,
#     driven by playwright-core.
# Installs what is missing: as root, Debian's chromium, python3-jsonschema,
# nodejs and npm (apt-get); then playwright-core at the version pinned in
# tests/viewer/package.json (npm ci into tests/viewer/node_modules,
# git-ignored). Never downloads a browser: chromium is Debian's.
# Exit status: 0 passed, 1 failed, 77 skipped (no chromium, node, npm
# package or jsonschema to be had; the message says which).
#
#   tests/viewer/run_viewer_test.sh [--screenshot=PATH]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
chromium=${CHROMIUM:-/usr/bin/chromium}
skip() { echo "viewer test: SKIPPED: $*"; exit 77; }

# The python3 that can import jsonschema (Debian's python3-jsonschema belongs
# to /usr/bin/python3, which another python3 earlier on PATH cannot import).
schema_python() {
  for candidate in python3 /usr/bin/python3; do
    if command -v "$candidate" >/dev/null 2>&1 &&
       "$candidate" -c 'import jsonschema' >/dev/null 2>&1; then
      echo "$candidate"
      return 0
    fi
  done
  return 1
}

# 0. Debian packages, when missing (root only: a user's machine is theirs).
missing=()
[[ -x $chromium ]] || missing+=(chromium)
schema_python >/dev/null || missing+=(python3-jsonschema)
command -v node >/dev/null 2>&1 || missing+=(nodejs)
command -v npm >/dev/null 2>&1 || missing+=(npm)
if ((${#missing[@]})); then
  if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null 2>&1; then
    echo "viewer test: installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    if ! { apt-get update && apt-get install -y --no-install-recommends "${missing[@]}"; }; then
      echo "viewer test: apt-get could not install ${missing[*]}"
    fi
  else
    echo "viewer test: missing ${missing[*]} (as root this script installs them with apt-get)"
  fi
fi
[[ -x $chromium ]] || skip "no chromium at $chromium (Debian: apt-get install chromium)"
command -v node >/dev/null 2>&1 || skip "no node (Debian: apt-get install nodejs)"
python=$(schema_python) || skip "no python3 with jsonschema (Debian: apt-get install python3-jsonschema)"
node_major=$(node -p 'process.versions.node.split(".")[0]')
((node_major >= 18)) || skip "node $(node --version) is older than playwright-core needs (18)"

# 1. playwright-core, the pinned version, unless it is there already.
pinned=$(node -p "require('$here/package.json').dependencies['playwright-core']")
installed=$(node -p "try { require('$here/node_modules/playwright-core/package.json').version } catch (e) { '' }")
if [[ $installed != "$pinned" ]]; then
  command -v npm >/dev/null 2>&1 || skip "no npm to install playwright-core $pinned (Debian: apt-get install npm)"
  echo "viewer test: installing playwright-core $pinned into tests/viewer/node_modules"
  (cd "$here" && npm ci --no-audit --no-fund --loglevel=error) ||
    skip "npm could not install playwright-core $pinned (no registry reachable?)"
fi

# 2. The schema and the command, on the fixture and on two broken copies.
fixture=$here/fixture_snapshot.json
"$python" "$root/tools/check_snapshot_schema.py" --consistency "$fixture"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$python" - "$fixture" "$work" <<'EOF'
import json, sys
snapshot = json.load(open(sys.argv[1]))
snapshot["devices"][1]["memory"][0]["segments"][1]["blocks"][0]["state"] = "lost"
json.dump(snapshot, open(sys.argv[2] + "/bad_state.json", "w"))
snapshot = json.load(open(sys.argv[1]))
snapshot["version"] = 2
json.dump(snapshot, open(sys.argv[2] + "/newer.json", "w"))
EOF
expect_refusal() {  # expect_refusal <what> <message pattern> <command...>
  local what=$1 pattern=$2 out
  shift 2
  if out=$("$@" 2>&1); then
    echo "viewer test: FAILED: $what was accepted"
    exit 1
  fi
  if ! grep -q -- "$pattern" <<<"$out"; then
    echo "viewer test: FAILED: $what: expected \"$pattern\" in: $out"
    exit 1
  fi
  echo "  ok   $what: $out"
}
expect_refusal "schema check of a block in an unknown state" \
  "/devices/1/memory/0/segments/1/blocks/0/state: 'lost' is not one of" \
  "$python" "$root/tools/check_snapshot_schema.py" "$work/bad_state.json"
expect_refusal "view command on a version 2 snapshot" "snapshot version 2 is newer" \
  "$python" "$root/tools/gpupool_snapshot_view.py" "$work/newer.json" -o "$work/newer.html"

# 3. The page in the browser.
PYTHON=$python CHROMIUM=$chromium node "$here/viewer_test.mjs" "$@"
