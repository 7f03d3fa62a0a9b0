"""The consoles the simulator commands print tables on: never folded or cut when piped or redirected."""

from __future__ import annotations

from rich.console import Console

# Rich shrinks a table's cells (and cuts names with an ellipsis) to fit the console's width; a pipe or file
# has no width of its own, so it gets one no table reaches and every cell prints whole.
PIPE_WIDTH = 2000


def table_console(stderr: bool = False) -> Console:
    console = Console(stderr=stderr)
    if not console.is_terminal:
        console.width = PIPE_WIDTH
    return console
