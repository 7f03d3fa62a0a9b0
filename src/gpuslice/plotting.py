"""The one way the project draws a figure into a file: headless matplotlib, one row of axes, saved and closed."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure


@contextmanager
def figure_file(
    path: str | Path, columns: int = 1, size: tuple[float, float] = (13, 4.8), bottom: float = 0.0
) -> Iterator[tuple[Figure, list[Axes]]]:
    """Yield a figure with `columns` axes side by side; on leaving, lay it out and write it to `path`
    (parent folders created, 110 dpi, format from the suffix). The figure is closed either way.
    `bottom` keeps that fraction of the height free below the axes (for a figure legend off the data)."""
    import matplotlib

    matplotlib.use("Agg")  # no display: figures only ever go to files
    import matplotlib.pyplot as plt

    figure, grid = plt.subplots(1, columns, figsize=size, squeeze=False)
    try:
        yield figure, list(grid[0])
        figure.tight_layout(rect=(0, bottom, 1, 1))
        target = Path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        # into a new temp file, then renamed over the target: a link planted at `path` is replaced, not
        # written through (fsutil.atomic's rule; this bottom-layer module does not import fsutil)
        descriptor, temp_name = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
        try:
            with os.fdopen(descriptor, "wb") as handle:
                figure.savefig(handle, dpi=110, format=target.suffix.lstrip(".").lower() or "png")
            os.chmod(temp_name, 0o644)
            os.replace(temp_name, target)
        except BaseException:
            Path(temp_name).unlink(missing_ok=True)
            raise
    finally:
        plt.close(figure)
