"""Progress of long work, on stderr: a live line on a terminal; otherwise one line per phase
and one every ~10 seconds, so a log shows the work moving without flooding."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from typing import TextIO

# A terminal's live line is redrawn at most this often (seconds).
REDRAW = 0.1
# Without a terminal, a line at most this often while a phase runs (seconds).
LOG_INTERVAL = 10.0


def duration(seconds: float) -> str:
    """12s, 3m 05s, 2h 10m."""
    seconds = int(round(seconds))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m {seconds % 60:02d}s"
    return f"{seconds // 3600}h {seconds % 3600 // 60:02d}m"


class ProgressReporter:
    """Phases with counts, rate and time left. `phase(name, total)` starts one (and ends the last),
    `update(done, total)` or `advance(count)` moves it, `note(text)` prints a line, `close()` ends
    it.

    The rate and the time left count from the phase's start, so the first batch (model
    loading included) is in them, and the estimate is honest from the first update."""

    def __init__(
        self,
        stream: TextIO | None = None,
        quiet: bool = False,
        unit: str = "papers",
        is_terminal: bool | None = None,
        clock: Callable[[], float] = time.monotonic,
        min_total: int = 0,
        min_seconds: float | None = None,
    ):
        self.stream = stream if stream is not None else sys.stderr
        self.quiet = quiet
        self.unit = unit
        self.terminal = self.stream.isatty() if is_terminal is None else is_terminal
        self.clock = clock
        self.name: str | None = None
        self.total: int | None = None
        self.done = 0
        self.started = 0.0
        self.last_shown = 0.0
        self.live = False  # a live line is on screen
        # Without a terminal, nothing is written until a phase counts at least `min_total` items:
        # short work stays silent in logs and scripts.
        self.min_total = min_total
        self.shown = self.terminal or min_total <= 0
        # ...or until a phase has run `min_seconds` (a first model export, a slow read): from then
        # on
        # every line is written, so a log never sits silent through long work.
        self.min_seconds = min_seconds
        self._timer: threading.Timer | None = None
        self._lock = threading.RLock()  # the timer's thread writes too
        self._phases = 0  # which phase a timer was started for

    def phase(
        self, name: str, total: int | None = None, unit: str | None = None, always: bool = False
    ) -> None:
        """Start a phase (ending the last). `always`: shown even in a log when the work is small (a
        phase that is slow whatever its size, such as UMAP's first compile)."""
        self.close()
        if always:
            self.shown = True
        self.name, self.total, self.done = name, total, 0
        self.unit = unit or self.unit
        self.started = self.last_shown = self.clock()
        self._phases += 1
        if not self.shown and total is not None and total >= self.min_total:
            self.shown = True
        if self.terminal:
            self._draw()
        else:
            self._write(self._start_line())
            if not self.shown and self.min_seconds is not None and not self.quiet:
                self._timer = threading.Timer(self.min_seconds, self._reveal, args=(self._phases,))
                self._timer.daemon = True
                self._timer.start()

    def _start_line(self) -> str:
        return f"{self.name}{f': {self.total:,} {self.unit}' if self.total else ''}..."

    def _reveal(self, phase: int) -> None:
        """The phase `phase` has run `min_seconds`: say what is being done, and show all that
        follows."""
        with self._lock:
            if self.shown or phase != self._phases or self.name is None:
                return
            self.shown = True
            self._write(self._start_line())

    def _stop_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer.join()
            self._timer = None

    def update(self, done: int, total: int | None = None) -> None:
        if total is not None:
            self.total = total
        self.done = done
        now = self.clock()
        if self.terminal and now - self.last_shown >= REDRAW:
            self.last_shown = now
            self._draw()
        elif (
            not self.terminal
            and now - self.last_shown >= LOG_INTERVAL
            and not (self.total and done >= self.total)
        ):
            self.last_shown = now
            self._write(self._status())

    def advance(self, count: int = 1) -> None:
        self.update(self.done + count)

    def note(self, message: str) -> None:
        self._clear()
        self._write(message)
        if self.name is not None and self.terminal:
            self._draw()

    def close(self) -> None:
        """End the current phase with a line saying how much was done and how long it took."""
        self._stop_timer()
        if self.name is None:
            return
        elapsed = self.clock() - self.started
        count = f"{self.done:,} {self.unit} in " if self.done else ""
        self._clear()
        self._write(
            f"{self.name}: {count}{duration(elapsed)}"
            if (self.done or elapsed >= 1)
            else f"{self.name}: done"
        )
        self.name = None

    def __enter__(self) -> ProgressReporter:
        return self

    def __exit__(self, *exc_info) -> None:
        if exc_info[0] is None:
            self.close()
        else:
            self._stop_timer()
            self._clear()
            self.name = None

    def _status(self) -> str:
        if not self.done and not self.total:
            return f"{self.name}..."  # nothing counted: what it is doing
        elapsed = self.clock() - self.started
        parts = [
            (
                f"{self.done:,}/{self.total:,} {self.unit}"
                if self.total
                else f"{self.done:,} {self.unit}"
            )
        ]
        if self.done and elapsed > 0:
            rate = self.done / elapsed
            parts.append(f"{rate:,.1f}/s")
            if self.total and self.total > self.done:
                parts.append(f"about {duration((self.total - self.done) / rate)} left")
        return f"{self.name}: " + ", ".join(parts)

    def _draw(self) -> None:
        if self.quiet or not self.shown:
            return
        self.stream.write("\r\x1b[2K" + self._status())
        self.stream.flush()
        self.live = True

    def _clear(self) -> None:
        if self.live and not self.quiet:
            self.stream.write("\r\x1b[2K")
            self.stream.flush()
        self.live = False

    def _write(self, line: str) -> None:
        with self._lock:
            if not self.quiet and self.shown:
                self.stream.write(line + "\n")
                self.stream.flush()
