#!/usr/bin/env bash
# The package as a user installs it: a fresh venv, torch pinned first, then `pip install .` (the runtime
# dependencies come from pyproject.toml) and bfcl-eval without its dependencies; then, from outside the source
# tree, `rods --help`, a command that reads BFCL data, and the training modules' imports.
# Usage: tests/install_check.sh PYTHON BFCL_REQUIREMENT (the Makefile's `make test-install` passes both).
set -euo pipefail
trap 'echo "install check failed at line $LINENO" >&2' ERR
root=$(cd "$(dirname "$0")/.." && pwd)
py=${1:-python3}
bfcl=${2:?the bfcl-eval requirement, e.g. bfcl-eval==2026.3.23}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
start=$SECONDS
"$py" -m venv "$work/venv"
pip=("$work/venv/bin/pip" install -q)
"${pip[@]}" --upgrade pip
"${pip[@]}" -r "$root/requirements-torch.txt"
"${pip[@]}" "$root"
"${pip[@]}" --no-deps "$bfcl"
cd "$work"  # the installed package runs, not the source tree
help=$("$work/venv/bin/rods" --help)
[[ $help == *"online data synthesis"* ]] || { echo "rods --help: unexpected output: $help" >&2; exit 1; }
"$work/venv/bin/rods" seeds stats --split test --json \
  | "$work/venv/bin/python" -c 'import json, sys; assert json.load(sys.stdin)["tasks"] == 400'
"$work/venv/bin/python" -c "import rods_core.loop, rods_core.trainer, rods_core.tracking, storage.reader"
"$work/venv/bin/python" -c "import rods_core, sys; assert '$root' not in rods_core.__file__, rods_core.__file__"
echo "install check passed in $((SECONDS - start)) s: $("$work/venv/bin/pip" list 2>/dev/null | wc -l) packages"
