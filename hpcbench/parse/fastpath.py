"""The fast path's byte work on one span of an NCCL-dominated chunk: a pure function of the bytes and
of the messages already seen, so it runs in the scanning process or in a worker process alike.

One regex pass collects the NCCL messages that can carry a fact; only the first line of a message not
seen before is handed on (a 1024-rank job repeats the same edge lines for every communicator), with
the number of copies of each WARN. Lines that are not NCCL messages are found by keyword.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from itertools import filterfalse

from hpcbench.parse import results

SEEN_MAX = 500_000  # distinct messages remembered; past this the set starts again (memory stays bounded)
# NCCL messages that can carry a fact (the rest is chatter whose only fact, the host, is in these too).
# The pattern starts with the literal "NCCL ": the regex engine then skips to each 'N' in a tight loop.
MSG = re.compile(rb"NCCL (?:WARN|version|INFO (?:Channel|Ring|Coll|Using|NET|Bootstrap|comm|ncclCommInit|rank|"
                 rb"\[Rank|Init timings|\d|NVLS|Connected|NCCL version))[^\n]*")
_WARN = re.compile(rb"NCCL WARN[^\n]*")
# Init lines differ per communicator (comm pointer, timings): nranks is the one fact the fast path
# reads from them (the rank -> host map comes from the edge lines that every rank prints). Run over
# the new messages joined by newlines, so it has a literal prefix.
_INIT = re.compile(rb"\n(NCCL INFO (?:(?:ncclComm\w* )?comm 0x[0-9a-fA-F]+ |Init timings: )"
                   rb"rank \d+ n[Rr]anks (\d+)(?![^ \n])[^\n]*)")
_SEC = re.compile(rb"/sec")  # a regex: its search outruns bytes.find on this needle
_RECORD = re.compile(re.escape(results.MARK.encode()))


@dataclass
class Seen:
    """Messages already handed on, by whoever runs the extraction (the scanner or one worker)."""

    msgs: set[bytes] = field(default_factory=set)
    warns: set[bytes] = field(default_factory=set)


@dataclass
class Found:
    """What a span holds for the line path, in the order it is to be read."""

    fresh: list[tuple[bytes, bytes]] = field(default_factory=list)  # (line, message), the first line of each
    warn_counts: dict[bytes, int] = field(default_factory=dict)  # copies of each WARN in the span
    nranks: int | None = None  # the largest nranks of new init lines (which are not handed on)
    extra: list[bytes] = field(default_factory=list)  # lines found by keyword ('/sec', records)


# In order: ('fast', Found); ('lines', bytes): nccl-tests tables, for the line path; ('text', bytes): a
# chunk that is not NCCL-dominated, for the line path (wrapped lines may continue across it).
Parts = list[tuple[str, Found | bytes]]


def read_span(buf: bytes, lo: int, hi: int, seen: Seen, fast_min: int) -> Parts | None:
    """The fast path over ``buf[lo:hi]``; None when the span is small or not NCCL-dominated."""
    if hi - lo < fast_min or not nccl_dominated(buf, lo, hi):
        return None
    return [("fast", extract(buf, a, b, seen)) if kind == "fast" else ("lines", buf[a:b])
            for kind, a, b in split_tables(buf, lo, hi)]


def nccl_dominated(buf: bytes, lo: int, hi: int) -> bool:
    """Sampled, not counted: 16 windows of 4 KiB decide, at a few % of the cost of a full count."""
    step = max((hi - lo) // 16, 1)
    lines = nccl = 0
    for i in range(lo, hi, step):
        e = min(i + 4096, hi)
        lines += buf.count(b"\n", i, e)
        nccl += buf.count(b" NCCL ", i, e)
    return lines > 0 and nccl >= 0.75 * lines


def split_tables(buf: bytes, lo: int, hi: int) -> list[tuple[str, int, int]]:
    """('fast', a, b) and ('lines', a, b) spans: nccl-tests headers, rows and trailers go through the
    line path, from a little before the first '#' (rows of a table whose header was cut off) to the end
    of the line of the last one."""
    first = buf.find(b"#", lo, hi)
    if first < 0:
        return [("fast", lo, hi)]
    a = buf.rfind(b"\n", lo, first)
    for _ in range(64):
        if a < lo:
            break
        a = buf.rfind(b"\n", lo, a)
    a = max(a + 1, lo)
    b = buf.find(b"\n", buf.rfind(b"#", lo, hi), hi)
    b = hi if b < 0 else b
    out = []
    if a > lo:
        out.append(("fast", lo, a - 1))
    out.append(("lines", a, b))
    if b + 1 < hi:
        out.append(("fast", b + 1, hi))
    return out


def extract(buf: bytes, lo: int, hi: int, seen: Seen) -> Found:
    """The lines of ``buf[lo:hi]`` the line path must read; ``seen`` is updated."""
    found = Found()
    msgs = MSG.findall(buf, lo, hi)
    again: set[bytes] = set()
    if seen.warns:
        again = seen.warns.intersection(msgs)
    if not seen.msgs.issuperset(msgs):  # C-level, and it stops at the first new message
        fresh = set(filterfalse(seen.msgs.__contains__, msgs))
        inits = _INIT.findall(b"\n" + b"\n".join(fresh))
        if inits:
            found.nranks = max(int(n) for _, n in inits)
            fresh.difference_update(m for m, _ in inits)
        seen.msgs |= fresh
        todo = []
        for msg in fresh:
            if msg[10:].startswith((b"Channel", b"Ring")) and b" via " not in msg:
                continue  # a ring listing, not a transport
            if msg.startswith(b"NCCL WARN"):
                seen.warns.add(msg)
                again.add(msg)
            todo.append(msg)
        if todo:
            found.fresh = _first_lines(buf, lo, hi, todo)
    if again:  # a second pass, only over spans with WARNs
        found.warn_counts = dict(Counter(_WARN.findall(buf, lo, hi)))
    if len(seen.msgs) > SEEN_MAX:
        seen.msgs.clear()
        seen.warns.clear()
    # Lines that are not NCCL messages: one C scan for '/sec' (Horovod, tf_cnn_benchmarks), one
    # memchr for '{' (hpcbench records); NCCL version lines are among MSG's matches.
    _keyword_lines(buf, lo, hi, _SEC, found.extra)
    if buf.find(b"{", lo, hi) >= 0:
        _keyword_lines(buf, lo, hi, _RECORD, found.extra)
    return found


def _line_around(buf: bytes, lo: int, hi: int, start: int, end: int) -> tuple[int, int]:
    s = buf.rfind(b"\n", lo, start)
    e = buf.find(b"\n", end, hi)
    return (lo if s < 0 else s + 1), (hi if e < 0 else e)


def _keyword_lines(buf: bytes, lo: int, hi: int, rx: re.Pattern[bytes], out: list[bytes]) -> None:
    m = rx.search(buf, lo, hi)
    while m is not None:
        start, end = _line_around(buf, lo, hi, m.start(), m.end())
        if MSG.search(buf, start, end) is None:  # an NCCL message is read as one
            out.append(buf[start:end])
        m = rx.search(buf, end, hi)


def _first_lines(buf: bytes, lo: int, hi: int, todo: list[bytes]) -> list[tuple[bytes, bytes]]:
    """The first line of each message, in file order."""
    spans = []
    if len(todo) <= 32:
        for msg in todo:
            p = buf.find(msg, lo, hi)
            while p >= 0 and p + len(msg) < hi and buf[p + len(msg)] != 10:
                p = buf.find(msg, p + 1, hi)  # a longer message that starts the same way
            if p >= 0:
                spans.append((*_line_around(buf, lo, hi, p, p + len(msg)), msg))
        spans.sort()
    else:
        wanted = set(todo)
        for m in MSG.finditer(buf, lo, hi):
            msg = m.group(0)
            if msg in wanted:
                wanted.discard(msg)
                spans.append((*_line_around(buf, lo, hi, m.start(), m.end()), msg))
                if not wanted:
                    break
    return [(buf[s:e], msg) for s, e, msg in spans]
