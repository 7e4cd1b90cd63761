"""A run as the user sees it: its Config and presets, the command line, the run directory
and its lock, checkpoints, logs and progress, and the builders that turn a Config into the
parts the loops take."""
