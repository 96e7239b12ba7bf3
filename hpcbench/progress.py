"""The --wait progress line: counts per state, redrawn in place on a terminal, one line per change otherwise."""

from __future__ import annotations

from typing import TextIO


class Progress:
    def __init__(self, stream: TextIO):
        self.stream = stream
        self.tty = bool(getattr(stream, "isatty", lambda: False)())
        self.last: str | None = None
        self.width = 0

    def show(self, line: str) -> None:
        if line == self.last:
            return
        self.last = line
        if self.tty:
            # Pad over the previous line, which may have been longer.
            self.stream.write("\r" + line.ljust(self.width))
            self.width = max(self.width, len(line))
        else:
            self.stream.write(line + "\n")
        self.stream.flush()

    def done(self) -> None:
        if self.tty and self.last is not None:
            self.stream.write("\n")
            self.stream.flush()
