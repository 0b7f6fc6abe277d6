"""A task's video: the [video] table and the ffmpeg recorder the daemon owns."""
