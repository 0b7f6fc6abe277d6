"""The program in the conformance suite's xterm: a small terminal application.

It runs inside a real xterm (``tests/support/apps/xterm.py`` starts both), puts
its tty in raw mode and reads exactly what xterm sends, as any full-screen
terminal program (vim, less, mc) does, then reports it through the file
protocol of ``tests/support/apps/reporting.py``. Standard library only: it runs
on whichever Python starts it.

What reaches it:

- keys, as the bytes xterm makes of them (``"\\x1b[15;2~"`` is Shift+F5,
  ``"\\x1bx"`` Alt+x, ``"\\x01"`` Ctrl+A, ``"\\x1b[27;5;13~"`` Ctrl+Enter under
  ``modifyOtherKeys``…), parsed into the suite's key events; printable
  characters are typed into its text field (``value``), Return as ``"\\n"``,
  Backspace deletes, Ctrl+A selects all of it;
- the mouse, through xterm's mouse protocol: any-event tracking (DECSET 1003)
  in SGR encoding with *pixel* positions (1006 + 1016), so every press, release,
  motion and wheel notch arrives as ``"\\x1b[<b;px;pyM"`` (``m`` for a release)
  with the pointer's pixel inside the text area. Adding the text area's screen
  position (``CSI 13;2 t``, xterm's own report) gives exact screen coordinates.
  Double-clicks are recognised here, from the reports' arrival times, the way
  terminal programs do (xterm itself does not report them; ncurses, vim and mc
  each count clicks); a left drag over the sample line selects text, as
  ``vim`` does with ``mouse=a``.

The screen (80×24 cells): row 1 a title, row 3 the sample line, rows 5-9 the
text field, rows 11-24 the pad (the scroll area; its position changes by one
per wheel notch).
"""

from __future__ import annotations

import json
import os
import re
import select
import sys
import termios
import time
import traceback
import tty
from typing import Any

COLS, ROWS = 80, 24
TITLE_ROW, SAMPLE_ROW = 1, 3
FIELD_ROWS = (5, 9)  # first and last, 1-based, inclusive
PAD_ROWS = (11, 24)
SAMPLE = "  alpha bravo charlie delta echo foxtrot golf hotel"
#: Drawn before the probe reports ready: xterm looks for fallback fonts (Droid Sans Fallback for CJK) the
#: first time a glyph is missing from DejaVu Sans Mono, which can stall it for a second or more while
#: input queues up; better at startup than in the middle of a test.
GLYPHS = "Grüße ✓ — € ½ «¿» Ωμέγα Привет 日本語"
GLYPHS_ROW = 2
SCROLL_MIDDLE = (50, 50)
#: Two left presses this close in time (s) and space (px) are a double-click: GTK's and Qt's defaults.
DOUBLE_CLICK_TIME, DOUBLE_CLICK_DISTANCE = 0.4, 5
#: A lone ESC is the Escape key once this long (s) has passed with nothing after it (vim's ttimeoutlen).
ESC_TIMEOUT = 0.05

# Modes: alternate screen, any-event mouse tracking, SGR encoding, SGR pixel positions; cursor hidden.
ENABLE = "\x1b[?1049h\x1b[?1003h\x1b[?1006h\x1b[?1016h\x1b[?25l"
#: Ask for the text area's screen position (CSI 3;x;y t) and its size in pixels (CSI 4;h;w t); the
#: cell-size report (CSI 16 t) is refused while allowWindowOps is false, whatever disallowedWindowOps says.
QUERY_GEOMETRY = "\x1b[13;2t\x1b[14t"

TILDE_KEYS = {1: "Home", 2: "Insert", 3: "Delete", 4: "End", 5: "PageUp", 6: "PageDown", 7: "Home", 8: "End",
              11: "F1", 12: "F2", 13: "F3", 14: "F4", 15: "F5", 17: "F6", 18: "F7", 19: "F8", 20: "F9",
              21: "F10", 23: "F11", 24: "F12"}
LETTER_KEYS = {"A": "ArrowUp", "B": "ArrowDown", "C": "ArrowRight", "D": "ArrowLeft", "H": "Home", "F": "End",
               "P": "F1", "Q": "F2", "R": "F3", "S": "F4", "E": "Clear", "M": "Enter"}
#: Codes of keys named by number (modifyOtherKeys' CSI 27;m;code~ and CSI code;m u).
CODE_KEYS = {8: "Backspace", 9: "Tab", 13: "Enter", 27: "Escape", 127: "Backspace"}
CSI = re.compile(rb"\x1b\[([\x30-\x3f]*)([\x20-\x2f]*)([\x40-\x7e])")


def modifier_names(param: int) -> list[str]:
    """xterm's modifier parameter (1 + shift 1, alt 2, ctrl 4, meta 8) as the suite's names."""
    bits = max(param - 1, 0)
    names = set()
    if bits & 1:
        names.add("shift")
    if bits & (2 | 8):  # Meta is Alt here: both are mod1 and xterm's Meta sends what Alt does
        names.add("alt")
    if bits & 4:
        names.add("ctrl")
    return sorted(names)


class Probe:
    def __init__(self, events_path: str, state_path: str, commands_path: str, raw_path: str) -> None:
        self.events = open(events_path, "a", encoding="utf-8")  # noqa: SIM115 - open for the program's life
        self.raw = open(raw_path, "a", encoding="utf-8")  # noqa: SIM115 - every read, for failure reports
        self.state_path = state_path
        self.commands_path = commands_path
        self.commands_read = 0
        self.done = 0
        self.buf = b""
        self.last_read = time.monotonic()
        self.origin: tuple[int, int] | None = None  # the text area's screen position, as xterm reports it
        self.cell: tuple[int, int] | None = None  # (width, height) of a cell in pixels
        self.locating = 0  # "locate" commands waiting for xterm's position report
        self.value = ""
        self.selection = ""
        self.all_selected = False
        self.scroll = list(SCROLL_MIDDLE)
        self.last_press: tuple[float, int, int] | None = None  # (time, x, y) of the last single left press
        self.drag_anchor: int | None = None  # the sample column a left press on the sample line started at
        self.state: dict[str, Any] = {}
        self.dirty = True

    # -- output ----------------------------------------------------------------------
    def emit(self, event: dict[str, Any]) -> None:
        self.events.write(json.dumps(event, ensure_ascii=False) + "\n")
        self.events.flush()

    def write_state(self) -> None:
        pad = field = [0, 0, 0, 0]
        if self.origin and self.cell:
            (ox, oy), (cw, ch) = self.origin, self.cell
            # Pixel 1 of the text area's reports is screen pixel origin + 1.
            field = [ox + 1, oy + 1 + (FIELD_ROWS[0] - 1) * ch, COLS * cw, (FIELD_ROWS[1] - FIELD_ROWS[0] + 1) * ch]
            pad = [ox + 1, oy + 1 + (PAD_ROWS[0] - 1) * ch, COLS * cw, (PAD_ROWS[1] - PAD_ROWS[0] + 1) * ch]
        state = {"ready": bool(self.origin and self.cell), "pad": pad, "field": field, "value": self.value,
                 "selection": self.selection, "scroll": list(self.scroll), "done": self.done,
                 "origin": list(self.origin or (0, 0)), "cell": list(self.cell or (0, 0)),
                 "sample": {"row": SAMPLE_ROW, "text": SAMPLE}, "window": os.environ.get("WINDOWID", "")}
        if state == self.state:
            return
        self.state = state
        tmp = self.state_path + ".tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(state, f, ensure_ascii=False)
        os.replace(tmp, self.state_path)

    def out(self, text: str) -> None:
        os.write(sys.stdout.fileno(), text.encode("utf-8"))

    def draw(self) -> None:
        """Redraw the screen: cosmetic (the reports are the files), but a screenshot should make sense."""
        lines = [f"\x1b[{TITLE_ROW};1H\x1b[2K\x1b[7m cud xterm probe \x1b[0m  scroll {self.scroll}",
                 f"\x1b[{GLYPHS_ROW};1H\x1b[2K  {GLYPHS}", f"\x1b[{SAMPLE_ROW};1H\x1b[2K{SAMPLE}"]
        field_lines = (self.value.replace("\t", " ").split("\n") or [""])[-(FIELD_ROWS[1] - FIELD_ROWS[0] + 1):]
        for i, row in enumerate(range(FIELD_ROWS[0], FIELD_ROWS[1] + 1)):
            text = field_lines[i] if i < len(field_lines) else ""
            lines.append(f"\x1b[{row};1H\x1b[2K\x1b[4m{text[:COLS // 2]}\x1b[0m")
        lines.append(f"\x1b[{PAD_ROWS[0] - 1};1H\x1b[2Kselection: {self.selection[:60]}")
        self.out("".join(lines))

    # -- commands (from the test's side) -----------------------------------------------
    def poll_commands(self) -> None:
        try:
            with open(self.commands_path, encoding="utf-8") as f:
                lines = f.read().split("\n")
        except FileNotFoundError:
            return
        for name in lines[self.commands_read:-1]:  # the last piece may be an unfinished line
            self.commands_read += 1
            if name == "clear":
                self.value, self.selection, self.all_selected = "", "", False
            elif name == "reset_scroll":
                self.scroll = list(SCROLL_MIDDLE)
            elif name == "locate":
                # Done once xterm's answer has come back (through the same stream as all input).
                self.locating += 1
                self.out(QUERY_GEOMETRY)
                continue
            self.done += 1
            self.dirty = True

    # -- input -------------------------------------------------------------------------
    def key(self, name: str, mods: list[str] | None = None) -> None:
        mods = sorted(set(mods or []))
        self.emit({"type": "key", "key": name, "mods": mods})
        text = None
        if not set(mods) & {"ctrl", "alt"}:
            if name == "Enter":
                text = "\n"
            elif name == "Tab" and not mods:
                text = "\t"
            elif len(name) == 1:
                text = name
        if text is not None:
            self.value = ("" if self.all_selected else self.value) + text
            self.unselect()
        elif name == "Backspace" and not mods:
            self.value = "" if self.all_selected else self.value[:-1]
            self.unselect()
        elif name == "a" and mods == ["ctrl"]:
            self.selection, self.all_selected = self.value, True

    def unselect(self) -> None:
        self.selection, self.all_selected = "", False

    def control(self, byte: int, mods: list[str]) -> None:
        """A C0 control character (or DEL) from the keyboard."""
        if byte == 0x0D:
            self.key("Enter", mods)
        elif byte == 0x09:
            self.key("Tab", mods)
        elif byte == 0x7F:
            self.key("Backspace", mods)
        elif byte == 0x1B:
            self.key("Escape", mods)
        elif byte == 0x00:
            self.key(" ", [*mods, "ctrl"])
        elif byte < 0x20:  # Ctrl+letter and Ctrl+[\]^_ (0x08 is Ctrl+H: Backspace sends DEL here)
            self.key(chr(byte + 0x60) if byte <= 0x1A else chr(byte + 0x40), [*mods, "ctrl"])

    def csi(self, params: str, final: str) -> None:
        if params.startswith("<") and final in "Mm":
            self.mouse(*(int(p) for p in params[1:].split(";")), pressed=final == "M")
            return
        numbers = [int(p) if p.isdigit() else 0 for p in params.split(";")] if params else []
        if final == "t" and numbers[:1] == [3] and len(numbers) == 3:
            self.origin = (numbers[1], numbers[2])
        elif final == "t" and numbers[:1] == [4] and len(numbers) == 3:
            self.cell = (numbers[2] // COLS, numbers[1] // ROWS)
            if self.locating:  # the size is asked for last: the position has come before it
                self.done += self.locating
                self.locating = 0
        elif final == "~" and numbers[:1] == [27] and len(numbers) == 3:  # modifyOtherKeys: CSI 27;m;code~
            self.coded_key(numbers[2], numbers[1])
        elif final == "u" and numbers:  # formatOtherKeys 1: CSI code;m u
            self.coded_key(numbers[0], numbers[1] if len(numbers) > 1 else 1)
        elif final == "~" and numbers and numbers[0] in TILDE_KEYS:
            self.key(TILDE_KEYS[numbers[0]], modifier_names(numbers[1] if len(numbers) > 1 else 1))
        elif final == "Z":
            self.key("Tab", ["shift"])
        elif final in LETTER_KEYS:
            self.key(LETTER_KEYS[final], modifier_names(numbers[1] if len(numbers) > 1 else 1))
        else:
            self.emit({"type": "unknown", "sequence": f"CSI {params}{final}"})

    def coded_key(self, code: int, modifier: int) -> None:
        mods = modifier_names(modifier)
        name = CODE_KEYS.get(code) or chr(code)
        if name.isalpha() and len(name) == 1 and "shift" in mods:
            name = name.upper()  # the DOM names a shifted letter by what it types
        self.key(name, mods)

    def mouse(self, code: int, px: int, py: int, pressed: bool) -> None:
        assert self.origin is not None
        x, y = self.origin[0] + px, self.origin[1] + py
        mods = sorted(name for bit, name in ((4, "shift"), (8, "alt"), (16, "ctrl")) if code & bit)
        low = code & 3
        if code & 32:  # motion, with or without a button held
            self.emit({"type": "move", "x": x, "y": y})
            if not code & 0xC0 and low == 0 and self.drag_anchor is not None:
                self.extend_drag(px, py, final=False)
            return
        if code & 64:
            button = 4 + low
        elif code & 128:
            button = 8 + low
        else:
            button = 1 + low
        if button in (4, 5, 6, 7):
            if pressed:  # xterm reports no release for 4/5, and one for 6/7, which is no second notch
                dx, dy = {4: (0, -1), 5: (0, 1), 6: (-1, 0), 7: (1, 0)}[button]
                self.scroll[0] += dx
                self.scroll[1] += dy
                self.emit({"type": "wheel", "dx": dx, "dy": dy, "mods": mods})
            return
        self.emit({"type": "down" if pressed else "up", "button": button, "x": x, "y": y, "mods": mods})
        if button != 1:
            return
        if pressed:
            self.press(x, y, px, py, mods)
        elif self.drag_anchor is not None:
            self.extend_drag(px, py, final=True)

    def cell_at(self, px: int, py: int) -> tuple[int, int]:
        """(column, row), 1-based, of a reported pixel (pixel 1 is the first of cell 1)."""
        assert self.cell is not None
        return (px - 1) // self.cell[0] + 1, (py - 1) // self.cell[1] + 1

    def press(self, x: int, y: int, px: int, py: int, mods: list[str]) -> None:
        now = time.monotonic()
        last, self.last_press = self.last_press, (now, x, y)
        col, row = self.cell_at(px, py)
        self.unselect()
        self.drag_anchor = col if row == SAMPLE_ROW else None
        if last and now - last[0] <= DOUBLE_CLICK_TIME and max(abs(x - last[1]), abs(y - last[2])) <= DOUBLE_CLICK_DISTANCE:
            self.last_press = None  # a third press starts over
            self.emit({"type": "dblclick", "button": 1, "x": x, "y": y, "mods": mods})
            if row == SAMPLE_ROW:
                self.select_word(col)

    def extend_drag(self, px: int, py: int, final: bool) -> None:
        assert self.drag_anchor is not None
        col, _ = self.cell_at(px, py)
        if col != self.drag_anchor:
            lo, hi = sorted((self.drag_anchor, col))
            self.selection = SAMPLE[lo - 1:hi]
        if final:
            self.drag_anchor = None

    def select_word(self, col: int) -> None:
        i = col - 1
        if not 0 <= i < len(SAMPLE) or SAMPLE[i] == " ":
            return
        lo = SAMPLE.rfind(" ", 0, i) + 1
        hi = SAMPLE.find(" ", i)
        self.selection = SAMPLE[lo:hi if hi >= 0 else len(SAMPLE)]

    def parse(self, flush: bool) -> None:
        """Consume every complete token of ``self.buf``; ``flush``: nothing more is coming now."""
        buf, i = self.buf, 0
        while i < len(buf):
            b = buf[i]
            if b == 0x1B:
                if i + 1 == len(buf):
                    if not flush:
                        break  # an escape sequence may still be on its way
                    self.key("Escape")
                    i += 1
                    continue
                nxt = buf[i + 1]
                if nxt == ord("["):
                    m = CSI.match(buf, i)
                    if m is None:
                        if not flush or re.fullmatch(rb"\x1b\[[\x20-\x3f]*", buf[i:]):
                            break  # unfinished
                        self.key("[", ["alt"])  # ESC [ then something no sequence has: Alt+[
                        i += 2
                        continue
                    self.csi(m.group(1).decode("ascii"), m.group(3).decode("ascii"))
                    i = m.end()
                elif nxt == ord("O"):
                    if i + 2 == len(buf) and not flush:
                        break
                    if i + 2 < len(buf) and chr(buf[i + 2]) in LETTER_KEYS:
                        self.key(LETTER_KEYS[chr(buf[i + 2])])
                        i += 3
                    else:
                        self.key("O", ["alt", "shift"])
                        i += 2
                elif nxt == 0x1B:
                    self.key("Escape")  # ESC ESC: the Escape key, then another sequence
                    i += 1
                else:
                    n = self.char_length(buf, i + 1)
                    if n is None:
                        break
                    self.typed(buf[i + 1:i + 1 + n], ["alt"])
                    i += 1 + n
            else:
                n = self.char_length(buf, i)
                if n is None:
                    break
                self.typed(buf[i:i + n], [])
                i += n
        self.buf = buf[i:]

    @staticmethod
    def char_length(buf: bytes, i: int) -> int | None:
        """Bytes of the UTF-8 character at ``i``; None while it is incomplete."""
        b = buf[i]
        n = 1 if b < 0xC0 else 2 if b < 0xE0 else 3 if b < 0xF0 else 4
        return n if i + n <= len(buf) else None

    def typed(self, data: bytes, mods: list[str]) -> None:
        if len(data) == 1 and (data[0] < 0x20 or data[0] == 0x7F):
            self.control(data[0], mods)
        else:
            self.key(data.decode("utf-8", errors="replace"), mods)

    # -- main ------------------------------------------------------------------------------
    def run(self) -> None:
        fd = sys.stdin.fileno()
        tty.setraw(fd, termios.TCSANOW)
        self.out(ENABLE + "\x1b[2J")
        self.draw()
        self.out(QUERY_GEOMETRY)
        while True:
            ready, _, _ = select.select([fd], [], [], 0.02)
            if ready:
                data = os.read(fd, 65536)
                if not data:
                    return
                self.raw.write(f"{time.monotonic():.3f} {data!r}\n")
                self.raw.flush()
                self.buf += data
                self.last_read = time.monotonic()
                self.parse(flush=False)
                self.dirty = True
            elif self.buf and time.monotonic() - self.last_read >= ESC_TIMEOUT:
                self.parse(flush=True)
            else:
                # Drawn only while no input is waiting, as curses programs do: a terminal busy
                # rendering lags behind the keyboard, and xdotool's typing of characters missing from
                # the keymap (it rebinds one spare keycode per character) is lost in a lagging client.
                if self.dirty and not os.environ.get("PROBE_NODRAW"):
                    self.draw()
                self.dirty = False
            self.poll_commands()
            self.write_state()


def main() -> None:
    log = sys.argv[1] if len(sys.argv) > 1 else os.devnull
    env = os.environ
    try:
        Probe(env["PROBE_EVENTS"], env["PROBE_STATE"], env["PROBE_COMMANDS"],
              os.path.join(os.path.dirname(env["PROBE_STATE"]), "raw.log")).run()
    except Exception:
        # The terminal dies with this program: the traceback goes where the test looks (xterm's log).
        with open(log, "a", encoding="utf-8") as f:
            f.write(traceback.format_exc())
        raise


if __name__ == "__main__":
    main()
