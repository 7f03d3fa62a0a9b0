"""Experiments: named run variants and comparisons of them on one trace."""
