"""How a buffer of whole lines is cut for the fast path: spans of whole lines of at most ``chunk`` bytes (passes
over them stay in the CPU cache), and apart from them each line longer than ``max_line``, which is read cut to
its first ``max_line`` bytes wherever it lies: read in chunks, mapped, or by a worker process (scan.py,
parallel.py). Such a line holds one of the offsets lo + k * max_line (k >= 1): only the lines there are
measured."""

from __future__ import annotations

from collections.abc import Iterator


def lines_end(buf: bytes, size: int) -> int:
    """Where the lines of ``buf[:size]`` end, for spans(): before its last byte where that is a newline."""
    return size - 1 if buf[size - 1:size] == b"\n" else size


def spans(buf: bytes, lo: int, hi: int, chunk: int, max_line: int) -> Iterator[tuple[int, int, bool]]:
    """(start, end, long) of each span of the lines of ``buf[lo:hi]`` (``hi``: a newline, or the end of the
    bytes), in order; long: one line longer than ``max_line``. An empty ``buf[lo:hi]`` is one empty line."""
    pos = lo
    while True:
        end = min(pos + chunk, hi)
        cut = hi if end == hi else buf.rfind(b"\n", pos, end)
        if cut < pos:  # no line ends within a chunk
            cut = nl if (nl := buf.find(b"\n", pos, hi)) >= 0 else hi
        for x in range(pos + max_line, cut, max_line):
            a = buf.rfind(b"\n", pos, x) + 1 or pos
            b = nl if (nl := buf.find(b"\n", x, cut)) >= 0 else cut
            if b - a > max_line:
                if a > pos:
                    yield pos, a - 1, False
                yield a, b, True
                cut = b
                break
        else:
            yield pos, cut, False
        if cut >= hi:
            return
        pos = cut + 1
