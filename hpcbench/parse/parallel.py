"""Worker processes for the fast path's byte work on big files. Each worker reads its chunks itself
(pread), so no chunk crosses a pipe; only the lines the line path must read come back, in file order.

A worker remembers the messages it handed on and the hosts and tags it has seen, not those of the other
workers: it hands on more than the scanner needs, never less, and reading a message again changes
nothing (``Scanner.read_parts``).
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Iterator
from itertools import pairwise
from typing import TYPE_CHECKING, BinaryIO

from hpcbench.parse import fastpath
from hpcbench.parse.spans import lines_end, spans

if TYPE_CHECKING:
    from multiprocessing.pool import Pool

JOBS_ENV = "HPCBENCH_PARSE_JOBS"  # worker processes for big files; 1 reads them in one process

_seen = fastpath.Seen()  # each worker's own, made afresh by _start
_known = fastpath.Known()
_fd = -1


def jobs() -> int:
    """Worker processes: HPCBENCH_PARSE_JOBS; else one where the C scanner is built (its pass is a third
    of the time, and the line path, which stays in this process, the most: 2 workers took 0.62 s for the
    benchmark's 1 GB log, one process 0.61 s, with 3x the memory); else the CPUs that are idle, at most 2 (each holds ~50 MB
    resident, and all of them together stay within the 200 MB goal). On a busy machine workers gain no
    time and cost some (each reads its first chunks' messages as new)."""
    mp = sys.modules.get("multiprocessing")  # imported when a pool is started (5 ms, which most files skip)
    if mp is not None and mp.current_process().daemon:
        return 1  # a pool's worker may not start processes of its own
    env = os.environ.get(JOBS_ENV, "")
    if env.isdigit():
        return max(int(env), 1)
    if fastpath._scan is not None:
        return 1
    try:
        n = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        n = os.cpu_count() or 1
    try:
        idle = n - os.getloadavg()[0]
    except OSError:
        idle = n
    return max(1, min(n, 2, int(idle + 0.5)))


def line_bounds(f: BinaryIO, size: int, chunk: int, max_line: int) -> list[tuple[int, int]] | None:
    """(start, end) of spans of whole lines of about ``chunk`` bytes; None when a cut finds no newline
    within ``max_line`` bytes (the one-process reader cuts such a line, and so must read it)."""
    cuts = [0]
    pos = cuts[0] + chunk
    while pos < size:
        f.seek(pos - 1)
        got = 0
        while True:
            window = f.read(min(64 << 10, max_line - got))
            nl = window.find(b"\n")
            if nl >= 0:
                break
            got += len(window)
            if not window or got >= max_line:
                return None
        cut = pos + got + nl  # just after the newline that ends the line holding byte pos - 1
        if cut >= size:
            break
        cuts.append(cut)
        pos = cut + chunk
    cuts.append(size)
    return list(pairwise(cuts))


def _start(path: str) -> None:
    global _seen, _known, _fd
    _seen, _known, _fd = fastpath.Seen(), fastpath.Known(), os.open(path, os.O_RDONLY)


def _work(span: tuple[int, int], chunk: int, fast_min: int, max_line: int) -> fastpath.Parts | None:
    """A span read in the spans spans.py cuts (a line longer than ``max_line``: its first ``max_line`` bytes as
    text, and ('cut', 1)); None where none is NCCL-dominated (or the file changed), and the scanner reads the
    span itself."""
    a, b = span
    data = os.pread(_fd, b - a, a)
    if len(data) != b - a:
        return None
    parts: fastpath.Parts = []
    fast = False
    for lo, hi, long in spans(data, 0, lines_end(data, len(data)), chunk, max_line):
        got = None if long else fastpath.read_span(data, lo, hi, _seen, _known, fast_min)
        fast = fast or got is not None
        parts += ([("text", data[lo:lo + max_line]), ("cut", 1)] if long else [("text", data[lo:hi])] if got is None
                  else got)
    return parts if fast else None


def start(path: str, n: int) -> Pool | None:
    """A pool of ``n`` workers reading ``path``; None where processes cannot be started."""
    import multiprocessing

    try:
        return multiprocessing.get_context("fork").Pool(n, initializer=_start, initargs=(path,))
    except (OSError, ValueError):
        return None


def extracted(pool: Pool, bounds: list[tuple[int, int]], chunk: int, fast_min: int, max_line: int
              ) -> Iterator[tuple[tuple[int, int], fastpath.Parts | None]]:
    """Each span with what its worker found, in file order; the pool is closed at the end."""
    with pool:
        work = functools.partial(_work, chunk=chunk, fast_min=fast_min, max_line=max_line)
        yield from zip(bounds, pool.imap(work, bounds))
