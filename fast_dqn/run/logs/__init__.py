"""What a run reports: CSV logs, TensorBoard scalars and the console."""
