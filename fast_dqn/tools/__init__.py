"""Tools for finished or running runs: evaluate (and video), plot, reference scores."""
