"""What travels to the model: the client and its retries, the history sent each step, the [request] table."""
