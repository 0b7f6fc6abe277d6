#!/bin/sh
# make sandbox-down: see sandbox/sandboxctl.py. Standard library only, so it
# works without the venv too.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
python=${VENV:-$root/.venv}/bin/python
[ -x "$python" ] || python=python3
exec "$python" "$root/sandbox/sandboxctl.py" down
