"""Allocation: Allocate and GetPreferredAllocation as pure functions with typed errors."""
