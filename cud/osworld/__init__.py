"""OSWorld on cud: its task files converted to specs, and its metrics' verdicts.

``catalog`` names the metrics a spec's ``metric`` check may use (light: no import of the
metrics' libraries); ``metrics`` holds them and ``judge`` runs one in a process of its own,
so a document the model produced is never parsed inside the daemon. The metrics need the
``cud[osworld]`` extra; the rest of cud never imports them.
"""
