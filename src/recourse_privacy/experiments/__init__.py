"""Experiments: the recourse-based membership-inference audit (one game, end to end)."""
