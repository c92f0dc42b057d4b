"""A progress bar for long interpreter runs: on a terminal only, quiet otherwise.

`choreo run` interprets every block of the grid on the CPU, which takes
minutes for a large shape; a bar on stderr shows that it moves and how far
it is. It draws only when stderr is a terminal (never into a log or a pipe),
at most ten times a second, and erases itself at the end so that the
command's own lines stay as they are.
"""
from __future__ import annotations

import sys
import time
from typing import TextIO

WIDTH = 30
MIN_INTERVAL_S = 0.1


class Progress:
    def __init__(self, what: str, stream: TextIO | None = None, enabled: bool | None = None,
                 clock=time.monotonic) -> None:
        self.what = what
        self.stream = stream if stream is not None else sys.stderr
        isatty = getattr(self.stream, "isatty", lambda: False)
        self.enabled = isatty() if enabled is None else enabled
        self.clock = clock
        self.start = clock()
        self.last_draw = None
        self.drawn = False

    def __call__(self, done: int, total: int) -> None:
        """Reports `done` of `total` units (blocks); draws when due (and at the end)."""
        if not self.enabled or total <= 0:
            return
        now = self.clock()
        if self.last_draw is not None and now - self.last_draw < MIN_INTERVAL_S and done < total:
            return
        self.last_draw = now
        filled = WIDTH * done // total
        bar = "#" * filled + "." * (WIDTH - filled)
        self.stream.write(f"\r{self.what} [{bar}] {done}/{total} blocks {now - self.start:.1f} s")
        self.stream.flush()
        self.drawn = True

    def close(self) -> None:
        """Erases the bar (the command prints its summary line after)."""
        if self.drawn:
            self.stream.write("\r\033[K")
            self.stream.flush()
            self.drawn = False
