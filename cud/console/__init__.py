"""``cuctl console``: a page on 127.0.0.1 for watching seats, following tasks and answering approvals.

The console is one more client of the daemon's socket, with the rights of the
user who started it and none of its own: every read and every action on the
page is a socket request (:mod:`cud.console.link`), so the daemon's
``[access]`` decides, and its refusals are shown on the page. The HTTP side
(:mod:`cud.console.server`, :mod:`cud.console.api`) guards against other
pages and local processes (:mod:`cud.console.security`); the page itself is
the static files in ``static/``, which load nothing from anywhere else.
"""

__all__ = ()
