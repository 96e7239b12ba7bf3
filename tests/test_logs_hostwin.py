"""The fast path's host test in numpy (hpcbench/parse/hostwin.py) finds exactly the lines its regex finds:
every line after a newline that does not start with a known host, ':' and a digit."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from hpcbench.parse import fastpath, hostwin

KNOWN = [b"gpu-node-007", b"gpu-node-017", b"gpu-node-0170", b"s4", b"trainer-7f9c8d6b5-xk2lp"]
# Lines as they start: known hosts, a host one character off, a known host's prefix or extension, no
# digit after the colon, a line too short to hold a window, empty lines, a table row, a tag.
STARTS = [h + b":12:34 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC" for h in KNOWN] + [
    b"gpu-node-008:12:34 [0] NCCL INFO x", b"gpu-node-01:1:1 [0] NCCL INFO x", b"gpu-node-0071:1:1 [0] x",
    b"gpu-node-007:x:1", b"gpu-node-007:", b"s4:9", b"s", b"", b"     1048576        262144     float",
    b"[1,0]<stdout>:gpu-node-007:1:1 [0] NCCL INFO x", b"S4:1:1 [0] NCCL INFO x", b"trainer-7f9c8d6b5-xk2l:1:1",
]


def _known(hosts: list[bytes]) -> fastpath.Known:
    known = fastpath.Known()
    for h in hosts:
        known.learn(h + b":1:1 [0] NCCL INFO x")
    known.compiled()
    return known


def _by_regex(known: fastpath.Known, buf: bytes, first: int, last: int) -> list[int]:
    return [m.start() + 1 for m in known.other.finditer(buf, first, last)]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(STARTS), min_size=1, max_size=60), st.lists(st.sampled_from(KNOWN), min_size=1),
       st.integers(0, 40), st.integers(0, 40), st.binary(max_size=30))
def test_numpy_and_regex_find_the_same_lines(lines, hosts, cut_head, cut_tail, tail):
    """Spans anywhere in a buffer, ending where a window does not fit (the last lines are matched one by
    one), with windows already matched carried from one span to the next."""
    buf = b"\n".join(lines) + b"\n" + tail
    known = _known(hosts)
    assert known.window is not None and known.width == max(map(len, set(hosts))) + 2
    last = buf.rfind(b"\n")
    first = buf.find(b"\n", min(cut_head, last))
    last = max(first, buf.rfind(b"\n", 0, max(len(buf) - cut_tail, first + 1)))
    for _ in range(2):  # the second time with what the first learned
        got = hostwin.unknown_starts(buf, first, last, known.window, known.width, known.good)
        assert got == _by_regex(known, buf, first, last)


def test_spans_with_tags_or_time_stamps_keep_the_regex():
    known = _known([b"gpu-node-007"])
    known.learn(b"2024-10-23T19:30:56.000001Z gpu-node-007:1:1 [0] NCCL INFO x")
    known.compiled()
    assert known.window is None
    tagged = _known([b"gpu-node-007"])
    tagged.learn(b"[1,0]<stdout>:gpu-node-007:1:1 [0] NCCL INFO x")
    tagged.compiled()
    assert tagged.window is None


def test_a_late_line_of_a_new_host_is_found():
    """One line of an unknown host among 200,000 lines of known ones, where the windows before it all
    matched: it is handed on, and so is each line that shares its window."""
    known = _known([b"gpu-node-007", b"gpu-node-017"])
    line = b"gpu-node-007:4011:555 [3] NCCL INFO AllReduce: opCount 0 sendbuff 0x0 count 1\n"
    new = b"gpu-node-018:4011:555 [3] NCCL INFO Using network IB\n"
    buf = b"\n" + line * 100_000 + new * 2 + line * 100_000
    last = len(buf) - 1
    got = hostwin.unknown_starts(buf, 0, last, known.window, known.width, known.good)
    at = 1 + len(line) * 100_000
    assert got == [at, at + len(new)] == _by_regex(known, buf, 0, last)
