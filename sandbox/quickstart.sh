#!/bin/sh
# The README's quick start on a fresh Debian machine, from a clone:
#   sandbox/quickstart.sh demo   the Debian packages, the venv, the sandbox, the demo
#   sandbox/quickstart.sh test   the Debian packages, the venv, the whole test suite
# Installing the Debian packages needs root: as another user it asks sudo.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
case ${1:-} in
    demo|test) ;;
    *) echo "usage: sandbox/quickstart.sh demo|test" >&2; exit 2 ;;
esac
# The tests start LibreOffice and VLC too (deps.sh's test profile); the demo needs only the default list.
target=$1
set --
if [ "$target" = test ]; then set -- --profile test; fi
if [ "$(id -u)" != 0 ] && ! "$root/sandbox/deps.sh" "$@" --check 2>/dev/null && command -v sudo >/dev/null; then
    echo "quickstart: installing the missing Debian packages needs root: sudo sandbox/deps.sh $*"
    sudo "$root/sandbox/deps.sh" "$@"
else
    "$root/sandbox/deps.sh" "$@"
fi
exec make -C "$root" "$target"
