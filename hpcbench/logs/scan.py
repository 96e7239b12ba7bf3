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
from operator import itemgetter, methodcaller
from typing import Any, BinaryIO

from hpcbench.logs import records
from hpcbench.logs.horovod import HorovodState
from hpcbench.logs.nccl import NcclState
from hpcbench.logs.nccltests import NcclTestsState
from hpcbench.logs.prefixes import MPI_TAG, clean, decode, split_mid_line_tags

CHUNK = 8 << 20
MAX_LINE = 1 << 20  # longer lines are cut here (with a warning), so one 10 GB line costs no memory
FAST_MIN = 1 << 20  # smaller chunks always take the line path
INTEREST = re.compile(rb" NCCL (?:WARN|INFO (?:Channel|Ring|Coll|Using|NET|Bootstrap|comm|ncclCommInit|rank|"
                      rb"\[Rank|Init timings|\d|NVLS|Connected|NCCL version))")
RARE = (b"NCCL version", b"/sec", records.MARK.encode())
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
        self._heads: set[bytes] = set()
        self._msgs: set[bytes] = set()
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

    def _continues(self, prev: str, cur: str) -> bool:
        """A hard-wrapped NCCL line: the previous line filled the terminal, this one starts nowhere."""
        if len(prev) < _WRAP_MIN or "NCCL " not in prev or not cur.strip() or _ROW.match(cur):
            return False
        if cur.lstrip().startswith(("#", "[", "NCCL")):
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
        for raw in chunk.split(b"\n"):
            self.lines += 1
            self.feed_raw(raw)

    def _fast(self, chunk: bytes) -> bool:
        n_lines = chunk.count(b"\n") + 1
        pieces = chunk.split(b" NCCL ")
        if len(pieces) - 1 < 0.9 * n_lines or b"#" in chunk:
            return False
        self.flush()
        self.lines += n_lines
        heads = set(map(itemgetter(2), map(methodcaller("rpartition", b"\n"), pieces[:-1])))
        del pieces
        for head in heads - self._heads:
            ln = clean(decode(head) + " NCCL INFO")
            if ln.host:
                self.nccl.seen = True
                self.nccl.add_host(ln.host)
            if ln.tag:
                self.tags[ln.tag] = None
        self._heads |= heads
        if len(self._heads) > 200_000:
            self._heads.clear()
        seen_starts: set[int] = set()
        for m in INTEREST.finditer(chunk):
            pos = m.start()
            end = chunk.find(b"\n", pos)
            if end < 0:
                end = len(chunk)
            msg = chunk[pos + 11:end]
            if m.group(0).endswith((b"Channel", b"Ring")) and b" via " not in msg:
                continue  # a ring listing, not a transport
            if not msg.startswith(b"WARN"):
                key = chunk[chunk.rfind(b"\n", 0, pos) + 1:end] if b"ank" in msg else msg
                if key in self._msgs:
                    continue
                self._msgs.add(key)
            start = chunk.rfind(b"\n", 0, pos) + 1
            seen_starts.add(start)
            self._process(decode(chunk[start:end]))
        if len(self._msgs) > 500_000:
            self._msgs.clear()
        for kw in RARE:
            p = chunk.find(kw)
            while p >= 0:
                start = chunk.rfind(b"\n", 0, p) + 1
                end = chunk.find(b"\n", p)
                end = len(chunk) if end < 0 else end
                if start not in seen_starts:
                    seen_starts.add(start)
                    self._process(decode(chunk[start:end]))
                p = chunk.find(kw, end)
        return True

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
            buf = carry + data if carry else data
            cut = buf.rfind(b"\n")
            if cut < 0:
                if len(buf) > MAX_LINE:
                    self.cut_lines += 1
                    self.feed_chunk(buf[:MAX_LINE])
                    carry, skipping = b"", True
                else:
                    carry = buf
                continue
            carry = buf[cut + 1:]
            if len(carry) > MAX_LINE:
                self.cut_lines += 1
                self.feed_chunk(carry[:MAX_LINE])
                carry, skipping = b"", True
            self.feed_chunk(buf[:cut])
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
