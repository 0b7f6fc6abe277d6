#!/bin/sh
# install.sh DESTDIR PREFIX — install cud, its systemd units, its sysusers.d and
# tmpfiles.d snippets and an example config (what `make install` runs).
#
#   PREFIX/lib/cud/venv        a venv with cud installed by pip (from this tree)
#   PREFIX/bin/cud, cuctl      symlinks into that venv
#   PREFIX/lib/cud/cud-xauth   the display units' cookie helper
#   PREFIX/lib/cud/session-bus.conf, accessibility.conf   cud-bus@.service's bus configs
#   UNITDIR                    cud.service xvfb@.service x11vnc@.service xvnc@.service cud-bus@.service
#                              cud-session@.service cud-fleet.service
#   POLKITRULESDIR/50-cud-session.rules   lets user cud stop/start the seats' session units
#   SYSUSERSDIR/cud.conf, TMPFILESDIR/cud.conf
#   SYSCONFDIR/cud/cud.toml    the example config, only if there is none yet
#   PREFIX/share/doc/cud/      README.md, docs/ (the reference pages) and cud.toml.example
#
# Everything is written below DESTDIR (empty: the real root). The installed
# files name the final paths (PREFIX, SYSCONFDIR), never DESTDIR.
# Environment: PYTHON (python3), PIP_ARGS (extra pip arguments, e.g. an offline
# --no-index --find-links DIR), EXTRAS (cud's optional extras, comma-separated:
# EXTRAS=fleet on a machine in a fleet, for cud-fleet.service), UNITDIR
# (PREFIX/lib/systemd/system), SYSUSERSDIR (PREFIX/lib/sysusers.d), TMPFILESDIR (PREFIX/lib/tmpfiles.d),
# SYSCONFDIR (/etc), POLKITRULESDIR (SYSCONFDIR/polkit-1/rules.d). systemd reads units, sysusers and tmpfiles from
# /usr/local/lib and /usr/lib, so other prefixes need UNITDIR etc. set, e.g.
# to /etc/systemd/system.
set -eu

if [ $# -ne 2 ]; then
    echo "usage: systemd/install.sh DESTDIR PREFIX   (DESTDIR may be \"\")" >&2
    exit 2
fi
destdir=${1%/}
prefix=${2%/}
case $prefix in
    /*) ;;
    *) echo "install.sh: PREFIX must be an absolute path, got '$prefix'" >&2; exit 2 ;;
esac
if [ -n "$destdir" ]; then
    case $destdir in
        /*) ;;
        *) destdir=$(pwd)/$destdir ;;
    esac
fi

here=$(cd "$(dirname "$0")" && pwd)
src=$(dirname "$here")
python=${PYTHON:-python3}
sysconfdir=${SYSCONFDIR:-/etc}
unitdir=${UNITDIR:-$prefix/lib/systemd/system}
sysusersdir=${SYSUSERSDIR:-$prefix/lib/sysusers.d}
tmpfilesdir=${TMPFILESDIR:-$prefix/lib/tmpfiles.d}
polkitrulesdir=${POLKITRULESDIR:-$sysconfdir/polkit-1/rules.d}
venv=$prefix/lib/cud/venv
say() { printf 'install: %s\n' "$*"; }

# The units in this tree name /usr/local and /etc; rewrite to where we install.
rewrite() {
    sed -e "s|/usr/local/|$prefix/|g" -e "s|/etc/cud|$sysconfdir/cud|g" "$1"
}

# -- the venv -------------------------------------------------------------------------------
extras=${EXTRAS:-}
case $extras in
    *[!A-Za-z0-9,_-]*) echo "install.sh: EXTRAS is a comma-separated list of extras, got '$extras'" >&2; exit 2 ;;
esac
package=$src${extras:+[$extras]}
say "venv $venv (pip install $package)"
rm -rf "$destdir$venv"
mkdir -p "$(dirname "$destdir$venv")"
"$python" -m venv "$destdir$venv"
# shellcheck disable=SC2086  # PIP_ARGS is a list of words on purpose
"$destdir$venv/bin/python" -m pip install --quiet --disable-pip-version-check ${PIP_ARGS:-} "$package"
if [ -n "$destdir" ]; then
    # pip wrote the DESTDIR path into scripts' #! lines and activate files:
    # point them at the final location.
    grep -rlF "$destdir$venv" "$destdir$venv/bin" "$destdir$venv/pyvenv.cfg" 2>/dev/null |
        while IFS= read -r f; do
            [ -L "$f" ] && continue
            sed -i "s|$destdir$venv|$venv|g" "$f"
        done
    # Byte code records its source path for tracebacks: strip DESTDIR there too.
    "$destdir$venv/bin/python" -m compileall -q -f -s "$destdir" "$destdir$venv/lib" >/dev/null
fi
mkdir -p "$destdir$prefix/bin"
for tool in cud cuctl; do
    ln -sfn "../lib/cud/venv/bin/$tool" "$destdir$prefix/bin/$tool"
done
install -m 0755 "$here/cud-xauth" "$destdir$prefix/lib/cud/cud-xauth"
install -m 0644 "$here/cud-session-bus.conf" "$destdir$prefix/lib/cud/session-bus.conf"
install -m 0644 "$here/cud-accessibility.conf" "$destdir$prefix/lib/cud/accessibility.conf"

# -- systemd --------------------------------------------------------------------------------
say "units in $unitdir"
mkdir -p "$destdir$unitdir" "$destdir$sysusersdir" "$destdir$tmpfilesdir"
for unit in cud.service xvfb@.service x11vnc@.service xvnc@.service cud-bus@.service cud-session@.service \
            cud-fleet.service; do
    rewrite "$here/$unit" > "$destdir$unitdir/$unit"
    chmod 0644 "$destdir$unitdir/$unit"
done
rewrite "$here/cud.sysusers.conf" > "$destdir$sysusersdir/cud.conf"
rewrite "$here/cud.tmpfiles.conf" > "$destdir$tmpfilesdir/cud.conf"
chmod 0644 "$destdir$sysusersdir/cud.conf" "$destdir$tmpfilesdir/cud.conf"
# What cud's user may ask systemd for, for [[seats]] session_unit: stop and start
# cud-session@N.service and its command units (the rule's comment says more).
mkdir -p "$destdir$polkitrulesdir"
install -m 0644 "$here/cud-session.rules" "$destdir$polkitrulesdir/50-cud-session.rules"

# -- config and docs ------------------------------------------------------------------------
docdir=$prefix/share/doc/cud
mkdir -p "$destdir$docdir" "$destdir$sysconfdir/cud"
install -m 0644 "$here/cud.toml.example" "$destdir$docdir/cud.toml.example"
[ -f "$src/README.md" ] && install -m 0644 "$src/README.md" "$destdir$docdir/README.md"
# The pages README.md links to, beside it as in the tree (the units' Documentation= names them).
if [ -d "$src/docs" ]; then
    mkdir -p "$destdir$docdir/docs"
    for page in "$src"/docs/*.md "$src"/docs/*.png; do
        if [ -f "$page" ]; then install -m 0644 "$page" "$destdir$docdir/docs/"; fi
    done
fi
if [ -e "$destdir$sysconfdir/cud/cud.toml" ]; then
    say "kept the existing $sysconfdir/cud/cud.toml (the example is in $docdir)"
else
    install -m 0644 "$here/cud.toml.example" "$destdir$sysconfdir/cud/cud.toml"
    say "config $sysconfdir/cud/cud.toml (from the example)"
fi

# -- on a live system: users, directories, reload -----------------------------------------------
# Only for the system's own install (not DESTDIR, not a private SYSCONFDIR).
if [ -z "$destdir" ] && [ "$sysconfdir" = /etc ] && [ "$(id -u)" = 0 ] && [ -d /run/systemd/system ]; then
    systemd-sysusers "$sysusersdir/cud.conf"
    systemd-tmpfiles --create "$tmpfilesdir/cud.conf"
    systemctl daemon-reload
    cat <<MSG
install: done. Next:
  (umask 077; printf '%s\n' "\$OPENAI_API_KEY" > $sysconfdir/cud/openai-api-key)
  (umask 077; tigervncpasswd -f > $sysconfdir/cud/vnc-password)   # to watch with x11vnc@0
  systemctl enable --now xvfb@0.service cud-bus@0.service cud.service [x11vnc@0.service]
  cuctl --socket /run/cud/cud.sock ping
Several seats (xvfb@1..N, [[seats]] in $sysconfdir/cud/cud.toml, a drop-in for cud.service):
  see "Several seats" in $docdir/docs/systemd.md. Upgrading: restart the display units, then cud.
In a fleet (installed with EXTRAS=fleet): [fleet] address and [access] for cud-fleet in
  $sysconfdir/cud/cud.toml, then systemctl enable --now cud-fleet.service (see $docdir/docs/fleets.md).
MSG
else
    say "done under '${destdir:-/}'; on the target run systemd-sysusers, systemd-tmpfiles --create and systemctl daemon-reload"
fi
