"""Which lines of a span the fast path may skip for their prefix: plain lines of a known host.

A plain line is, after a launcher tag and a time stamp already seen (clean() peels both alike), a host
already read, then ``:pid:tid [dev] NCCL INFO`` or ``NCCL WARN`` and a blank, its message not starting
with another ``host:pid:tid `` (the line path reads that as a second prefix, and its host). The line path
reads such a line's host as the known one and its message as the one after the tag, so the line adds no
fact but its message, which fastpath.py judges. Every other line (an unknown host or tag, a malformed
prefix, a bare pre-2.3 tag, a table row, prose) is handed on. Both engines find the same lines:
- the pure-Python passes by one regex (``Known.other``) whose lookahead holds the whole grammar, at every
  line: the known hosts as a trie (``trie``), then ``TAIL``;
- the C scanner (_scan.c) tests ``TAIL`` itself, and for lines with no tag or time stamp that the part
  before ``:pid`` holds no ':'; the host then is the line's first ``width`` bytes (its window) matching
  ``Known.window``, which is tested once per run of lines that share a window (``unknown_from_runs``).
tests/test_logs_known.py checks both find the same lines.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from itertools import islice
from typing import Protocol

from hpcbench.parse.prefixes import HOST, MPI_TAG, TAG, TS

GOOD_MAX = 100_000  # windows remembered; past this the set starts again


def _bytes_pattern(pattern: str) -> bytes:
    """prefixes' pattern for the byte regexes here: [0-9] for \\d (several times faster on bytes), no groups."""
    return re.sub(r"\((?!\?)", "(?:", pattern.replace(r"\d", "[0-9]")).encode()


_TAG = _bytes_pattern(TAG)
TS_BLANK = b"(?:" + _bytes_pattern(TS) + rb"[ \t]+)?"
# After the host, as _scan.c's plain_line reads it. [0-9], not \d: several times faster on bytes.
TAIL = rb":[0-9]+:[0-9]+ \[[0-9]+\] NCCL (?:INFO|WARN)[ \t](?![A-Za-z0-9][\w.*-]*:[0-9]+:[0-9]+ )"
PLAIN = re.compile(rb"(?P<tag>" + _TAG + rb")?(?P<ts>" + TS_BLANK + rb")(?P<host>" + HOST.encode() + rb"):[0-9]+:[0-9]+ ")
_HOST_LINE = re.compile(rb"\n(?:" + _TAG + rb")?" + TS_BLANK + rb"(" + HOST.encode() + rb"):[0-9]+:[0-9]+ ")

Windows = tuple[int, list[tuple[int, int]], list[int]]  # width, runs and tail of a span (_scan.c)


class WindowSet(Protocol):
    """A set of windows: a set, or the C scanner's Strings."""

    def add(self, s: bytes, /) -> None: ...
    def clear(self) -> None: ...
    def __contains__(self, s: object, /) -> bool: ...
    def __len__(self) -> int: ...


@dataclass
class Known:
    """Hosts (as printed in prefixes) and launcher tags of lines already handed on."""

    hosts: set[bytes] = field(default_factory=set)
    tags: set[bytes] = field(default_factory=set)
    stamped: bool = False  # lines start with an ISO time stamp (kubectl --timestamps)
    other: re.Pattern[bytes] = re.compile(rb"\n([^\n]*)")
    window: re.Pattern[bytes] | None = None  # with no tag or time stamp: a known host, ':' and a digit
    width: int = 0  # bytes of a line that ``window`` needs
    good: WindowSet = field(default_factory=lambda: set[bytes]())  # windows ``window`` matched (a _scan.Strings for the C scanner)
    _dirty: bool = False

    def learn(self, line: bytes) -> None:
        m = PLAIN.match(line)
        if m is None:
            return
        if m["host"] not in self.hosts:
            self.hosts.add(m["host"])
            self._dirty = True
        if m["tag"] and m["tag"] not in self.tags:
            self.tags.add(m["tag"])
            self._dirty = True
        if m["ts"] and not self.stamped:
            self.stamped = self._dirty = True

    def newcomers(self, buf: bytes, lo: int, hi: int, heads: list[int] | None = None) -> list[tuple[int, int]]:
        """(start, end) of the first line of each host of ``buf[lo:hi]`` not known yet, which it learns; of the
        lines that start at ``heads`` only, where given (_scan.heads: the others' hosts show up later, as lines
        of an unknown host)."""
        out, new = [], set()
        hosts = self.hosts
        found = (_HOST_LINE.finditer(buf, lo, hi) if heads is None  # every line of a file's first span (~20,000)
                 else filter(None, (_HOST_LINE.match(buf, s - 1, hi) for s in heads)))
        for m in found:
            host = m.group(1)
            if host not in hosts and host not in new:
                new.add(host)
                end = buf.find(b"\n", m.end(), hi)
                out.append((m.start() + 1, hi if end < 0 else end))
                self.learn(buf[out[-1][0]:out[-1][1]])
        return out

    def newcomers_in(self, buf: bytes, lines: list[tuple[int, int]]) -> list[tuple[int, int]]:
        """``newcomers`` among ``lines`` (start, end): the first of each that shows a host not known yet, which
        it learns."""
        out = []
        for s, e in lines:
            m = PLAIN.match(buf, s, e)
            if m is not None and m["host"] not in self.hosts:
                out.append((s, e))
                self.learn(buf[s:e])
        return out

    def compiled(self) -> re.Pattern[bytes]:
        if self._dirty and self.hosts:
            self._dirty = False
            hosts = trie(self.hosts)
            plain = _tags(self.tags) + (TS_BLANK if self.stamped else b"") + hosts + TAIL
            if self.tags:  # an mpirun tag in the middle: two ranks' output on one line, which the line path splits
                plain += rb"(?![^\n]*\]<std)"
            self.other = re.compile(rb"\n(?!" + plain + rb")([^\n]*)")
            if not self.tags and not self.stamped:  # a line's first bytes decide its host
                self.window, self.width = re.compile(hosts + rb":[0-9]"), max(map(len, self.hosts)) + 2
                self.good.clear()
            else:
                self.window, self.width = None, 0
        return self.other

    def unknown_lines(self, buf: bytes, first: int, last: int, most: int, windows: Windows | None = None
                      ) -> list[tuple[int, int]]:
        """(start, end) of the lines after a newline of ``buf[first:last]`` that are not plain lines of a
        known host, at most ``most`` of them. ``windows``: the C scanner's runs of this span, which hold
        only the lines' hosts (it tested the rest), used if made for the current width."""
        other = self.compiled()
        if self.window is None or windows is None or windows[0] != self.width:
            return [(m.start() + 1, m.end()) for m in islice(other.finditer(buf, first, last), most)]
        starts = unknown_from_runs(buf, last, windows[1], windows[2], self.window, self.width, self.good)
        ends = [buf.find(b"\n", s, last) for s in starts[:most]]
        return [(s, last if e < 0 else e) for s, e in zip(starts, ends)]


def _tags(tags: set[bytes]) -> bytes:
    """Tags that change nothing: with no tag or one, only those; once two tags of a form ("[1,N]<stdout>:",
    "[N]<stdout>:") are known, launcher_prefix says the form, so any tag of it."""
    if not tags:
        return b""
    if len(tags) == 1:
        return b"(?:" + re.escape(next(iter(tags))) + b")?"
    forms = {m.group(1) if b"," in t and (m := MPI_TAG.match(t.decode())) else None for t in tags}
    alts = [(rb"\[" + f.encode() + rb",[0-9]+\]" if f else rb"\[[0-9]+\]") + rb"<std(?:out|err)>:"
            for f in sorted(forms, key=str)]
    return b"(?:" + b"|".join(alts) + b")?"


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
        alts = [(re.escape(bytes(cs)) if len(cs) == 1
                 else b"[" + b"".join(re.escape(bytes([c])) for c in sorted(cs)) + b"]") + tail
                for tail, cs in sorted(tails.items())]
        if None in node:
            alts.append(b"")  # last: a longer name is tried first
        return alts[0] if len(alts) == 1 else b"(?:" + b"|".join(alts) + b")"

    return emit(root)


def unknown_from_runs(buf: bytes, last: int, runs: list[tuple[int, int]], tail: list[int],
                      window: re.Pattern[bytes], width: int, good: WindowSet) -> list[int]:
    """Starts, in order, of the lines that ``window`` does not match at their start, from the C scanner's
    runs (start, end) of lines that share a window not in ``good`` (windows matched before, which it adds
    to), and tail (starts of the lines too near the buffer's end to have a window)."""
    out = []
    for s, end in runs:
        win = buf[s:s + width]
        if win in good:
            continue
        if window.match(win):
            if len(good) >= GOOD_MAX:
                good.clear()
            good.add(win)
            continue
        while s < end:  # each line of the run: none starts with a known host
            out.append(s)
            s = buf.find(b"\n", s, min(end, last)) + 1
            if s == 0:
                break
    out += [s for s in tail if not window.match(buf, s, last)]
    return out
