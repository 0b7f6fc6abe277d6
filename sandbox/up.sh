#!/bin/sh
# make sandbox-up: the Debian packages (deps.sh), the venv, then Xvfb (or Xvnc
# with SANDBOX=xvnc), a session bus and an accessibility bus, openbox, x11vnc,
# the demo app, the scripted model (when OPENAI_API_KEY is not set) and the
# daemon, all recorded under $SANDBOX_DIR
# (default .sandbox/). SEATS=N starts N displays (each with its buses, openbox,
# x11vnc and demo app) and one daemon driving them all. Running it again
# changes nothing that works.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
venv=${VENV:-$root/.venv}
# Bad settings (SEATS=0, SANDBOX=typo) are refused before anything is installed.
# Standard library only: any python3 will do, and without one deps.sh comes first.
if command -v python3 >/dev/null 2>&1; then
    python3 "$root/sandbox/sandboxctl.py" check
fi
if ! "$root/sandbox/deps.sh" --check 2>/dev/null; then
    "$root/sandbox/deps.sh"   # installs as root, else prints the command and fails
fi
if [ ! -x "$venv/bin/cud" ]; then
    make -C "$root" setup
fi
exec "$venv/bin/python" "$root/sandbox/sandboxctl.py" up
