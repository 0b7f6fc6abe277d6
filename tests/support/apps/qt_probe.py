"""A Qt 5 window that reports what Qt itself saw, through the files of ``reporting.py``.

Run by ``qt.py`` with the system's Python (PyQt5) on the xcb platform. The pad is
a large widget with mouse tracking inside a QScrollArea, so clicks, motion and the
wheel land on one widget and the wheel then scrolls the area as Qt does; the field
is a QPlainTextEdit; below it a read-only QPlainTextEdit holds the text the drag
test selects in, and below that a drag source and a drop target: a QListWidget with
one item filling it (the item view decides when a press and motion is a drag, by
``startDragDistance``; XDND, as between programs) and a widget that accepts drops
and reports where Qt says they landed.
"""

from __future__ import annotations

import os
import sys
from typing import Any

# Screen pixels are Qt pixels: no high-DPI scaling of the reported coordinates.
os.environ.update({"QT_AUTO_SCREEN_SCALE_FACTOR": "0", "QT_SCALE_FACTOR": "1", "QT_ENABLE_HIGHDPI_SCALING": "0"})

from PyQt5.QtCore import QEvent, QObject, QPoint, QSize, Qt, QTimer
from PyQt5.QtGui import QDragEnterEvent, QDropEvent, QFont, QKeyEvent, QMouseEvent, QTextCursor, QWheelEvent
from PyQt5.QtWidgets import (
    QAbstractItemView,
    QApplication,
    QHBoxLayout,
    QLabel,
    QListWidget,
    QListWidgetItem,
    QPlainTextEdit,
    QScrollArea,
    QVBoxLayout,
    QWidget,
)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from probe_common import LatestSelection, Probe, dom_key, mods

PAD_SIZE = (480, 300)
CONTENT_SIZE = (1600, 1200)  # larger than the pad both ways, so it scrolls all four ways from the middle
DRAG_TEXT = "alpha bravo charlie delta"
DRAG_WORD = "bravo"
#: Qt's buttons in X's numbering.
BUTTONS = {Qt.LeftButton: 1, Qt.MiddleButton: 2, Qt.RightButton: 3, Qt.BackButton: 8, Qt.ForwardButton: 9}

probe = Probe()


def event_mods(modifiers: Qt.KeyboardModifiers) -> list[str]:
    return mods(shift=bool(modifiers & Qt.ShiftModifier), ctrl=bool(modifiers & Qt.ControlModifier),
                alt=bool(modifiers & Qt.AltModifier), super_=bool(modifiers & Qt.MetaModifier))


def sign(v: int) -> int:
    return (v > 0) - (v < 0)


class Pad(QWidget):
    """Reports every button, motion and wheel event; the wheel goes on to the scroll area."""

    def __init__(self) -> None:
        super().__init__()
        self.setMouseTracking(True)  # motion without a button held: the tests' fence
        self.setFixedSize(*CONTENT_SIZE)

    def _button(self, kind: str, event: QMouseEvent) -> None:
        probe.emit({"type": kind, "button": BUTTONS.get(event.button(), 0), "x": event.globalPos().x(),
                    "y": event.globalPos().y(), "mods": event_mods(event.modifiers())})

    def mousePressEvent(self, event: QMouseEvent) -> None:
        self._button("down", event)

    def mouseDoubleClickEvent(self, event: QMouseEvent) -> None:
        # Qt delivers a double click's second press to widgets as this event instead of a press.
        self._button("down", event)
        self._button("dblclick", event)

    def mouseReleaseEvent(self, event: QMouseEvent) -> None:
        self._button("up", event)

    def mouseMoveEvent(self, event: QMouseEvent) -> None:
        probe.emit({"type": "move", "x": event.globalPos().x(), "y": event.globalPos().y()})

    def wheelEvent(self, event: QWheelEvent) -> None:
        delta = event.angleDelta()  # Qt's angle is positive away from the user: up and left
        probe.emit({"type": "wheel", "dx": -sign(delta.x()), "dy": -sign(delta.y()),
                    "mods": event_mods(event.modifiers())})
        event.ignore()  # on to the scroll area, which scrolls


class DropTarget(QLabel):
    """Accepts whatever is dragged onto it and reports where it was dropped."""

    def __init__(self) -> None:
        super().__init__("drop here")
        self.setAcceptDrops(True)
        self.setAlignment(Qt.AlignCenter)
        self.setFixedSize(240, 90)

    def dragEnterEvent(self, event: QDragEnterEvent) -> None:
        event.acceptProposedAction()

    def dropEvent(self, event: QDropEvent) -> None:
        where = self.mapToGlobal(event.pos())
        probe.emit({"type": "drop", "x": where.x(), "y": where.y(), "data": list(event.mimeData().formats())})
        event.acceptProposedAction()


class KeyReporter(QObject):
    """Sees every key press on the window before the focused widget gets it."""

    def eventFilter(self, _obj: QObject, event: QEvent) -> bool:
        if event.type() == QEvent.KeyPress:
            assert isinstance(event, QKeyEvent)
            # On xcb nativeVirtualKey() is the X keysym.
            probe.emit({"type": "key", "key": dom_key(event.nativeVirtualKey(), event.text()),
                        "mods": event_mods(event.modifiers()), "keysym": event.nativeVirtualKey(),
                        "keycode": event.nativeScanCode()})  # the last two for the logs
        return False


app = QApplication(sys.argv)
window = QWidget()
window.setWindowTitle("cud qt probe")
layout = QVBoxLayout(window)

scroll = QScrollArea()
scroll.setFixedSize(*PAD_SIZE)
scroll.setWidget(Pad())
layout.addWidget(scroll)

field = QPlainTextEdit()
field.setFixedSize(PAD_SIZE[0], 100)
layout.addWidget(field)

drag_view = QPlainTextEdit(DRAG_TEXT)
drag_view.setReadOnly(True)
drag_view.setFont(QFont("Monospace", 16))  # wide letters: room to aim inside one
drag_view.setFixedSize(PAD_SIZE[0], 50)
layout.addWidget(drag_view)

dnd_row = QHBoxLayout()
dnd_source = QListWidget()
dnd_source.setFixedSize(140, 90)
dnd_source.setDragEnabled(True)
dnd_source.setDragDropMode(QAbstractItemView.DragOnly)
dnd_source.setVerticalScrollBarPolicy(Qt.ScrollBarAlwaysOff)
dnd_source.setHorizontalScrollBarPolicy(Qt.ScrollBarAlwaysOff)
dnd_item = QListWidgetItem("drag me")
dnd_item.setSizeHint(QSize(100, 80))
dnd_source.addItem(dnd_item)
dnd_target = DropTarget()
dnd_row.addWidget(dnd_source)
dnd_row.addSpacing(40)
dnd_row.addWidget(dnd_target)
dnd_row.addStretch()
layout.addLayout(dnd_row)


def root_rect(widget: QWidget) -> list[int]:
    origin = widget.mapToGlobal(QPoint(0, 0))  # includes where openbox put the window
    return [origin.x(), origin.y(), widget.width(), widget.height()]


def dnd_source_rect() -> list[int]:
    """The draggable item's rectangle on the screen (a press outside it drags nothing)."""
    rect = dnd_source.visualItemRect(dnd_item).intersected(dnd_source.viewport().rect())
    origin = dnd_source.viewport().mapToGlobal(rect.topLeft())
    return [origin.x(), origin.y(), rect.width(), rect.height()]


def drag_points() -> list[Any]:
    """From just inside the first letter of DRAG_WORD to just inside its last: selects exactly it."""
    start = DRAG_TEXT.index(DRAG_WORD)
    points = []
    # The left half of the first letter puts the cursor before it; the right half of the last, after it.
    for position, inset in ((start, 2), (start + len(DRAG_WORD), -2)):
        cursor = QTextCursor(drag_view.document())
        cursor.setPosition(position)
        rect = drag_view.cursorRect(cursor)  # viewport coordinates, at the boundary before ``position``
        where = drag_view.viewport().mapToGlobal(QPoint(rect.x() + inset, rect.center().y()))
        points.append([where.x(), where.y()])
    return [*points, DRAG_WORD]


def selected(view: QPlainTextEdit) -> str:
    return view.textCursor().selectedText().replace("\u2029", "\n")  # Qt's paragraph separator


latest_selection = LatestSelection()


def state() -> dict[str, Any]:
    return {"pad": root_rect(scroll.viewport()), "field": root_rect(field), "drag": drag_points(),
            "dnd": [dnd_source_rect(), root_rect(dnd_target)],
            "value": field.toPlainText(),
            "selection": latest_selection(field=selected(field), drag=selected(drag_view)),
            "selections": {"field": selected(field), "drag": selected(drag_view)},  # for the logs
            "scroll": [scroll.horizontalScrollBar().value(), scroll.verticalScrollBar().value()]}


def focused() -> bool:
    return window.isVisible() and window.isActiveWindow()


def run(command: str) -> None:
    if command == "clear":
        field.clear()
    elif command == "reset_scroll":
        for bar in (scroll.horizontalScrollBar(), scroll.verticalScrollBar()):
            bar.setValue((bar.minimum() + bar.maximum()) // 2)
    else:
        print(f"qt probe: unknown command {command!r}", file=sys.stderr)


window.show()
key_reporter = KeyReporter()  # kept referenced here: installing a filter does not keep it alive
window.windowHandle().installEventFilter(key_reporter)
field.setFocus()
window.activateWindow()
timer = QTimer()
timer.timeout.connect(lambda: probe.tick(state, focused, run))
timer.start(20)
sys.exit(app.exec_())
