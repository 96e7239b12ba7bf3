"""The fast path's byte work on one span of an NCCL-dominated chunk: a pure function of the bytes, of the messages
already read and of the hosts and launcher tags already known, so it runs in the scanning process or in a worker
process alike.

It gives the line path the same facts by handing it every line that could add one:
- every line that is not a plain NCCL line of a known host (known.py: an unknown host or tag, a malformed or
  pre-2.3 prefix, a second prefix glued on, a table row, Horovod's /sec lines, records, prose), and every line
  with no "NCCL " tag or more than one, whose message is not looked at;
- the first line of each INFO message that can carry a fact (nccl.FACT_STARTS) and was not read before, a line's
  message being the text from its one tag: a 1024-rank job repeats the same edge lines for every communicator.
A plain line of a known host whose message carries no fact, or was read before, adds nothing. A line that may be
the rest of the plain line before it (prefixes.continues) is handed on with that line, which the line path then
joins as it does reading every line. Spans that hold non-ASCII or control bytes (which the line path cleans) are
left to the line path.

A training's print among the NCCL lines that the line path reads alone (no tag, printable, a line of its own or
after a plain line it cannot continue: _scan.c's lone_print) is handed on alone ('print'; each run of them as one
'prints' in a span with no new edge), past the prefix passes and the join check; the scanner reads each distinct
print's text once (scan.py). The first line of a new message that is an edge, on a plain line that starts with its
host, the C scanner hands on cut ('edges': ~16,000 in a 1024-rank job's first communicator; NcclState.read_edges).

The passes over every line (each line's prefix, each message and whether it was read before) are done by the C
scanner _scan.c in one pass, where it was built (setup.py); else by regexes and Python sets, about 3x slower. Both
hand on the same lines (tests/test_logs_scan.py, test_logs_known.py), so the facts never depend on the engine
(tests/test_logs_fastpath.py compares their JSON).
"""

from __future__ import annotations

import os
import re
from bisect import bisect_left
from collections import Counter
from dataclasses import dataclass, field
from itertools import filterfalse

from hpcbench.parse.known import GOOD_MAX, Known, Windows
from hpcbench.parse.nccl import FACT_PREFIXES, FACT_STARTS, INIT_MSG, INIT_STARTS, NcclState
from hpcbench.parse.prefixes import NOT_CONTINUATIONS, WRAP_MIN, continues

C_ENV = "HPCBENCH_PARSE_C"  # 0: the pure-Python passes even where the C scanner is built (to compare)
try:
    import hpcbench.parse._scan as _scan
except ImportError:  # not built: no C compiler where hpcbench was installed
    _scan = None  # type: ignore[assignment]
if _scan is not None and (getattr(_scan, "ABI", None) != 6 or os.environ.get(C_ENV) == "0"):
    _scan = None  # type: ignore[assignment]  # or an in-place build of an older _scan.c: scripts/venv.sh builds it again

SEEN_MAX = 500_000  # distinct messages remembered; past this the set starts again (memory stays bounded)
SEEN_BYTES = 64 << 20  # and their bytes, in the C scanner
OTHERS_MAX = 1 / 200  # lines handed on one by one per byte of span: past about half the lines the line path is as fast
# The messages that can carry a fact, and WARNs; "NCCL " first, so the regex engine skips to each 'N' in
# a tight loop.
MSG = re.compile(rb"NCCL (?:INFO[ \t](?:" + FACT_STARTS.encode() + rb")|WARN[ \t])[^\n]*")
# Init lines differ per communicator (comm pointer): their facts are nranks, read here, and the host of
# their rank, read from the first line for each (rank, nranks), which is handed on. Run over the new
# messages joined by newlines, so it has a literal prefix.
_INIT = re.compile(rb"\n(NCCL INFO[ \t]" + INIT_MSG.encode() + rb"[^\n]*)")
_WARN_KEY = re.compile(rb"NCCL WARN[ \t][^\n]*")
_TWO_TAGS = re.compile(rb"NCCL [^\n]*NCCL ")
_UNSAFE = (b"\x1b", b"\r", b"\x00")  # the line path strips ANSI codes, CRs and NULs (prefixes.decode)


@dataclass
class Seen:
    """Messages already handed on, by whoever runs the extraction (the scanner or one worker)."""

    msgs: set[bytes] = field(default_factory=set)
    warns: set[bytes] = field(default_factory=set)  # "WARN ..." messages: every copy is counted
    inits: set[tuple[bytes, bytes]] = field(default_factory=set)  # (rank, nranks) of init lines handed on
    # the C scanner's own set of messages (then ``msgs`` stays empty); None: the pure-Python passes
    c: _scan.Messages | None = field(default_factory=lambda: compiled_messages())


def compiled_messages() -> _scan.Messages | None:
    """The C scanner's set, made from the same message starts as the regexes; None where it is not built."""
    if _scan is None:
        return None
    return _scan.Messages([p.encode() for p in FACT_PREFIXES], [p.encode() for p in INIT_STARTS], SEEN_MAX, SEEN_BYTES,
                          [k.encode() for k in NOT_CONTINUATIONS], WRAP_MIN, [k.encode() for k in NcclState.NOT_EDGE])


# In file order: ('text', bytes) for the line path as it is; ('line', bytes, int): one line for the line path, with
# the length of the line before it when that one was not handed on (else -1); ('fresh', bytes, bare): the first
# line of a new message, a plain line (known.py) that starts with its host when bare; ('print', bytes, None): a
# line the line path reads alone, as it is (the C scanner's prints), or ('prints', [bytes], None): consecutive
# ones; ('edges', [edge], None): consecutive first lines of new messages, edges the C scanner cut (_scan.Edge);
# ('nranks', n) from new init lines; ('warns', {message: n}): n more copies of WARNs read before (last).
Parts = list[tuple]


def read_span(buf: bytes, lo: int, hi: int, seen: Seen, known: Known, fast_min: int) -> Parts | None:
    """The fast path over the whole lines of ``buf[lo:hi]``; None when the line path must read it."""
    if hi - lo < fast_min or not nccl_dominated(buf, lo, hi) or (seen.c is None and not plain(buf, lo, hi)):
        return None
    first = buf.find(b"\n", lo, hi)
    last = buf.rfind(b"\n", lo, hi)
    if first < 0 or first == last:
        return None
    # The first line goes to the line path as it is, the last always: a wrapped line may cross a span's edge.
    # A file's first span: its hosts are learned first (each one's first line is handed on), so that the C pass
    # tests the lines' windows of them, and finds the prints among them.
    heads = None if known.hosts or _scan is None else _scan.heads(buf, first, last)
    learned = [] if known.hosts else known.newcomers(buf, first, last, heads)
    c = seen.c
    if c is not None:  # one C pass: plain bytes, prefixes, the messages not read before, WARNs, windows
        known.compiled()
        width = known.width if known.window is not None else 0
        got = c.scan(buf, lo, hi, first, last, width, _c_good(known), True)
        if got is None:
            return None
        found, msgs, runs, tail, odd, prints, edges = got
        bounds = _bounds(buf, first, last, known, (width, runs, tail), odd, learned)
    else:
        prints, edges = [], []
        bounds = _bounds(buf, first, last, known, None, [], learned)
        odd = [] if bounds is None else _two_tags(buf, first, last, bounds)
        if bounds is not None and odd:
            bounds = sorted(set(bounds + odd))
    if bounds is None:
        if c is not None:
            c.rollback()  # the line path reads the span: as if the scan had not kept its messages
        return None
    others, joined = _hand_on(buf, bounds, first, last, hi, known)
    if joined and edges:  # _unjoined reads the new messages' first lines: these are of them
        found, edges = sorted(found + [_found_of(buf, s, last) for s, *_ in edges], key=lambda f: f[1]), []
    if c is None:  # the messages of the lines with one tag, as the C scanner finds them
        segments = _segments(first + 1, last, odd)
        msgs = [m for a, b in segments for m in MSG.findall(buf, a, b)]
        new, nranks, fresh = _fresh(buf, segments, msgs, seen)
    else:
        new, nranks, fresh = _fresh_found(buf, found, seen, c)
    taken = {s for s, _, _ in others}
    if joined:
        fresh = _unjoined(buf, joined, fresh, new, last, taken, seen)
    bare = known.window is not None  # the plain lines start with their host: no launcher tag or time stamp
    events = sorted([(s, "line", line, pred) for s, line, pred in others]
                    + [(s, "fresh", line, bare) for s, line in fresh if s not in taken]
                    + ([(s, "print", buf[s:e], None) for s, e in prints] if edges else []))
    warns = _warn_copies(msgs, new, seen, [line for s, _, line, _ in events if s <= last])  # a print has no tag
    parts: Parts = [("text", buf[lo:first])]
    if nranks is not None:
        parts.append(("nranks", nranks))
    if edges:  # the prints among the events, one by one: rare (the new messages of a job's first communicators)
        edges = [e for e in edges if e[0] not in taken]
        parts += _with_runs(events, [e[0] for e in edges], edges, "edges")
    else:
        parts += _with_runs(events, [s for s, _ in prints], [buf[s:e] for s, e in prints], "prints")
    if warns:
        parts.append(("warns", warns))
    return parts


def _found_of(buf: bytes, s: int, last: int) -> tuple[bytes, int, int]:
    """What the C scanner's found holds of the line at ``s`` (one NCCL tag): (its message, s, its end)."""
    e = last if (e := buf.find(b"\n", s, last)) < 0 else e
    return buf[buf.find(b"NCCL ", s, e):e], s, e


def _with_runs(events: list[tuple], starts: list[int], items: list, kind: str) -> Parts:
    """``events`` as parts, each run of ``items`` (starting at ``starts``) between them one part (kind, run, None)."""
    parts: Parts = []
    i = 0
    for s, ev, line, x in events:
        j = bisect_left(starts, s, i)
        if j > i:
            parts.append((kind, items[i:j], None))
            i = j
        parts.append((ev, line, x))
    if i < len(items):
        parts.append((kind, items[i:], None))
    return parts


def _c_good(known: Known) -> _scan.Strings:
    """``known.good`` as the C scanner's set, which it skips the runs of windows in (made on first use)."""
    if not isinstance(known.good, _scan.Strings):
        known.good = _scan.Strings(GOOD_MAX, 64 << 20)
    return known.good


def _warn_copies(msgs: list[bytes], new: set[bytes], seen: Seen, handed: list[bytes]) -> dict[bytes, int]:
    """Copies of each WARN among ``msgs`` (the span's messages, or its WARNs) no line handed on holds: all count."""
    seen.warns |= {m for m in new if m.startswith(b"NCCL WARN")}
    present = seen.warns.intersection(msgs) if seen.warns else None
    if not present:
        return {}
    counts = Counter(msgs)
    left = {k: counts[k] for k in present}
    for line in handed:  # a line with two tags has no message in ``msgs``
        if b"NCCL WARN" in line and line.count(b"NCCL ") == 1:
            for k in _WARN_KEY.findall(line):
                if k in left:
                    left[k] -= 1
    return {k[10:]: n for k, n in left.items() if n > 0}


def plain(buf: bytes, lo: int, hi: int) -> bool:
    """Whether ``buf[lo:hi]`` is ASCII with no ESC, CR or NUL byte, which the line path cleans (as _scan.c tests)."""
    if any(buf.find(c, lo, hi) >= 0 for c in _UNSAFE):
        return False
    # a span of at least half the buffer tests the whole buffer first (no copy); a worker's span is a quarter
    return buf[lo:hi].isascii() if 2 * (hi - lo) < len(buf) else buf.isascii() or buf[lo:hi].isascii()


def nccl_dominated(buf: bytes, lo: int, hi: int) -> bool:
    """Sampled, not counted: 16 windows of 4 KiB decide, at a few % of the cost of a full count."""
    if _scan is not None:
        return _scan.dominated(buf, lo, hi)
    step = max((hi - lo) // 16, 1)
    lines = nccl = 0
    for i in range(lo, hi, step):
        e = min(i + 4096, hi)
        lines += buf.count(b"\n", i, e)
        nccl += buf.count(b" NCCL ", i, e)
    return lines > 0 and nccl >= 0.75 * lines


def _bounds(buf: bytes, first: int, last: int, known: Known, windows: Windows | None,
            odd: list[tuple[int, int]], learned: list[tuple[int, int]]) -> list[tuple[int, int]] | None:
    """(start, end), in order, of every line after the first up to ``last`` that is not a plain line of a
    known host, of ``odd`` (lines with no NCCL tag or two) and of ``learned`` (the first line of each host
    learned from this span); None when they are too many for the fast path to pay. When they are too many
    because hosts are new (a late host), those hosts are learned from the first line of each, which is
    handed on, and the lines are looked for again."""
    limit = int((last - first) * OTHERS_MAX)
    found = list(learned)
    for attempt in (0, 1):
        lines = known.unknown_lines(buf, first, last, limit + 1, windows)
        more = known.newcomers_in(buf, lines)  # a host first seen here: its first line only is handed on
        if more:
            found += more
            lines = known.unknown_lines(buf, first, last, limit + 1, windows)
        lines += odd
        if len(lines) + len(found) <= limit:
            break
        if attempt:
            return None
        found += known.newcomers(buf, first, last)
    return sorted(set(lines + found))


def _two_tags(buf: bytes, first: int, last: int, bounds: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """(start, end) of the lines after the first up to ``last`` with two NCCL tags or more. The lines not in
    ``bounds`` are plain, so each has one tag at least: only when the tags outnumber them is a regex needed."""
    tags = {s: buf.count(b"NCCL ", s, e) for s, e in bounds}
    out = [(s, e) for s, e in bounds if tags[s] > 1]
    if buf.count(b"NCCL ", first + 1, last) - sum(tags.values()) > buf.count(b"\n", first, last) - len(bounds):
        for m in _TWO_TAGS.finditer(buf, first + 1, last):
            s, e = _line_around(buf, first + 1, last, m.start(), m.end())
            if s not in tags:
                out.append((s, e))
    return sorted(out)


def _segments(lo: int, hi: int, skip: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """``[lo, hi)`` less the lines ``skip`` (in order)."""
    out = []
    for s, e in skip:
        out.append((lo, s))
        lo = e
    return out + [(lo, hi)]


def _hand_on(buf: bytes, bounds: list[tuple[int, int]], first: int, last: int, hi: int, known: Known
             ) -> tuple[list[tuple[int, bytes, int]], set[int]]:
    """(start, line, length of the line before it if that one is plain and not handed on, else -1) for the
    lines ``bounds`` and for the last line (the next span's first line may continue it); and the starts of
    the plain lines handed on because the next line may be their rest (``_add``)."""
    out: list[tuple[int, bytes, int]] = []
    joined: set[int] = set()
    prev_end = first  # the first line is read by the line path: a line after it is read as usual
    for start, end in bounds:
        _add(buf, start, end, prev_end, known, out, joined)
        prev_end = end
    _add(buf, last + 1, hi, prev_end, known, out, joined)
    return out, joined


def _add(buf: bytes, start: int, end: int, prev_end: int, known: Known, out: list[tuple[int, bytes, int]],
         joined: set[int]) -> None:
    """Hand on ``buf[start:end]``. When it may be the rest of the plain line before it (a hard-wrapped line,
    prefixes.continues), that line is handed on first, so the line path joins the two as it does reading
    every line (once the whole span went to the line path then: a training print after each NCCL line
    made a 256 MB log 20x slower)."""
    line = buf[start:end]
    known.learn(line)
    pred = -1
    if start - 1 != prev_end:  # the line before was plain, and is not read as such: could this continue it?
        ps = buf.rfind(b"\n", 0, start - 1) + 1
        before = ps - 1 - (buf.rfind(b"\n", 0, ps - 1) + 1) if ps > 0 else 0
        if start - 1 - ps >= WRAP_MIN and continues(buf[ps:start - 1].decode(), line.decode(), before):
            out.append((ps, buf[ps:start - 1], -1 if ps - 1 == prev_end else before))
            joined.add(ps)
        else:
            pred = start - 1 - ps
    out.append((start, line, pred))


def _unjoined(buf: bytes, joined: set[int], fresh: list[tuple[int, bytes]], new: set[bytes], last: int,
              taken: set[int], seen: Seen) -> list[tuple[int, bytes]]:
    """``fresh`` where a new message's first line was handed on with the next line glued on (``_add``): the
    line path read it only so, and reads its next copy alone, which is handed on too; with no copy in the
    span the message is forgotten (and taken out of ``new``), so a later span hands on its next copy. An
    init line is known by its rank and nranks, which the rest of a line does not change."""
    out = list(fresh)
    for s, line in fresh:
        m = MSG.search(line) if s in joined else None
        if m is None or _INIT.match(b"\n" + m.group(0)):
            continue
        msg = m.group(0)
        at = _next_copy(buf, msg, s + len(line), last, joined)
        if at is None:
            new.discard(msg)
            seen.msgs.discard(msg)
            if seen.c is not None:
                seen.c.forget(msg)
        elif at[0] not in taken:
            out.append(at)
    return sorted(out)


def _next_copy(buf: bytes, msg: bytes, frm: int, last: int, joined: set[int]) -> tuple[int, bytes] | None:
    """(start, line) of the next line after ``frm``, up to ``last``, whose message is ``msg`` and that is not
    read with the next line glued on."""
    while (i := buf.find(msg, frm, last)) >= 0:
        end = i + len(msg)
        if buf[i - 1:i] == b" " and (end == last or buf[end:end + 1] == b"\n"):
            s = buf.rfind(b"\n", 0, i) + 1
            if s not in joined:
                return s, buf[s:end]
        frm = end
    return None


def _fresh(buf: bytes, segments: list[tuple[int, int]], msgs: list[bytes], seen: Seen
           ) -> tuple[set[bytes], int | None, list[tuple[int, bytes]]]:
    """The messages not read before; the largest nranks of init lines of a (rank, nranks) not seen before,
    whose lines are all handed on (the line path takes the first, in file order); (start, line) of the first
    line of each other new message. Init lines are not remembered: each is new. Set operations on whole
    chunks, not a loop per message: a 1024-rank job prints 200,000 init lines per GB."""
    if seen.msgs.issuperset(msgs):  # C-level, and it stops at the first new message
        return set(), None, []
    fresh = set(filterfalse(seen.msgs.__contains__, msgs))  # only the new ones go into a set
    nranks, first, _ = _new_inits(fresh, seen)
    seen.msgs |= fresh
    fresh.update(first)
    if len(seen.msgs) > SEEN_MAX:
        seen.msgs.clear()
    return fresh, nranks, _first_lines(buf, segments, fresh)


def _new_inits(fresh: set[bytes], seen: Seen) -> tuple[int | None, list[bytes], tuple[bytes, ...]]:
    """The largest nranks of the init lines among ``fresh`` of a (rank, nranks) not seen before, those
    lines, and all init lines; the init lines are taken out of ``fresh``."""
    inits = _INIT.findall(b"\n" + b"\n".join(fresh))
    if not inits:
        return None, [], ()
    lines, ranks, sizes = zip(*inits)
    fresh.difference_update(lines)
    new = set(zip(ranks, sizes)).difference(seen.inits)
    if not new:  # a (rank, nranks) seen before gave its nranks then
        return None, [], lines
    seen.inits |= new
    return max(int(n) for _, n in new), [m for m, r, n in inits if (r, n) in new], lines


def _fresh_found(buf: bytes, found: list[tuple[bytes, int, int]], seen: Seen, c: _scan.Messages
                 ) -> tuple[set[bytes], int | None, list[tuple[int, bytes]]]:
    """``_fresh`` from what the C scanner found: the messages it had not read before (which it now keeps)
    and the init-like ones ("volatile") unlike any init line it was given, each with its line's bounds."""
    if not found:
        return set(), None, []
    msgs, starts, ends = zip(*found)
    where = dict(zip(reversed(msgs), zip(reversed(starts), reversed(ends))))  # a message's first line
    fresh = set(where)
    nranks, first, inits = _new_inits(fresh, seen)
    c.add_inits(inits)  # their like, a rank's init line of another communicator, has nothing new
    fresh.update(first)  # a volatile message that is no init line is handed on each time: more, never less
    return fresh, nranks, [(s, buf[s:e]) for s, e in sorted(where[m] for m in fresh)]


def _line_around(buf: bytes, lo: int, hi: int, start: int, end: int) -> tuple[int, int]:
    s = buf.rfind(b"\n", lo, start)
    e = buf.find(b"\n", end, hi)
    return (lo if s < 0 else s + 1), (hi if e < 0 else e)


def _first_lines(buf: bytes, segments: list[tuple[int, int]], todo: set[bytes]) -> list[tuple[int, bytes]]:
    """(start, line) of the first line of ``segments`` holding each message, in file order."""
    spans = []
    wanted = set(todo)
    for lo, hi in segments:
        for m in MSG.finditer(buf, lo, hi) if wanted else ():
            if m.group(0) in wanted:
                wanted.discard(m.group(0))
                spans.append(_line_around(buf, lo, hi, m.start(), m.end()))
                if not wanted:
                    break
    return [(s, buf[s:e]) for s, e in sorted(set(spans))]
