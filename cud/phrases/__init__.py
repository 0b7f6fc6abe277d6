"""Things said in words for people: actions, approvals, what an action touches, shortened text.

Shared by the daemon (its stuck guard, its approval gate, its hooks' messages) and the
clients (cuctl, the console, the report), so that a thing reads the same wherever it is shown.
"""
