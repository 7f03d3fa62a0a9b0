"""Tests for gpuslice.health and the health event sources."""
