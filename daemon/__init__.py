"""The cud daemon: a durable task queue with approvals over a Unix socket."""
