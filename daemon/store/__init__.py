"""What the daemon keeps on disk: SQLite (schema, migrations, reads and writes), trajectory files, the full-disk reserve, the state directory's lock."""
