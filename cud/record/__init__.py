"""A task's record outside the daemon: the HTML report, the export layout, and replay.

``cuctl report`` and ``cuctl export`` fetch a :class:`Record` over the socket
(the ``record`` request); :func:`render` makes the page, :func:`write_export`
and :func:`load_export` keep it as files (layout in :mod:`cud.record.export`),
and :func:`scenario_from_export` turns an export into a scripted-model scenario.
"""

from cud.record.export import load_export, write_export
from cud.record.html import render
from cud.record.reading import Record, steps
from cud.record.replay import scenario_from_export, scenario_from_record

__all__ = ["Record", "load_export", "render", "scenario_from_export", "scenario_from_record", "steps",
           "write_export"]
