"""Streaming scan of one log file: binary chunks, constant memory, never raises on content.

Two ways through a chunk, giving the same facts:
- the line path cleans and reads every line (wrapped lines are joined, mid-line mpirun tags split);
- the fast path (fastpath.py) is taken for big chunks that are almost only NCCL-prefixed lines
  (multi-GB INFO logs): it hands the line path every line that could add a fact (any line that is not a
  plain INFO line of a known host, and the first line of each new fact-carrying message) and skips the
  rest. For big files its byte work runs in worker processes (parallel.py); the facts are read here, in
  order. tests/test_logs_fastpath.py checks both paths agree on every corpus file and on a generated log.
"""

from __future__ import annotations

import mmap
import os
import stat
import time
from collections.abc import Callable
from typing import Any, BinaryIO

from hpcbench.parse import fastpath, parallel, results
from hpcbench.parse.horovod import HorovodState
from hpcbench.parse.nccl import NcclState
from hpcbench.parse.nccltests import NcclTestsState
from hpcbench.parse.prefixes import MPI_TAG, Line, clean, clean_plain, continues, decode, host_name, split_mid_line_tags
from hpcbench.parse.spans import lines_end, spans

CHUNK = 2 << 20  # passes over a chunk this size hit the CPU cache: ~15% faster than 8 MiB
MAX_LINE = 1 << 20  # longer lines are cut here (with a warning), so one 10 GB line costs no memory
FAST_MIN = 512 << 10  # smaller chunks always take the line path
PARALLEL_MIN = 64 << 20  # smaller files are read by one process (starting workers costs ~0.1 s)
# Files this big are read mapped by the C scanner, in place: no copy into Python (a 256 MB log 6% faster), and
# each span's pages let go once read (RSS as reading chunks). Not a file written to in the last minute: a job may
# still write it, and a log cut shorter under the map (copytruncate) would kill the reader (SIGBUS).
MAP_MIN, MAP_QUIET_S = PARALLEL_MIN, 60.0
MAP_ENV = "HPCBENCH_PARSE_MMAP"  # 0: read every file in chunks
PRINTS_MAX, PRINT_MAX = 4096, 512  # distinct prints remembered, and the longest remembered (memory stays bounded)
# A print read before: its cleaned line, the readers it can change (each taking the line, or else its text) and
# whether it holds a record
Print = tuple[Line, tuple[tuple[Callable[[Any], None], bool], ...], bool]


class Scanner:
    def __init__(self) -> None:
        self.nccl = NcclState()
        self.tests = NcclTestsState()
        self.horovod = HorovodState()
        self.records: list[dict[str, Any]] = []
        self.summaries = results.Summaries()
        self.warnings: list[str] = []
        self.tags: dict[str, None] = {}
        # the readers of prints, each with the marks a line must hold to change it (bound methods of the readers,
        # not of the scanner: no reference cycle keeps a scanner's facts after the scan)
        self._marked: tuple[tuple[Callable[[Any], None], bool, tuple[str, ...]], ...] = (
            (self.nccl.feed, True, NcclState.MARKS), (self.tests.feed, False, NcclTestsState.MARKS),
            (self.horovod.feed, False, HorovodState.MARKS), (self.summaries.feed, False, results.Summaries.MARKS))
        self._prints: dict[str, Print] = {}
        self._pending: str | None = None
        self._before = 0  # length of the line before the pending one (hard-wrap test)
        self._seen = fastpath.Seen()  # NCCL messages already read (fast path)
        self._known = fastpath.Known()  # hosts and tags of lines already read (fast path)
        self._hosts: dict[str, str | None] = {}  # prefixes.host_name of the hosts of edges cut by the C scanner
        self.lines = 0
        self.cut_lines = 0
        self.bad_bytes = 0

    # ---- line path -------------------------------------------------------------------------
    def feed_raw(self, raw: bytes, before: int = -1) -> None:
        """One physical line. ``before``: the length of the line before it, when the fast path skipped that
        one (it cannot be continued by this line: fastpath checked)."""
        text = decode(raw)
        if "\ufffd" in text:
            self.bad_bytes += text.count("\ufffd")
        for seg in split_mid_line_tags(text):
            if before < 0 and self._pending is not None and continues(self._pending, seg, self._before):
                self._pending += seg
                continue
            if before < 0:
                before = len(self._pending) if self._pending is not None else 0
            self.flush()
            self._pending, self._before, before = seg, before, -1

    def flush(self) -> None:
        if self._pending is not None:
            text, self._pending = self._pending, None
            self._process(text)

    def _process(self, text: str) -> None:
        got = self._prints.get(text)
        if got is None:
            ln = clean(text)
            if ln.tag:
                self.tags[ln.tag] = None
            if ln.host or ln.level or ln.tag or len(text) > PRINT_MAX:
                self._read(ln, text)
                return
            got = self._print(ln, text)
        ln, readers, record = got
        for feed, whole in readers:
            feed(ln if whole else ln.text)
        if record:
            self._record(ln.text)

    def _read(self, ln: Line, text: str) -> None:
        """What every reader takes from the cleaned line ``ln`` of ``text``."""
        self.nccl.feed(ln)
        if ln.level is None:
            self.tests.feed(ln.text)
            self.horovod.feed(ln.text)
            self.summaries.feed(ln.text)
            if results.MARK in text:
                self._record(ln.text)

    def _record(self, text: str) -> None:
        rec = results.from_line(text, self.warnings)
        if rec is not None:
            self.records.append(rec)

    def _print(self, ln: Line, text: str) -> Print:
        """A line with no NCCL prefix, marker or launcher tag (a training's print), and the readers it can change
        (those whose MARKS it holds), kept for its next copies: a job prints the same lines again and again."""
        got = (ln, tuple((feed, whole) for feed, whole, marks in self._marked if any(k in ln.text for k in marks)),
               results.MARK in text)
        if len(self._prints) >= PRINTS_MAX:
            self._prints.clear()
        self._prints[text] = got
        return got

    # ---- chunks ----------------------------------------------------------------------------
    def feed_chunk(self, chunk: bytes) -> None:
        """``chunk`` holds whole lines (each ending with a newline, except perhaps the last)."""
        self.feed_span(chunk, 0, len(chunk))

    def feed_span(self, buf: bytes, lo: int, hi: int) -> None:
        """The lines of ``buf[lo:hi]``; bounds instead of a slice spare a copy of a whole chunk."""
        parts = fastpath.read_span(buf, lo, hi, self._seen, self._known, FAST_MIN)
        if parts is None:
            self._line_path(buf[lo:hi])
        else:
            self.read_parts(parts)

    def read_parts(self, parts: fastpath.Parts) -> None:
        """What the fast path hands on, in file order. A worker process's parts may repeat a message this
        scanner read from another worker's span: reading an INFO message again changes nothing."""
        for part in parts:
            kind = part[0]
            if kind == "prints":  # ASCII, no launcher tag: decode and split_mid_line_tags change nothing (the most parts)
                self.lines += len(part[1])
                if self._pending is not None:
                    self.flush()
                process = self._process
                for raw in part[1]:
                    process(raw.decode())
            elif kind == "print":  # one print among edges
                self.lines += 1
                if self._pending is not None:
                    self.flush()
                self._process(part[1].decode())
            elif kind == "fresh":  # the first line of a new message: no line before it continues, none after (fastpath checked)
                self.lines += 1
                if self._pending is not None:
                    self.flush()
                text = part[1].decode()
                # bare: plain ASCII that starts with a known host (no '<'): decode, which cleans control bytes in the
                # first four, changes nothing, nor does split_mid_line_tags with no "<std"; its prefix is cut by position
                if part[2] and text[:1] != "<" and "<std" not in text:
                    self._read(clean_plain(text), text)
                    continue
                for seg in split_mid_line_tags(decode(part[1])):
                    self._process(seg)
            elif kind == "edges":  # first lines of new messages, edges cut by the C scanner: as "fresh" parts
                self.lines += len(part[1])
                if self._pending is not None:
                    self.flush()
                self.nccl.read_edges(part[1], self._host_of)
            elif kind == "text":
                self._line_path(part[1])
            elif kind == "line":
                self.lines += 1
                self.feed_raw(part[1], part[2])
            elif kind == "cut":  # a worker's line longer than MAX_LINE, read cut (parallel.py)
                self.cut_lines += part[1]
            elif kind == "nranks":
                self.nccl.nranks = max(self.nccl.nranks or 0, part[1])
                self.nccl.seen = True
            else:  # "warns" (fastpath.Parts)
                for msg, n in part[1].items():
                    self.nccl.count_warn(decode(msg), n)

    def _host_of(self, printed: str) -> str | None:
        """prefixes.host_name of a host as an edge line printed it (few: each is worked out once)."""
        host = self._hosts.get(printed, False)
        if host is False:
            host = self._hosts[printed] = host_name(printed)
        return host  # type: ignore[return-value]

    def _line_path(self, block: bytes) -> None:
        for raw in block.split(b"\n"):
            self.lines += 1
            self.feed_raw(raw)

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
                    self._feed_line(buf)
                    carry, skipping = b"", True
                else:
                    carry = buf
                continue
            lo = 0
            if carry:  # the line cut by the last read, alone: the rest of this read is not copied
                lo = data.find(b"\n") + 1
                self._feed_line(carry + data[:lo - 1])
            if lo <= cut:
                self.feed_lines(data, lo, cut)
            carry = data[cut + 1:]
            if len(carry) > MAX_LINE:
                self._feed_line(carry)
                carry, skipping = b"", True
        if carry:
            self.feed_chunk(carry)
        self.flush()

    def feed_mapped(self, buf: mmap.mmap, size: int) -> None:
        """``feed_stream`` over a mapped file, read where it lies; the pages of each span let go once read."""
        dropped = 0

        def read_to(pos: int) -> None:
            nonlocal dropped
            if (read := pos - pos % mmap.PAGESIZE) > dropped:
                buf.madvise(mmap.MADV_DONTNEED, dropped, read - dropped)
                dropped = read

        self.feed_lines(buf, 0, lines_end(buf, size), read_to)  # type: ignore[arg-type]
        self.flush()

    def feed_lines(self, buf: bytes, lo: int, hi: int, read_to: Callable[[int], None] | None = None) -> None:
        """The lines of ``buf[lo:hi]`` (``hi``: a newline, or the end), in the spans spans.py cuts (``buf`` may be a
        map: the C scanner's passes take any buffer); a line longer than MAX_LINE, its first MAX_LINE bytes.
        ``read_to(pos)``: the bytes before ``pos`` are read."""
        for a, b, long in spans(buf, lo, hi, CHUNK, MAX_LINE):
            if long:
                self._feed_cut(buf[a:a + MAX_LINE])
            else:
                self.feed_span(buf, a, b)
            if read_to is not None:
                read_to(b + 1)

    def _feed_line(self, line: bytes) -> None:
        """One line (of a few chunks at most); its first MAX_LINE bytes where it is longer."""
        if len(line) > MAX_LINE:
            self._feed_cut(line[:MAX_LINE])
        else:
            self.feed_chunk(line)

    def _feed_cut(self, head: bytes) -> None:
        """The first MAX_LINE bytes of a line longer than that, which a warning counts."""
        self.cut_lines += 1
        self.feed_chunk(head)

    def feed_file(self, f: BinaryIO, path: str, size: int) -> None:
        """``feed_stream``, with the fast path's byte work spread over worker processes for big files."""
        jobs = parallel.jobs()
        # a worker's span is several chunks: fewer tasks to hand out and results to send back
        bounds = parallel.line_bounds(f, size, 4 * CHUNK, MAX_LINE) if jobs > 1 and size >= PARALLEL_MIN else None
        pool = parallel.start(path, jobs) if bounds else None
        if bounds is None or pool is None:  # small, one CPU, a line too long to cut at, or no fork
            mapped = _mapped(f, size)
            if mapped is not None:
                with mapped:
                    self.feed_mapped(mapped, size)
                return
            f.seek(0)
            self.feed_stream(f)
            return
        for (a, b), parts in parallel.extracted(pool, bounds, CHUNK, FAST_MIN, MAX_LINE):
            if parts is None:  # not NCCL-dominated: read here
                f.seek(a)
                data = f.read(b - a)
                self.feed_lines(data, 0, lines_end(data, len(data)))
                continue
            self.read_parts(parts)
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


def _mapped(f: BinaryIO, size: int) -> mmap.mmap | None:
    """``f`` mapped for reading, where feed_mapped may read it (MAP_MIN); else None."""
    if size < MAP_MIN or fastpath._scan is None or os.environ.get(MAP_ENV) == "0" or not hasattr(mmap, "MADV_DONTNEED"):
        return None  # the pure-Python passes use bytes' own methods
    try:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode) or st.st_size < size or time.time() - st.st_mtime < MAP_QUIET_S:
            return None
        return mmap.mmap(f.fileno(), size, access=mmap.ACCESS_READ)
    except (OSError, ValueError):
        return None

