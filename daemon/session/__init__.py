"""A seat's session: its user, home and processes; commands run there; confinement to the home; returning it to a clean state."""
