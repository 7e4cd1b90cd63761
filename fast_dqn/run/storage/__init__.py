"""What a run keeps on disk: its directory, checkpoints and their files, the best weights."""
