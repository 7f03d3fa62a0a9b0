"""File-system helpers every layer may use (the bottom of the stack): atomic replacement of a file."""

from gpuslice.fsutil.atomic import atomic_write_bytes, atomic_write_text

__all__ = ["atomic_write_bytes", "atomic_write_text"]
