"""Both engines hand on the same lines for their prefix (hpcbench/parse/known.py): the pure passes' one
regex (a known host, then known.TAIL) and the lines with two NCCL tags; the C scanner's windows of a known
host, its own test of the rest of the prefix, and its lines with no tag or two."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hpcbench.parse import fastpath, known

HOSTS = [b"gpu-node-007", b"gpu-node-017", b"gpu-node-0170", b"s4", b"trainer-7f9c8d6b5-xk2lp"]
MSG = b"Channel 00/0 : 0[0] -> 1[1] via P2P/IPC"
# Lines as they start: known hosts, a host one character off, a known host's prefix or extension, no
# digit after the colon, a line too short to hold a window, empty lines, a table row, a tag; prefixes
# glued, malformed, bare (pre-2.3), with a WARN's file:line, with a tab, with no tag or two.
STARTS = [h + b":12:34 [0] NCCL INFO " + MSG for h in HOSTS] + [
    b"gpu-node-008:12:34 [0] NCCL INFO x", b"gpu-node-01:1:1 [0] NCCL INFO x", b"gpu-node-0071:1:1 [0] x",
    b"gpu-node-007:x:1", b"gpu-node-007:", b"s4:9", b"s", b"", b"     1048576        262144     float",
    b"[1,0]<stdout>:gpu-node-007:1:1 [0] NCCL INFO x", b"S4:1:1 [0] NCCL INFO x", b"trainer-7f9c8d6b5-xk2l:1:1",
    b"s4:1:1 [0] NCCL INFO gpu-node-0zz:2:2 [1] NCCL INFO " + MSG, b"s4:1:1 [0] NCCL INFO gpu-node-0zz:2:2 [1] INFO x",
    b"gpu-node-007:12:gpu-node-0zy:3:4 [0] NCCL INFO " + MSG, b"gpu-node-007:3:4 [1] INFO " + MSG,
    b"gpu-node-007:3:4 [1] misc/socket.cc:484 NCCL WARN x", b"gpu-node-007:3:4 [1] NCCL WARN x",
    b"gpu-node-007:3:4 [1] NCCL INFO\t" + MSG, b"gpu-node-007:3:4 [1] NCCL INFO NCCL version 2.21.5",
    b"gpu-node-007:3:4 [1] NCCL TRACE x", b"gpu-node-007:3:4 [1]  NCCL INFO x", b"s4:1:1 [0] NCCL INFO s4:1",
    b"s4:1:1 [0] NCCL INFO s4:1:1 x", b"s4:1:1 [0] NCCL INFO s4:1:1 [0] x", b"s4::1 [0] NCCL INFO x",
    # training prints, which the C scanner hands on as prints where the line path reads them alone
    b"step 1: loss 0.5", b"Iter #3: 601.7 img/sec per GPU", b"training...", b"  warnings.warn(", b"vs",
    b"foo :1:2 [0] NCCL INFO x", b"s4:1:1 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/IB/1/GDR",
]


def _known(hosts: list[bytes]) -> known.Known:
    k = known.Known()
    for h in hosts:
        k.learn(h + b":1:1 [0] NCCL INFO x")
    k.compiled()
    return k


def _pure(k: known.Known, buf: bytes, first: int, last: int) -> list[int]:
    lines = k.unknown_lines(buf, first, last, 1 << 30)
    return sorted({s for s, _ in lines + fastpath._two_tags(buf, first, last, lines)})


def _c(k: known.Known, buf: bytes, first: int, last: int) -> list[int]:
    got = fastpath.compiled_messages().scan(buf, 0, len(buf), first, last, k.width, fastpath._c_good(k))
    _, _, runs, tail, odd, prints = got
    lines = k.unknown_lines(buf, first, last, 1 << 30, (k.width, runs, tail))
    return sorted({s for s, _ in lines + odd + prints})


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(STARTS), min_size=1, max_size=60), st.lists(st.sampled_from(HOSTS), min_size=1),
       st.integers(0, 40), st.integers(0, 40), st.binary(max_size=30).filter(lambda b: fastpath.plain(b, 0, len(b))))
def test_both_engines_hand_on_the_same_lines(lines, hosts, cut_head, cut_tail, tail):
    """Spans anywhere in a buffer, ending where a window does not fit (the last lines are matched one by
    one), with windows already matched carried from one span to the next."""
    buf = b"\n".join(lines) + b"\n" + tail
    k = _known(hosts)
    assert k.window is not None and k.width == max(map(len, set(hosts))) + 2
    last = buf.rfind(b"\n")
    first = buf.find(b"\n", min(cut_head, last))
    last = max(first, buf.rfind(b"\n", 0, max(len(buf) - cut_tail, first + 1)))
    for _ in range(2):  # the second time with the windows the first matched
        assert _c(k, buf, first, last) == _pure(k, buf, first, last)


@pytest.mark.parametrize("lead", [b"[1,0]<stdout>:", b"2024-10-23T19:30:56.000001Z "])
def test_with_tags_or_time_stamps_the_regex_alone_decides(lead):
    """No window then: the C scanner tests the tail and the tags, the regex every line's whole prefix."""
    k = _known([b"gpu-node-007"])
    k.learn(lead + b"gpu-node-007:1:1 [0] NCCL INFO x")
    k.compiled()
    assert k.window is None
    buf = b"\n" + b"\n".join(lead + s for s in STARTS) + b"\n"
    got = _c(k, buf, 0, len(buf) - 1)
    assert got == _pure(k, buf, 0, len(buf) - 1)
    assert len(got) == len(STARTS) - 3  # the plain lines of gpu-node-007: INFO, INFO and a tab, WARN


def test_a_late_line_of_a_new_host_is_found():
    """One line of an unknown host among 200,000 lines of known ones, where the windows before it all
    matched: it is handed on, and so is each line that shares its window."""
    k = _known([b"gpu-node-007", b"gpu-node-017"])
    line = b"gpu-node-007:4011:555 [3] NCCL INFO AllReduce: opCount 0 sendbuff 0x0 count 1\n"
    new = b"gpu-node-018:4011:555 [3] NCCL INFO Using network IB\n"
    buf = b"\n" + line * 100_000 + new * 2 + line * 100_000
    at = 1 + len(line) * 100_000
    assert _c(k, buf, 0, len(buf) - 1) == [at, at + len(new)] == _pure(k, buf, 0, len(buf) - 1)
