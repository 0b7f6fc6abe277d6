"""cuctl: the command-line client of the cud daemon (one module per command family)."""
