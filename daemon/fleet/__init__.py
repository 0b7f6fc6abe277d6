"""``cud fleet join|leave``: this machine's daemon as a node of a Ray fleet (docs/fleet-reference.md)."""
