"""Units shared by every package: one whole GPU in milli-GPU, seconds per hour, MiB per GiB."""

from __future__ import annotations

MILLI = 1000  # one whole GPU in milli-GPU: GPU shares are integers, so sums of fractions never drift
HOUR = 3600.0  # seconds
GIB = 1024  # MiB in one GiB
