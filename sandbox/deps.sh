#!/bin/sh
# shellcheck disable=SC2086  # $packages is split into words on purpose throughout
# deps.sh — THE list of Debian packages cud needs to run, to run its sandbox
# and demo, and to run its tests. `.ci/run`, the quick start and sandbox-up
# use it.
#
#   sandbox/deps.sh          install the missing ones (apt-get, as root),
#                            or print the exact command to run (not root)
#   sandbox/deps.sh --list   print the list, one package a line
#   sandbox/deps.sh --check  exit 0 if all are installed, else name the missing
#
# `--profile NAME` (before the others) adds a profile's packages to the list:
#   test      what the test suite runs besides: the office and media players and
#             GIMP the OSWorld seat's tests start (`.ci/run` and `quickstart.sh test` use it)
#   osworld   the applications of OSWorld's VM image, for seats that run its tasks
#             (docs/osworld.md, "The OSWorld seat")
# The default list stays the daemon's, the sandbox's and the demo's.
set -eu

# Why each one is here:
packages="
make
python3
python3-venv
python3-tk
libxcb1
libxcb-randr0
libxcb-render0
libxcb-shm0
libxcb-xfixes0
xvfb
xauth
x11-utils
x11-xserver-utils
openbox
x11vnc
tigervnc-standalone-server
tigervnc-tools
fonts-dejavu-core
xdotool
scrot
chromium
xterm
python3-gi
gir1.2-gtk-3.0
python3-pyqt5
systemd
util-linux
iproute2
nftables
openssh-client
openssh-server
sshfs
fuse3
dbus-daemon
dbus-bin
at-spi2-core
libatk-adaptor
ffmpeg
xclip
zenity
mousepad
xdg-utils
"
# make, python3, python3-venv   the Makefile and its .venv
# python3-tk                    the tests' recording window and Tk forms
# libxcb1, libxcb-randr0, -render0, -shm0, -xfixes0
#                               loaded at run time by mss (the X11 driver's screenshots)
# xvfb, xauth, x11-utils        the virtual display, its cookie, xdpyinfo for humans
# x11-xserver-utils             xrandr: the VNC tests change the desktop size
# openbox                       the sandbox's window manager
# x11vnc                        watching the sandbox (localhost, password)
# tigervnc-standalone-server    Xvnc: SANDBOX=xvnc and the VNC driver's tests
# tigervnc-tools                vncpasswd, for the generated VNC password
# fonts-dejavu-core             glyphs for the demo's non-ASCII text
# xdotool, scrot                `make bench` compares against them
# chromium                      the tests open `cuctl report` pages in headless Chromium, and
#                               drive it headed on the conformance suite's displays
# xterm                         the conformance suite's terminal
# python3-gi, gir1.2-gtk-3.0    the sandbox's demo app and the conformance suite's GTK 3 probe (Debian's python3)
# python3-pyqt5                 the conformance suite's Qt 5 probe (xcb platform, Debian's python3)
# systemd                       systemd-analyze and systemd-sysusers for the unit tests
# util-linux                    setpriv, for the other-uid socket tests, and the video recorder's
#                               --pdeathsig KILL (no ffmpeg outlives the daemon); unshare and nsenter: the
#                               fleet tests' network namespace (tests/support/netns.py)
# iproute2                      ip, which brings lo up in that namespace
# nftables                      nft: a seat's network allow-list, rules keyed on the seat's user (docs/sessions.md)
# openssh-client                ssh, which cuctl --host runs; ssh-keygen for the tests' keys
# openssh-server                sshd: the ssh tests start their own on 127.0.0.1 (never the system's)
# sshfs                         a real network filesystem (over that sshd) that a state directory on is refused
# fuse3                         fusermount3 (setuid, as on desktops, which many packages pull it onto): a seat's
#                               user mounts FUSE in its home, which the reset detaches (sshfs depends on it too)
# dbus-daemon, dbus-bin         a session bus per seat (dbus-daemon; dbus-send in the target tests), which
#                               applications find the accessibility bus through
# at-spi2-core                  at-spi-bus-launcher and the registry: the accessibility bus cud reads targets from
# libatk-adaptor                GTK 3's bridge onto that bus (Qt and Chromium carry their own)
# xclip                         a seat's clipboard, read and set as the seat's user (docs/sessions.md)
# zenity, mousepad              the session tests' dialog and GTK text editor, closed by the seat's reset
# xdg-utils                     xdg-open: a spec's ``open`` setup step, the desktop's opener (docs/specs.md)
# ffmpeg                        records each task on an X11 seat (x11grab -> H.264 in fragmented MP4;
#                               docs/video.md); ffprobe checks the recordings in the tests

# The test profile: tests/test_osworld_seat.py opens real documents in LibreOffice Calc and
# Writer (with the GTK 3 backend the OSWorld seat uses) and starts VLC, to prove the seat's
# profile keeps every first-start dialog away; tests/test_osworld_e2e.py runs OSWorld's Calc,
# Writer and Impress tasks, whose ``open`` step activates the document's window with wmctrl;
# tests/test_osworld_e2e_gimp.py runs a GIMP task, its model going through GIMP's menus;
# tests/test_osworld_e2e_apps.py a VLC and a multi_apps task, with wmctrl's window waits.
test_packages="
gimp
libreoffice-calc
libreoffice-impress
libreoffice-writer
libreoffice-gtk3
vlc
wmctrl
"
# The osworld profile: what OSWorld's VM image installs for its tasks' applications
# (desktop_env/server/README.md of OSWorld), as Debian names them:
osworld_packages="
libreoffice-calc
libreoffice-impress
libreoffice-writer
libreoffice-gtk3
gimp
vlc
thunderbird
chromium
wmctrl
xdotool
socat
xclip
ffmpeg
python-is-python3
python3-venv
jq
unzip
xsel
sysstat
expect
"
# libreoffice-calc, -impress, -writer  the office tasks' applications; -gtk3 its GTK 3 backend
#                               (accessibility, the look of OSWorld's Ubuntu)
# gimp, vlc, thunderbird, chromium  the other task domains' applications (Debian's Chromium for Chrome)
# wmctrl, xdotool               window activation, as OSWorld's server and tasks do it
# socat, xclip, ffmpeg          OSWorld's server setup installs them; tasks' commands use them
# python-is-python3             `python`, which OSWorld's tasks run (`python -c "import pyautogui; …"`)
# python3-venv                  the seat's pyautogui environment (python -m cud.osworld.seat python)
# jq, unzip, xsel, sysstat, expect  what tasks install with sudo, which a seat's user has not: setup
#                               checks they are here (docs/osworld.md, "Placeholders and the screen")

profile=
if [ "${1:-}" = --profile ]; then
    case ${2:-} in
    test) packages="$packages $test_packages" ;;
    osworld) packages="$packages $osworld_packages" ;;
    *)
        echo "usage: sandbox/deps.sh [--profile test|osworld] [--list | --check]" >&2
        exit 2
        ;;
    esac
    profile=$2
    shift 2
fi
# A package in both lists is named once.
packages=$(printf '%s\n' $packages | awk 'NF && !seen[$0]++')

missing() {
    for p in $packages; do
        status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
        case $status in
            *" installed") ;;
            *) printf '%s\n' "$p" ;;
        esac
    done
}

case ${1:-} in
--list)
    printf '%s\n' $packages
    exit 0
    ;;
--check|"")
    ;;
*)
    echo "usage: sandbox/deps.sh [--profile test|osworld] [--list | --check]" >&2
    exit 2
    ;;
esac

if ! command -v dpkg-query >/dev/null 2>&1; then
    echo "deps: not a Debian-like system (no dpkg-query); install the equivalents of:" >&2
    printf '  %s\n' $packages >&2
    [ "${1:-}" = --check ] && exit 1
    exit 0
fi

todo=$(missing | tr '\n' ' ')
todo=${todo% }
if [ -z "$todo" ]; then
    [ "${1:-}" = --check ] || echo "deps: all $(printf '%s\n' $packages | wc -l) Debian packages${profile:+ of profile $profile} are installed"
    exit 0
fi
if [ "${1:-}" = --check ]; then
    echo "deps: missing Debian packages: $todo" >&2
    exit 1
fi
if [ "$(id -u)" = 0 ]; then
    echo "deps: installing $todo"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update
    # shellcheck disable=SC2086  # one word per package
    apt-get install -y $todo
    # Debian starts a freshly installed openssh-server's sshd on port 22 of every address.
    # The tests only run their own on 127.0.0.1, so one installed for them is switched off
    # again (an sshd that was there before is never touched).
    case " $todo " in
    *" openssh-server "*)
        if [ -d /run/systemd/system ] && systemctl disable --now ssh.service >/dev/null 2>&1; then
            echo "deps: installed openssh-server for the tests' own sshd; its system service is disabled"
        fi
        ;;
    esac
else
    echo "deps: missing Debian packages; install them with:" >&2
    echo "  sudo apt-get update && sudo apt-get install -y $todo" >&2
    exit 1
fi
