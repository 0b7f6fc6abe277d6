"""[[notify]] hooks: their config, the events they get, and delivering them off the daemon's loop."""
