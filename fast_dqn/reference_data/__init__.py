"""Published learning curves, one folder per source, read by fast_dqn.tools.reference."""
