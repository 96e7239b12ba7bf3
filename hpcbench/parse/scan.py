"""Streaming scan of one log file: binary chunks, constant memory, never raises on content.

Two ways through a chunk, giving the same facts:
- the line path cleans and reads every line (wrapped lines are joined, mid-line mpirun tags split);
- the fast path (fastpath.py) is taken for big chunks that are almost only NCCL-prefixed lines
  (multi-GB INFO logs): only the first line of each fact-carrying NCCL message goes to the line path.
  For big files its byte work runs in worker processes (parallel.py); the facts are read here, in order.
  Limits: a host none of whose ranks prints an edge line or another message of its own is not seen
  (a message printed alike by many hosts is read once), and hard-wrapped lines are not joined
  (wrapped logs are rarely NCCL-dominated).
"""

from __future__ import annotations

import re
from typing import Any, BinaryIO

from hpcbench.parse import fastpath, parallel, results
from hpcbench.parse.horovod import HorovodState
from hpcbench.parse.nccl import NcclState
from hpcbench.parse.nccltests import NcclTestsState
from hpcbench.parse.prefixes import MPI_TAG, NCCL_PREFIX, clean, decode, split_mid_line_tags

CHUNK = 2 << 20  # passes over a chunk this size hit the CPU cache: ~15% faster than 8 MiB
MAX_LINE = 1 << 20  # longer lines are cut here (with a warning), so one 10 GB line costs no memory
FAST_MIN = 512 << 10  # smaller chunks always take the line path
PARALLEL_MIN = 64 << 20  # smaller files are read by one process (starting workers costs ~0.1 s)
_ROW = re.compile(r"\s*\d+\s+\d+\s")
_WRAP_MIN = 79  # a terminal is at least 80 columns wide; shorter lines were not wrapped


class Scanner:
    def __init__(self) -> None:
        self.nccl = NcclState()
        self.tests = NcclTestsState()
        self.horovod = HorovodState()
        self.records: list[dict[str, Any]] = []
        self.warnings: list[str] = []
        self.tags: dict[str, None] = {}
        self._pending: str | None = None
        self._widest = 0  # longest line so far: the terminal width when a paste was hard-wrapped
        self._seen = fastpath.Seen()  # NCCL messages already read (fast path)
        self.lines = 0
        self.cut_lines = 0
        self.bad_bytes = 0

    # ---- line path -------------------------------------------------------------------------
    def feed_raw(self, raw: bytes) -> None:
        text = decode(raw)
        if "\ufffd" in text:
            self.bad_bytes += text.count("\ufffd")
        for seg in split_mid_line_tags(text):
            if self._pending is not None and self._continues(self._pending, seg):
                self._pending += seg
                continue
            self.flush()
            self._pending = seg
            self._widest = max(self._widest, len(seg))

    def _continues(self, prev: str, cur: str) -> bool:
        """A hard-wrapped NCCL line: the previous line filled the terminal, this one starts nowhere."""
        # A terminal wraps at its width, so a wrapped line is the widest seen so far.
        if len(prev) < max(_WRAP_MIN, self._widest) or "NCCL " not in prev or not cur.strip() or _ROW.match(cur):
            return False
        if "/sec" in cur or "NCCL version" in cur or results.MARK in cur:
            return False
        if cur.lstrip().startswith(("#", "[", "NCCL")) or NCCL_PREFIX.match(cur):
            return False
        ln = clean(cur)
        return not (ln.host or ln.level or ln.tag or ln.rank is not None or ln.text != cur.lstrip(" \t"))

    def flush(self) -> None:
        if self._pending is not None:
            text, self._pending = self._pending, None
            self._process(text)

    def _process(self, text: str) -> None:
        ln = clean(text)
        if ln.tag:
            self.tags[ln.tag] = None
        self.nccl.feed(ln)
        if ln.level is None:
            self.tests.feed(ln.text)
            self.horovod.feed(ln.text)
        if results.MARK in text:
            rec = results.from_line(ln.text, self.warnings)
            if rec is not None:
                self.records.append(rec)

    # ---- chunks ----------------------------------------------------------------------------
    def feed_chunk(self, chunk: bytes) -> None:
        """``chunk`` holds whole lines (each ending with a newline, except perhaps the last)."""
        self.feed_span(chunk, 0, len(chunk))

    def feed_span(self, buf: bytes, lo: int, hi: int) -> None:
        """The lines of ``buf[lo:hi]``; bounds instead of a slice spare a copy of a whole chunk."""
        parts = fastpath.read_span(buf, lo, hi, self._seen, FAST_MIN)
        if parts is None:
            self._line_path(buf[lo:hi])
        else:
            self._read_parts(parts)

    def _read_parts(self, parts: fastpath.Parts, mine: fastpath.Seen | None = None) -> None:
        for kind, x in parts:
            if isinstance(x, fastpath.Found):
                self.flush()
                self.apply(x, mine)
            elif kind == "lines":
                self.flush()
                self._line_path(x)
                self.flush()
            else:
                self._line_path(x)

    def _line_path(self, block: bytes) -> None:
        for raw in block.split(b"\n"):
            self.lines += 1
            self.feed_raw(raw)

    def apply(self, found: fastpath.Found, mine: fastpath.Seen | None = None) -> None:
        """Read what the fast path found. ``mine``: this scanner's own record of messages read, when a
        worker process extracted ``found`` against its own (it has not seen the other workers' chunks)."""
        self.lines += 1  # counting them would cost a scan; only "is the file empty" is asked
        if found.nranks is not None:
            self.nccl.nranks = max(self.nccl.nranks or 0, found.nranks)
            self.nccl.seen = True
        fresh = found.fresh
        if mine is not None:
            fresh = [(line, msg) for line, msg in fresh if msg not in mine.msgs]
            mine.msgs.update(msg for _, msg in fresh)
            if len(mine.msgs) > fastpath.SEEN_MAX:
                mine.msgs.clear()
        firsts = {msg for _, msg in fresh}
        for msg, n in found.warn_counts.items():
            if msg not in firsts:
                self.nccl.count_warn(decode(msg[10:]), n)
        for line, msg in fresh:
            self._process(decode(line))
            n = found.warn_counts.get(msg, 0)
            if n > 1:
                self.nccl.count_warn(decode(msg[10:]), n - 1)
        for line in found.extra:
            self._process(decode(line))

    def feed_stream(self, f: BinaryIO) -> None:
        carry = b""
        skipping = False  # inside a line longer than MAX_LINE, after its first MAX_LINE bytes
        while True:
            data = f.read(CHUNK)
            if not data:
                break
            if skipping:
                nl = data.find(b"\n")
                if nl < 0:
                    continue
                data, skipping = data[nl + 1:], False
            cut = data.rfind(b"\n")
            if cut < 0:
                buf = carry + data
                if len(buf) > MAX_LINE:
                    self.cut_lines += 1
                    self.feed_chunk(buf[:MAX_LINE])
                    carry, skipping = b"", True
                else:
                    carry = buf
                continue
            lo = 0
            if carry:  # the line cut by the last read, alone: the rest of this read is not copied
                lo = data.find(b"\n") + 1
                self.feed_chunk(carry + data[:lo - 1])
            if lo <= cut:
                self.feed_span(data, lo, cut)
            carry = data[cut + 1:]
            if len(carry) > MAX_LINE:
                self.cut_lines += 1
                self.feed_chunk(carry[:MAX_LINE])
                carry, skipping = b"", True
        if carry:
            self.feed_chunk(carry)
        self.flush()

    def feed_file(self, f: BinaryIO, path: str, size: int) -> None:
        """``feed_stream``, with the fast path's byte work spread over worker processes for big files."""
        jobs = parallel.jobs()
        # a worker's span is several chunks: fewer tasks to hand out and results to send back
        bounds = parallel.line_bounds(f, size, 4 * CHUNK, MAX_LINE) if jobs > 1 and size >= PARALLEL_MIN else None
        pool = parallel.start(path, jobs) if bounds else None
        if bounds is None or pool is None:  # small, one CPU, a line too long to cut at, or no fork
            f.seek(0)
            self.feed_stream(f)
            return
        mine = fastpath.Seen()
        for (a, b), parts in parallel.extracted(pool, bounds, CHUNK, FAST_MIN):
            if parts is None:  # not NCCL-dominated: the line path, here
                f.seek(a)
                data = f.read(b - a)
                self._line_path(data[:-1] if data.endswith(b"\n") else data)
                continue
            self._read_parts(parts, mine)
        self.flush()

    def launcher_prefix(self) -> str | None:
        tags = list(self.tags)
        if not tags:
            return None
        if len(tags) == 1:
            return tags[0]
        general = {MPI_TAG.sub(lambda m: f"[{m.group(1)},N]<stdout>:" if m.group(2) else "[N]<stdout>:", t)
                   for t in tags}
        return general.pop() if len(general) == 1 else "mixed"
