"""A Qt 5 dialog: buttons "Delete account", "Cancel" and a line edit "Search", reporting through probe_common.

Run with the system's Python (PyQt5), QT_LINUX_ACCESSIBILITY_ALWAYS_ON=1 in its
environment. Events and the ``relabel`` command as in ``gtk_form.py``.
"""

from __future__ import annotations

import os
import sys
from typing import Any

os.environ.update({"QT_AUTO_SCREEN_SCALE_FACTOR": "0", "QT_SCALE_FACTOR": "1", "QT_ENABLE_HIGHDPI_SCALING": "0"})

from PyQt5.QtCore import QPoint, QTimer
from PyQt5.QtGui import QMouseEvent
from PyQt5.QtWidgets import QApplication, QLineEdit, QPushButton, QVBoxLayout, QWidget

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "apps"))
from probe_common import Probe

probe = Probe()
app = QApplication(sys.argv[:1])
window = QWidget()
window.setWindowTitle("Account settings")
layout = QVBoxLayout(window)
buttons = [QPushButton("Delete account"), QPushButton("Cancel")]
for button in buttons:
    button.setFixedSize(240, 48)
    button.clicked.connect(lambda _checked=False, b=button: probe.emit({"type": "clicked", "widget": b.text()}))
    layout.addWidget(button)
entry = QLineEdit()
entry.setAccessibleName("Search")
entry.setFixedSize(240, 36)
entry.textChanged.connect(lambda text: probe.emit({"type": "text", "widget": "Search", "value": text}))
layout.addWidget(entry)


class Pad(QWidget):
    """The tests' fence (App.fence): motion reported from a plain area below the controls."""

    def __init__(self) -> None:
        super().__init__()
        self.setMouseTracking(True)
        self.setFixedSize(240, 40)

    def mouseMoveEvent(self, event: QMouseEvent) -> None:
        probe.emit({"type": "move", "x": event.globalPos().x(), "y": event.globalPos().y()})


pad = Pad()
layout.addWidget(pad)


def rect(widget: QWidget) -> list[int]:
    origin = widget.mapToGlobal(QPoint(0, 0))
    return [origin.x(), origin.y(), widget.width(), widget.height()]


def state() -> dict[str, Any]:
    return {"pad": rect(pad), "field": rect(entry), "buttons": {b.text(): rect(b) for b in buttons},
            "value": entry.text(), "pid": os.getpid()}


def run(command: str) -> None:
    if command == "relabel":
        buttons[0].setText("Send money")


timer = QTimer()
timer.timeout.connect(lambda: probe.tick(state, lambda: window.isVisible() and window.isActiveWindow(), run))
timer.start(20)
window.show()
window.activateWindow()
buttons[1].setFocus()
sys.exit(app.exec_())
