"""How the outside reaches and watches the daemon: the Unix socket, peer rights, one handler per request family, systemd's notify."""
