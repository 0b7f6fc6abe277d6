"""``make bench``: cud against the tools the anchors use, measured in one run."""
