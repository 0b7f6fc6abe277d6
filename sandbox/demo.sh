#!/bin/sh
# make demo (after sandbox-up): one task end to end; see sandbox/demo.py.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
exec "${VENV:-$root/.venv}/bin/python" "$root/sandbox/demo.py"
