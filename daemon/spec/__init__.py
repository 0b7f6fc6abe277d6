"""A task spec in the daemon: its setup before the model, its checks after, the verdict and the collected files."""
