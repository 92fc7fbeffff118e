"""Experiments: sweeps over tasks, models and budgets, their tables, summaries and plots."""
