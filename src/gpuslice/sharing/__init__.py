"""Sharing: from a node and settings to the advertised resources (whole, time-sliced, MPS, MIG)."""
