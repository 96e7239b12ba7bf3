"""Streaming scan of one log file: binary chunks, constant memory, never raises on content.

Two ways through a chunk, giving the same facts:
- the line path cleans and reads every line (wrapped lines are joined, mid-line mpirun tags split);
- the fast path is taken for big chunks that are almost only NCCL-prefixed lines (multi-GB INFO logs).
  One regex pass collects the distinct NCCL messages that can carry a fact; only the first line of a
  message not read before goes to the line path, with its host (a 1024-rank job repeats the same edge
  lines for every communicator). Limits: the host of a rank that prints only chatter (no such message)
  is not seen, and hard-wrapped lines are not joined (wrapped logs are rarely NCCL-dominated).
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any, BinaryIO

from hpcbench.logs import records
from hpcbench.logs.horovod import HorovodState
from hpcbench.logs.nccl import NcclState
from hpcbench.logs.nccltests import NcclTestsState
from hpcbench.logs.prefixes import MPI_TAG, NCCL_PREFIX, clean, decode, split_mid_line_tags

CHUNK = 8 << 20
MAX_LINE = 1 << 20  # longer lines are cut here (with a warning), so one 10 GB line costs no memory
FAST_MIN = 1 << 20  # smaller chunks always take the line path
# NCCL messages that can carry a fact (the rest is chatter whose only fact, the host, is in these too).
# The pattern starts with the literal "NCCL ": the regex engine then skips to each 'N' in a tight loop.
_MSG = re.compile(rb"NCCL (?:WARN|version|INFO (?:Channel|Ring|Coll|Using|NET|Bootstrap|comm|ncclCommInit|rank|"
                  rb"\[Rank|Init timings|\d|NVLS|Connected|NCCL version))[^\n]*")
_WARN = re.compile(rb"NCCL WARN[^\n]*")
# an init line (one per rank and communicator): nranks is its only fact the fast path needs
_INIT = re.compile(rb"^(NCCL INFO [^\n]*?\bn[Rr]anks (\d+)(?![^ \n])[^\n]*)$", re.MULTILINE)
_SEC = re.compile(rb"/sec")  # a regex: its search outruns bytes.find on this needle
_RECORD = re.compile(re.escape(records.MARK.encode()))
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
        self._msgs: set[bytes] = set()  # NCCL messages already read (fast path)
        self._warn_msgs: set[bytes] = set()
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
        if "/sec" in cur or "NCCL version" in cur or records.MARK in cur:
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
        if records.MARK in text:
            rec = records.from_line(ln.text, self.warnings)
            if rec is not None:
                self.records.append(rec)

    # ---- chunks ----------------------------------------------------------------------------
    def feed_chunk(self, chunk: bytes) -> None:
        """``chunk`` holds whole lines (each ending with a newline, except perhaps the last)."""
        self.feed_span(chunk, 0, len(chunk))

    def feed_span(self, buf: bytes, lo: int, hi: int) -> None:
        """The lines of ``buf[lo:hi]``; bounds instead of a slice spare a copy of a whole chunk."""
        if hi - lo >= FAST_MIN and self._fast(buf, lo, hi):
            return
        self._line_path(buf[lo:hi])

    def _line_path(self, block: bytes) -> None:
        for raw in block.split(b"\n"):
            self.lines += 1
            self.feed_raw(raw)

    def _nccl_dominated(self, buf: bytes, lo: int, hi: int) -> bool:
        """Sampled, not counted: 16 windows of 16 KiB decide, at 2% of the cost of a full count."""
        step = max((hi - lo) // 16, 1)
        lines = nccl = 0
        for i in range(lo, hi, step):
            e = min(i + 16384, hi)
            lines += buf.count(b"\n", i, e)
            nccl += buf.count(b" NCCL ", i, e)
        return lines > 0 and nccl >= 0.75 * lines

    def _fast(self, buf: bytes, lo: int, hi: int) -> bool:
        if not self._nccl_dominated(buf, lo, hi):
            return False
        self.flush()
        first = buf.find(b"#", lo, hi)
        if first < 0:
            self._fast_block(buf, lo, hi)
            return True
        # nccl-tests headers, rows and trailers go through the line path: from a little before the
        # first '#' (rows of a table whose header was cut off) to the end of the line of the last one.
        a = buf.rfind(b"\n", lo, first)
        for _ in range(64):
            if a < lo:
                break
            a = buf.rfind(b"\n", lo, a)
        a = max(a + 1, lo)
        b = buf.find(b"\n", buf.rfind(b"#", lo, hi), hi)
        b = hi if b < 0 else b
        if a > lo:
            self._fast_block(buf, lo, a - 1)
        self._line_path(buf[a:b])
        self.flush()
        if b + 1 < hi:
            self._fast_block(buf, b + 1, hi)
        return True

    def _fast_block(self, buf: bytes, lo: int, hi: int) -> None:
        self.lines += 1  # counting them would cost a scan; only "is the file empty" is asked
        msgs = set(_MSG.findall(buf, lo, hi))
        fresh = msgs - self._msgs
        again = self._warn_msgs & msgs  # WARNs read in an earlier chunk: only counted here
        if fresh:
            fresh = self._skip_inits(fresh)
            self._msgs |= fresh
        todo = []
        for msg in fresh:
            if msg[10:].startswith((b"Channel", b"Ring")) and b" via " not in msg:
                continue  # a ring listing, not a transport
            if msg.startswith(b"NCCL WARN"):
                self._warn_msgs.add(msg)
            todo.append(msg)
        counts: Counter[bytes] = Counter()
        if again or any(m.startswith(b"NCCL WARN") for m in todo):
            counts = Counter(_WARN.findall(buf, lo, hi))  # a second pass, only over chunks with WARNs
        for msg in again:
            self.nccl.count_warn(decode(msg[10:]), counts[msg])
        if todo:
            self._fresh_lines(buf, lo, hi, todo, counts)
        if len(self._msgs) > 500_000:
            self._msgs.clear()
            self._warn_msgs.clear()
        # Lines that are not NCCL messages: one C scan for '/sec' (Horovod, tf_cnn_benchmarks), one
        # memchr for '{' (hpcbench records); NCCL version lines are among _MSG's matches.
        self._keyword_lines(buf, lo, hi, _SEC)
        if buf.find(b"{", lo, hi) >= 0:
            self._keyword_lines(buf, lo, hi, _RECORD)

    def _skip_inits(self, fresh: set[bytes]) -> set[bytes]:
        """Init lines differ per communicator (comm pointer): only nranks is read from them here, the
        rank -> host map comes from the edge lines that every rank prints. One regex over all of them."""
        inits = [m for m in fresh if b"anks " in m]
        if not inits:
            return fresh
        found = _INIT.findall(b"\n".join(inits))
        if found:
            self.nccl.nranks = max(self.nccl.nranks or 0, max(int(n) for _, n in found))
            self.nccl.seen = True
            fresh = fresh - {m for m, _ in found}
        return fresh

    def _keyword_lines(self, buf: bytes, lo: int, hi: int, rx: re.Pattern[bytes]) -> None:
        m = rx.search(buf, lo, hi)
        while m is not None:
            s = buf.rfind(b"\n", lo, m.start())
            start = lo if s < 0 else s + 1
            end = buf.find(b"\n", m.end(), hi)
            end = hi if end < 0 else end
            if _MSG.search(buf, start, end) is None:  # an NCCL message is read as one
                self._process(decode(buf[start:end]))
            m = rx.search(buf, end, hi)

    def _fresh_lines(self, buf: bytes, lo: int, hi: int, todo: list[bytes], counts: Counter[bytes]) -> None:
        """Read the first line of each message not seen before, with its host."""
        spans = []
        if len(todo) <= 32:
            for msg in todo:
                p = buf.find(msg, lo, hi)
                while p >= 0 and p + len(msg) < hi and buf[p + len(msg)] != 10:
                    p = buf.find(msg, p + 1, hi)  # a longer message that starts the same way
                if p < 0:
                    continue
                s = buf.rfind(b"\n", lo, p)
                spans.append((lo if s < 0 else s + 1, p + len(msg), msg))
            spans.sort()
        else:
            wanted = set(todo)
            for m in _MSG.finditer(buf, lo, hi):
                msg = m.group(0)
                if msg in wanted:
                    wanted.discard(msg)
                    s = buf.rfind(b"\n", lo, m.start())
                    spans.append((lo if s < 0 else s + 1, m.end(), msg))
                    if not wanted:
                        break
        for start, end, msg in spans:
            self._process(decode(buf[start:end]))
            if counts[msg] > 1:
                self.nccl.count_warn(decode(msg[10:]), counts[msg] - 1)

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

    def launcher_prefix(self) -> str | None:
        tags = list(self.tags)
        if not tags:
            return None
        if len(tags) == 1:
            return tags[0]
        general = {MPI_TAG.sub(lambda m: f"[{m.group(1)},N]<stdout>:" if m.group(2) else "[N]<stdout>:", t)
                   for t in tags}
        return general.pop() if len(general) == 1 else "mixed"
