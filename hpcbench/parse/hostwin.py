"""Which lines of a span do not start with a known host: the fast path's host test, done in numpy.
The known hosts' regex is built here too (``trie``).

A line starts with a known host when its first ``width`` bytes (its window) match ``host:[0-9]`` for a
host already read; nothing after those bytes changes that. Consecutive lines share their window far more
often than not (a rank prints its lines with one prefix), so numpy compares each line's window with the
one before it, and the regex runs only where the window changes, on windows not matched before. On a 1 GB
log of 7.3 M lines this is about 0.3 s of CPU where a regex lookahead at every line start costs 0.6 s.
numpy comes with pandas; without it, the caller's regex does the same work. Where the C scanner (_scan.c)
was built, it finds the runs in its pass over the span, skips those whose window was matched before, and
``unknown_from_runs`` judges the rest.
"""

from __future__ import annotations

import re
from types import ModuleType
from typing import Literal

GOOD_MAX = 100_000  # windows remembered; past this the set starts again
_np: ModuleType | Literal[False] | None = None  # False: numpy is not installed


def _numpy() -> ModuleType | None:
    """numpy, imported on first use (0.1 s: only files big enough for the fast path pay it)."""
    global _np
    if _np is None:
        try:
            import numpy
        except ImportError:
            _np = False
        else:
            _np = numpy
    return _np or None


def unknown_starts(buf: bytes, first: int, last: int, window: re.Pattern[bytes], width: int,
                   good: set[bytes]) -> list[int] | None:
    """Starts, in order, of the lines after a newline of ``buf[first:last]`` that ``window`` (a known host,
    ':' and a digit) does not match at their start, as ``window.match(buf, start, last)`` would not; None
    without numpy. ``good``: windows matched before, which it adds to."""
    np = _numpy()
    if np is None or width < 1:
        return None
    starts = np.flatnonzero(np.frombuffer(buf, np.uint8, last - first, first) == 10)
    starts += first + 1
    n = len(buf) - width + 1  # windows that fit in the buffer; the last lines' may not
    cut = int(np.searchsorted(starts, n)) if n > 0 else 0
    out = []
    if cut:
        wins = np.ndarray(buffer=buf, dtype=f"V{width}", shape=(n,), strides=(1,))[starts[:cut]]
        heads = np.flatnonzero(wins[1:] != wins[:-1]) + 1
        heads = np.concatenate(([0], heads, [cut])).tolist()
        for k in _unmatched(wins[heads[:-1]].tolist(), window, good):
            out += starts[heads[k]:heads[k + 1]].tolist()  # a run of lines with this window: none is plain
    out += [s for s in starts[cut:].tolist() if not window.match(buf, s, last)]
    return out


def unknown_from_runs(buf: bytes, last: int, runs: list[tuple[int, int]], tail: list[int],
                      window: re.Pattern[bytes], width: int, good: set[bytes]) -> list[int]:
    """``unknown_starts`` from the C scanner's runs (start, end) of lines that share a window not in
    ``good``, and tail (starts of the lines too near the buffer's end to have a window)."""
    out = []
    for k in _unmatched([buf[s:s + width] for s, _ in runs], window, good):
        s, end = runs[k]
        while s < end:  # each line of the run
            out.append(s)
            s = buf.find(b"\n", s, min(end, last)) + 1
            if s == 0:
                break
    out += [s for s in tail if not window.match(buf, s, last)]
    return out


def _unmatched(wins: list[bytes], window: re.Pattern[bytes], good: set[bytes]) -> list[int]:
    """Indexes of the windows that ``window`` does not match; ``good`` keeps those it matched."""
    bad = []
    for k, win in enumerate(wins):
        if win in good:
            continue
        if window.match(win):
            if len(good) >= GOOD_MAX:
                good.clear()
            good.add(win)
            continue
        bad.append(k)
    return bad


def trie(words: set[bytes]) -> bytes:
    """A regex for exactly ``words``, as a trie whose branches that end alike are one character class
    ("gpu-node-0[0-9][0-9]"): the engine tries alternatives one by one, so a flat alternation of 1024 host
    names costs 1024 tries per line, this about one per character."""
    root: dict = {}
    for w in words:
        node = root
        for c in w:
            node = node.setdefault(c, {})
        node[None] = {}

    def emit(node: dict) -> bytes:
        tails: dict[bytes, list[int]] = {}
        for c, sub in node.items():
            if c is not None:
                tails.setdefault(emit(sub), []).append(c)
        alts = [(re.escape(bytes(cs)) if len(cs) == 1 else b"[" + b"".join(re.escape(bytes([c])) for c in sorted(cs)) + b"]")
                + tail for tail, cs in sorted(tails.items())]
        if None in node:
            alts.append(b"")  # last: a longer name is tried first
        return alts[0] if len(alts) == 1 else b"(?:" + b"|".join(alts) + b")"

    return emit(root)
