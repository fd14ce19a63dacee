"""Shared pieces of the experiments: data, models, training loop, checkpoints, report."""
