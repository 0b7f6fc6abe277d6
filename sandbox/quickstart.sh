#!/bin/sh
# The README's quick start on a fresh Debian machine, from a clone:
#   sandbox/quickstart.sh demo   the Debian packages, the venv, the sandbox, the demo
#   sandbox/quickstart.sh test   the Debian packages, the venv, the whole test suite
# Installing packages needs root (it prints the sudo command otherwise).
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
case ${1:-} in
    demo|test) ;;
    *) echo "usage: sandbox/quickstart.sh demo|test" >&2; exit 2 ;;
esac
"$root/sandbox/deps.sh"
exec make -C "$root" "$1"
