"""Streaming scan of one log file: binary chunks, constant memory, never raises on content.

Two ways through a chunk, giving the same facts:
- the line path cleans and reads every line (wrapped lines are joined, mid-line mpirun tags split);
- the fast path is taken for big chunks that are almost only NCCL-prefixed lines (multi-GB INFO logs).
  It reads the host of every line from the distinct ``host:pid:tid [dev]`` heads (C-level split and
  set), and hands to the line path only the lines whose NCCL message can carry a fact, skipping
  messages it has already read (a 1024-rank job repeats the same edge lines for every communicator).
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
# NCCL messages that can carry a fact (the rest is chatter whose only fact, the host, is in these too)
_MSG = re.compile(rb" NCCL (?:WARN|INFO (?:Channel|Ring|Coll|Using|NET|Bootstrap|comm|ncclCommInit|rank|"
                  rb"\[Rank|Init timings|\d|NVLS|Connected|NCCL version))[^\n]*")
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
        if len(chunk) >= FAST_MIN and self._fast(chunk):
            return
        self._line_path(chunk)

    def _line_path(self, block: bytes) -> None:
        for raw in block.split(b"\n"):
            self.lines += 1
            self.feed_raw(raw)

    def _nccl_dominated(self, chunk: bytes) -> bool:
        """Sampled, not counted: 16 windows of 16 KiB decide, at 2% of the cost of a full count."""
        step = max(len(chunk) // 16, 1)
        lines = nccl = 0
        for i in range(0, len(chunk), step):
            w = chunk[i:i + 16384]
            lines += w.count(b"\n")
            nccl += w.count(b" NCCL ")
        return lines > 0 and nccl >= 0.75 * lines

    def _fast(self, chunk: bytes) -> bool:
        if not self._nccl_dominated(chunk):
            return False
        self.flush()
        first = chunk.find(b"#")
        if first < 0:
            self._fast_block(chunk)
            return True
        # nccl-tests headers, rows and trailers go through the line path: from a little before the
        # first '#' (rows of a table whose header was cut off) to the end of the line of the last one.
        a = chunk.rfind(b"\n", 0, first)
        for _ in range(64):
            if a <= 0:
                break
            a = chunk.rfind(b"\n", 0, a)
        a = max(a, -1) + 1
        b = chunk.find(b"\n", chunk.rfind(b"#"))
        b = len(chunk) if b < 0 else b
        if a > 0:
            self._fast_block(chunk[:a - 1])
        self._line_path(chunk[a:b])
        self.flush()
        if b + 1 < len(chunk):
            self._fast_block(chunk[b + 1:])
        return True

    def _fast_block(self, chunk: bytes) -> None:
        self.lines += 1  # counting them would cost a scan; only "is the file empty" is asked
        counts = Counter(_MSG.findall(chunk))
        keys = counts.keys()
        for msg in self._warn_msgs & keys:
            self.nccl.count_warn(decode(msg[11:]), counts[msg])
        fresh = {}
        for msg in keys - self._msgs:
            if b"anks" in msg and msg.startswith(b" NCCL INFO "):
                # Init lines differ per communicator (comm pointer): only nranks is read from them here;
                # the rank -> host map comes from the edge lines that every rank prints.
                i = msg.find(b"nranks ")
                if i < 0:
                    i = msg.find(b"nRanks ")
                j = msg.find(b" ", i + 7)
                if i >= 0 and msg[i + 7:j].isdigit():
                    self.nccl.nranks = max(self.nccl.nranks or 0, int(msg[i + 7:j]))
                    self.nccl.seen = True
                    continue
            if msg[11:].startswith((b"Channel", b"Ring")) and b" via " not in msg:
                self._msgs.add(msg)
                continue  # a ring listing, not a transport
            self._msgs.add(msg)
            if msg.startswith(b" NCCL WARN"):
                self._warn_msgs.add(msg)
            fresh[msg] = counts[msg]
        if fresh:
            self._fresh_lines(chunk, fresh)
        if len(self._msgs) > 500_000:
            self._msgs.clear()
        # Lines that are not NCCL messages, looked for with one C scan each (single bytes cost ~nothing).
        kws = [b"/sec"]
        if self.nccl.version is None:
            kws.append(b"NCCL version")
        if chunk.find(b"{") >= 0:
            kws.append(records.MARK.encode())
        for kw in kws:
            p = chunk.find(kw)
            while p >= 0:
                start = chunk.rfind(b"\n", 0, p) + 1
                end = chunk.find(b"\n", p)
                end = len(chunk) if end < 0 else end
                line = chunk[start:end]
                if _MSG.search(line) is None or kw == b"NCCL version":
                    self._process(decode(line))
                p = chunk.find(kw, end)

    def _fresh_lines(self, chunk: bytes, fresh: dict[bytes, int]) -> None:
        """Read the first line of each message not seen before, with its host."""
        spans = []
        if len(fresh) <= 32:
            for msg in fresh:
                p = chunk.find(msg)
                while p >= 0 and p + len(msg) < len(chunk) and chunk[p + len(msg)] != 10:
                    p = chunk.find(msg, p + 1)  # a longer message that starts the same way
                if p < 0:
                    continue
                spans.append((chunk.rfind(b"\n", 0, p) + 1, p + len(msg), msg))
            spans.sort()
        else:
            found: set[bytes] = set()
            for m in _MSG.finditer(chunk):
                msg = m.group(0)
                if msg in fresh and msg not in found:
                    found.add(msg)
                    spans.append((chunk.rfind(b"\n", 0, m.start()) + 1, m.end(), msg))
                    if len(found) == len(fresh):
                        break
        for start, end, msg in spans:
            self._process(decode(chunk[start:end]))
            if msg.startswith(b" NCCL WARN") and fresh[msg] > 1:
                self.nccl.count_warn(decode(msg[11:]), fresh[msg] - 1)

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
            # one copy per chunk: the carried partial line and the read up to its last newline
            chunk = b"".join((carry, memoryview(data)[:cut]))
            carry = data[cut + 1:]
            if len(carry) > MAX_LINE:
                self.cut_lines += 1
                self.feed_chunk(carry[:MAX_LINE])
                carry, skipping = b"", True
            self.feed_chunk(chunk)
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
