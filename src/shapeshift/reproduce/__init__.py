"""Reproductions of published experiments (the Rubick paper's cluster experiment and sweeps)."""
