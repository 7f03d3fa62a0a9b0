"""Presenting results: tables, JSON, plots."""
