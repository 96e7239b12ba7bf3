"""The C scanner (hpcbench/parse/_scan.c) does what the pure-Python passes of fastpath.py do: it finds the
messages fastpath.MSG finds, the lines whose prefix known.TAIL refuses, the heads and tail of the lines'
windows that known.unknown_from_runs tests, refuses the
bytes ``fastpath.plain`` refuses, samples like ``nccl_dominated``; its set of messages keeps what it
should, takes back a refused span's, and skips a rank's init line of another communicator only when it
differs from one read in its 0x numbers alone."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import platform
import re
import subprocess
import sysconfig

import pytest
from conftest import REPO
from hypothesis import given, settings
from hypothesis import strategies as st

from hpcbench.parse import fastpath, known, nccl, prefixes

_scan = fastpath._scan
MSG_START = re.compile(rb"NCCL INFO[ \t]")

# Pieces of lines: prefixes of known and other hosts, NCCL tags of each level and blank, the starts of
# messages that carry a fact, init lines that differ in their 0x numbers or their ranks, chatter, bytes
# the line path cleans, and noise.
PIECES = [b"gpu-node-007:12:34 [0] ", b"gpu-node-017:9:9 [3] ", b"s4:1:1 [1] ", b"[1,0]<stdout>:", b"NCCL INFO ",
          b"gpu-node-007:12:", b"s4:1:1 ", b"[0] ", b"s4:1", b"INFO ", b"misc/socket.cc:484 ",
          b"NCCL INFO\t", b"NCCL WARN ", b"NCCL  INFO ", b"NCCL INFO", b"NCCL ", b"N", b"NCC", b"Channel 00/0 : 0[0] -> 1[1] via P2P/IPC",
          b"Using network IB", b"NET/IB : Using [0]mlx5_0:1/IB", b"Connected all rings", b"16 coll channels",
          b"rank 3 nranks 8", b"comm 0x55d0a rank 3 nranks 8 cudaDev 3 - Init COMPLETE",
          b"comm 0x7f00 rank 3 nranks 8 cudaDev 3 - Init COMPLETE", b"comm 0x rank 3 nranks 8",
          b"ncclCommInitRank comm 0xab rank 4 nranks 8 commId 0x1f - Init START", b"[Rank 2] ", b"Init timings: rank 1 nranks 2",
          b"AllReduce: opCount 3 count 1", b"Cuda failure 'out of memory'", b"caf\xc3\xa9", b"\x1b[0m", b"\r", b"\x00",
          b" ", b"x", b"0x1f",
          # training prints, and the ends of NCCL lines they may be the rest of
          b"step 1: loss 0.5", b"Iter #3: 601.7 img/sec per GPU", b"training...", b"Epoch ", b"===", b"\t", b"/sec",
          b"hpcbench.result/", b" via NET/IB/1/GDRDMA", b" via P2P/IPC/read", b" via NET/IB/1/GDR", b"/GDRDMA", b" : ",
          b"(PCI)", b"via  ", b"x" * 80]
LINES = st.lists(st.sampled_from(PIECES), max_size=6).map(b"".join)
FACTS = [p.encode() for p in nccl.FACT_PREFIXES]
VOLATILES = [p.encode() for p in nccl.INIT_STARTS]


def test_the_scanner_is_built_here():
    """`pip install -e .` builds it where a C compiler and Python's headers are (setup.py); CI has both."""
    assert _scan is not None, "hpcbench/parse/_scan.c is not built: pip install -e . where a C compiler is"
    assert isinstance(fastpath.Seen().c, _scan.Messages)


def _volatile(msg: bytes) -> bool:
    return MSG_START.match(msg) is not None and msg[10:].startswith(tuple(VOLATILES))


def _expected(buf: bytes, first: int, last: int, seen: set[bytes], width: int) -> tuple[list, list, list]:
    """found, warns and odd lines as fastpath's regexes give them; ``seen``: messages read before, which it
    adds to. A line with no NCCL tag or two is odd, and its message is not looked at; so is one whose prefix
    is not plain (with a width, nothing but its host before the tail), but its message is looked at."""
    found, warns, odd, two = [], [], [], []
    plain = re.compile((rb"[^:\n]*" if width else rb"[^\n]*?") + known.TAIL)
    starts = [first + 1] + [i + 1 for i in range(first + 1, last) if buf[i] == 10]
    for s in starts:
        e = buf.find(b"\n", s, last)
        line = buf[s:last if e < 0 else e]
        if _tags(line) != 1 or not plain.match(line):
            odd.append((s, last if e < 0 else e))
        if _tags(line) != 1:
            two.append(odd[-1])
    for m in fastpath.MSG.finditer(buf, first + 1, last):
        msg = m.group(0)
        s = buf.rfind(b"\n", 0, m.start()) + 1
        e = buf.find(b"\n", m.end(), last)
        if (s, last if e < 0 else e) in two:
            continue
        if msg.startswith(b"NCCL WARN"):
            warns.append(msg)
        if _volatile(msg) or msg not in seen:
            found.append((msg, s, last if e < 0 else e))
            if not _volatile(msg):
                seen.add(msg)
    return found, warns, odd


def _tags(line: bytes) -> int:
    """The "NCCL " tags of a line, each found from the 'N' after the last one's."""
    n, at = 0, line.find(b"NCCL ")
    while at >= 0:
        n, at = n + 1, line.find(b"NCCL ", at + 1)
    return n


def _windows(buf: bytes, first: int, last: int, width: int, good: set[bytes], prints: set[int]) -> tuple[list, list[int]]:
    """Runs of lines that share a window, but those of the windows in ``good``; the lines with no window. A print
    is in no run: it ends the one before it."""
    runs, tail, head = [], [], None
    for s in [i + 1 for i in range(first, last) if buf[i] == 10] + [last + 1]:
        if head is not None and (s > last or s in prints or s + width > len(buf) or buf[s:s + width] != buf[head:head + width]):
            if buf[head:head + width] not in good:
                runs.append((head, s))
            head = None
        if s > last or s in prints:
            continue
        if s + width > len(buf):
            tail.append(s)
        elif head is None:
            head = s
    return runs, tail


def _sound(buf: bytes, first: int, prints: list[tuple[int, int]]) -> None:
    """Each print is one the line path reads alone: no NCCL tag, printable, no launcher tag, not the rest of the
    line before it (whatever the line before that), and continued by no line (it has no tag)."""
    for s, e in prints:
        line = buf[s:e].decode()
        assert _tags(buf[s:e]) == 0 and line.replace("\t", " ").isprintable() and "<std" not in line
        prev = buf[buf.rfind(b"\n", 0, s - 1) + 1:s - 1].decode()
        assert not prefixes.continues(prev, line, 0), (prev, line)
        assert s - 1 != first or prefixes.own_line(line)  # the line before the first is not known to the scanner


def _span(lines: list[bytes]) -> tuple[bytes, int, int]:
    buf = b"\n".join(lines)
    return buf, buf.find(b"\n"), buf.rfind(b"\n")


@settings(max_examples=400, deadline=None)
@given(st.lists(st.lists(LINES, min_size=2, max_size=25), min_size=1, max_size=4), st.integers(0, 30),
       st.lists(st.sampled_from(PIECES), max_size=3))
def test_scan_finds_what_the_regexes_find(spans, width, good_starts):
    """Span after span, with the messages of the ones before known and some windows judged good: the same
    messages, WARNs, runs of windows and refusals; and ``dominated`` answers as ``nccl_dominated`` does."""
    m, cut = fastpath.compiled_messages(), fastpath.compiled_messages()
    seen: set[bytes] = set()
    good = {g[:width] for g in good_starts if width and len(g) >= width}
    strings = _scan.Strings(100, 1 << 16)
    for g in good:
        strings.add(g)
    for lines in spans:
        buf, first, last = _span(lines)
        assert _scan.dominated(buf, 0, len(buf)) == _pure_dominated(buf)
        if first == last:
            continue
        got = m.scan(buf, 0, len(buf), first, last, width, strings)
        if not fastpath.plain(buf, 0, len(buf)):
            assert got is None
            continue
        found, warns, runs, tail, odd, prints = got
        _edges_cut(buf, found, got, cut.scan(buf, 0, len(buf), first, last, width, strings, True), width)
        want_found, want_warns, want_odd = _expected(buf, first, last, seen, width)
        assert (found, warns) == (want_found, want_warns)
        assert sorted(odd + prints) == want_odd  # a print is a line with no tag, handed on alone
        _sound(buf, first, prints)
        if width:
            assert (runs, tail) == _windows(buf, first, last, width, good, {s for s, _ in prints})
        else:
            assert runs == tail == prints == []


def _edges_cut(buf: bytes, found: list, got: tuple, with_edges: tuple, width: int) -> None:
    """scan with cut_edges hands back the same, but for the new messages that are edges of bare plain lines
    (with a width), which it hands back cut as _scan.edge cuts their lines, the numbers as ints, each with no
    NOT_EDGE mark in its message; the others stay in found."""
    assert with_edges[1:6] == got[1:] and (width or not with_edges[6])
    edges = {e[0]: e for e in with_edges[6]}
    assert [f for f in found if f[1] not in edges] == with_edges[0]
    for f in found:
        s, e = f[1], f[2]
        cut = _scan.edge(buf[s:e])
        if s not in edges:
            assert not width or cut is None or any(k in cut[1] for k in nccl.NcclState.NOT_EDGE) or max(len(x or "") for x in cut[2:5]) > 18
            continue
        host, msg, ch, a, b, direction, raw = cut
        assert edges[s] == (s, host, msg, int(ch), int(a), None if b is None else int(b), direction, raw)
        assert not any(k in msg for k in nccl.NcclState.NOT_EDGE)


def _pure_dominated(buf: bytes) -> bool:
    saved, fastpath._scan = fastpath._scan, None
    try:
        return fastpath.nccl_dominated(buf, 0, len(buf))
    finally:
        fastpath._scan = saved


def _msgs(n: int, tag: str) -> list[bytes]:
    return [f"h:1:1 [0] NCCL INFO Channel {i % 32:02d}/0 : {i}[0] -> {tag}{i + 1}[1] via P2P/IPC".encode() for i in range(n)]


def _found(m, lines: list[bytes]) -> list[bytes]:
    buf = b"\n" + b"\n".join(lines) + b"\n"
    got = m.scan(buf, 0, len(buf), 0, len(buf) - 1, 0)
    return [f[0][f[0].index(b"Channel"):] for f in got[0]]


def _text(lines: list[bytes]) -> list[bytes]:
    return [line[line.index(b"Channel"):] for line in lines]


def test_a_rolled_back_span_is_as_if_never_scanned():
    """Thousands of messages, so that taking them out moves chains of slots back: what the span before
    added stays, what the rolled-back one added is new again, and the set still finds every message."""
    m = fastpath.compiled_messages()
    a, b = _msgs(3000, "a"), _msgs(3000, "b")
    assert _found(m, a) == _text(a)
    assert _found(m, b) == _text(b)
    m.rollback()
    assert len(m) == 3000
    assert _found(m, a + b) == _text(b)  # b is new again, a is not
    assert _found(m, a + b) == []
    assert len(m) == 6000


def test_a_span_with_a_byte_to_clean_keeps_nothing():
    m = fastpath.compiled_messages()
    a = _msgs(100, "a")
    buf = b"\n" + b"\n".join(a + [b"h:1:1 [0] NCCL INFO Using network IB\r"]) + b"\n"
    assert m.scan(buf, 0, len(buf), 0, len(buf) - 1, 0) is None
    assert len(m) == 0 and _found(m, a) == _text(a)


def test_a_full_set_starts_again_and_hands_on_more_never_less():
    m = _scan.Messages(FACTS, VOLATILES, 50, 1 << 20)
    a = _msgs(120, "a")
    assert _found(m, a) == _text(a)
    assert len(m) <= 50
    again = _found(m, a)
    assert 0 < len(again) <= 120 and set(again) <= set(_text(a))
    small = _scan.Messages(FACTS, VOLATILES, 10_000, 500)  # bytes, not entries, bound it
    assert _found(small, a) == _text(a) and len(small) < 10


INIT = b"NCCL INFO comm 0x55d0a rank 3 nranks 8 cudaDev 3 busId 4000 commId 0x9e1 - Init COMPLETE"


@pytest.mark.parametrize(("line", "skipped"), [
    (INIT, True),
    (INIT.replace(b"0x55d0a", b"0x7f3aa00").replace(b"0x9e1", b"0xb"), True),  # another communicator
    (INIT.replace(b"rank 3", b"rank 4"), False),
    (INIT.replace(b"nranks 8", b"nranks 16"), False),
    (INIT.replace(b"busId 4000", b"busId 5000"), False),  # decimal and bare hex: compared as they are
    (INIT.replace(b"0x55d0a", b"0x"), False),  # no digits: not a number to mask
    (INIT.replace(b"0x55d0a", b"0x55d0a0x1"), False),
])
def test_init_lines_differ_per_communicator_in_their_0x_numbers_only(line, skipped):
    m = fastpath.compiled_messages()
    m.add_inits([INIT])
    buf = b"\nh:1:1 [0] " + line + b"\n"
    found = m.scan(buf, 0, len(buf), 0, len(buf) - 1, 0)[0]
    assert (found == []) is skipped
    assert [f[0] for f in found] == ([] if skipped else [line])


@settings(max_examples=300, deadline=None)
@given(st.from_regex(nccl.INIT_MSG, fullmatch=True))
def test_every_init_line_starts_as_the_scanner_knows(msg):
    """The scanner tells init lines by INIT_STARTS; every message INIT_MSG reads starts so."""
    assert msg.startswith(nccl.INIT_STARTS)


def test_bad_arguments_raise_not_crash():
    m = fastpath.compiled_messages()
    with pytest.raises(ValueError):
        m.scan(b"ab\ncd\n", 0, 6, 4, 2, 0)
    with pytest.raises(ValueError):
        m.scan(b"ab\ncd\n", 0, 99, 2, 5, 0)
    with pytest.raises(TypeError):
        m.add_inits([b"x", "not bytes"])
    with pytest.raises(ValueError):
        _scan.Messages(FACTS, VOLATILES, 0, 10)
    with pytest.raises(TypeError):
        m.scan(b"a\nb\n", 0, 4, 0, 3, 1, {b"a"})  # a Strings, not a set
    s = _scan.Strings(2, 100)
    s.add(b"ab")
    assert b"ab" in s and b"a" not in s and "ab" not in s and len(s) == 1
    with pytest.raises(TypeError):
        s.add(b"")


@settings(max_examples=500, deadline=None)
@given(st.binary(max_size=400), st.data())
def test_any_bytes_and_bounds_never_crash(data, draw):
    """Whatever the bytes and wherever the span: a tuple, None, or a ValueError for bounds out of order."""
    m = fastpath.compiled_messages()
    n = len(data)
    lo, first, last, hi = sorted(draw.draw(st.lists(st.integers(0, max(n - 1, 0)), min_size=4, max_size=4)))
    width = draw.draw(st.integers(0, 40))
    if n == 0:
        with pytest.raises(ValueError):
            m.scan(data, 0, 0, 0, 0, width)
        return
    got = m.scan(data, lo, hi, first, last, width, _scan.Strings(10, 1000))
    assert got is None or len(got) == 6
    assert _scan.dominated(data, lo, hi) in (True, False)


def _build(d, name: str, *flags: str):
    """_scan.c built as the module ``name``, with these compiler flags."""
    src = d / f"{name}.c"
    src.write_text((REPO / "hpcbench/parse/_scan.c").read_text()
                   .replace("PyInit__scan(", f"PyInit_{name}(").replace('"_scan", NULL', f'"{name}", NULL'))
    so = d / (name + sysconfig.get_config_var("EXT_SUFFIX"))
    cc = (sysconfig.get_config_var("CC") or "cc").split()
    subprocess.run([*cc, "-O2", "-std=c99", "-shared", "-fPIC", *flags, f"-I{sysconfig.get_paths()['include']}",
                    str(src), "-o", str(so)], check=True, capture_output=True)
    spec = importlib.util.spec_from_file_location(name, so, loader=importlib.machinery.ExtensionFileLoader(name, str(so)))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def portable(tmp_path_factory):
    """_scan.c built as where there is no SSE2 (ARM): memchr and a byte test where x86 has one vector pass."""
    return _build(tmp_path_factory.mktemp("portable"), "_scan_portable", "-U__SSE2__")


@pytest.fixture(scope="module")
def sse2(tmp_path_factory):
    """_scan.c built without its AVX2 pass, as it runs on an x86-64 CPU without AVX2: 16 bytes a step, not 32."""
    return _build(tmp_path_factory.mktemp("sse2"), "_scan_sse2", "-DSCAN_NO_AVX2")


def test_the_avx2_pass_runs_where_the_cpu_has_it(sse2):
    # x86-64 always has SSE2, and AVX2 where its flags say so; elsewhere (ARM) the build has neither: memchr
    x86 = platform.machine() in ("x86_64", "AMD64")
    flags = re.search(r"^flags\s*:(.*)$", open("/proc/cpuinfo").read(), re.M)
    assert sse2.LINES == ("sse2" if x86 else "memchr")
    assert _scan.LINES == ("memchr" if not x86 else "avx2" if flags and " avx2" in flags.group(1) else "sse2")


@settings(max_examples=300, deadline=None)
@given(st.lists(st.lists(LINES, min_size=2, max_size=25), min_size=1, max_size=4), st.integers(0, 30))
def test_the_portable_build_scans_alike(portable, sse2, spans, width):
    ours = fastpath.compiled_messages()
    others = [m.Messages(FACTS, VOLATILES, fastpath.SEEN_MAX, fastpath.SEEN_BYTES,
                         [k.encode() for k in prefixes.NOT_CONTINUATIONS], prefixes.WRAP_MIN) for m in (portable, sse2)]
    for lines in spans:
        buf, first, last = _span(lines)
        if first != last:
            got = ours.scan(buf, 0, len(buf), first, last, width)
            assert all(got == theirs.scan(buf, 0, len(buf), first, last, width) for theirs in others)


# Pieces of edge lines: prefixes, the shapes of every part EDGE reads, and what breaks each
EDGE_PIECES = [b"gpu-node-007:12:34 [0] NCCL INFO ", b"10.0.0.1:1:1 [0] NCCL INFO ", b"7:1:1 [1] NCCL INFO\t", b"s4:1:1 [0] NCCL WARN ",
               b"Channel ", b"Ring ", b"Channel", b"00", b"/0", b"/", b" : ", b" :", b"3", b"[3]", b"[", b"]", b" -> ", b" ->",
               b" [send]", b" [receive]", b" [sen]", b" via ", b" via", b"via ", b"\tvia\t", b"P2P/IPC/read", b"NET/IB/0/GDRDMA",
               b"NET/IB : Using [0]mlx5_0:1/IB", b"Using", b"nvls", b"  ", b"\t", b"x", b"NCCL ", b"<stdout>", b"\x0b", b"caf\xc3\xa9"]


EDGE_LINES = st.one_of(
    st.lists(st.sampled_from(EDGE_PIECES), min_size=1, max_size=14).map(b"".join),
    st.tuples(st.sampled_from(EDGE_PIECES[:4]), st.sampled_from([b"Channel ", b"Ring "]),
              st.lists(st.sampled_from(EDGE_PIECES), max_size=5), st.sampled_from([b" via ", b"  via\t", b"via "]),
              st.lists(st.sampled_from(EDGE_PIECES), max_size=3))
    .map(lambda t: t[0] + t[1] + b"00/0 : 3[3] -> 4[4]" + b"".join(t[2]) + t[3] + b"".join(t[4])))


@settings(max_examples=1000, deadline=None)
@given(EDGE_LINES)
def test_an_edge_cut_in_c_is_what_the_regexes_read(line):
    """_scan.edge, where it cuts a line, gives clean's host and message and EDGE's match of that message at its
    start, groups and all (the line path reads it so); a line it leaves is read as any other."""
    got = _scan.edge(line)
    if got is None:
        return
    text = line.decode()
    ln = prefixes.clean(text)
    assert (ln.level, prefixes.host_name(got[0]), got[1]) == ("INFO", ln.host, ln.msg)
    m = nccl.EDGE.match(ln.msg)
    assert m is not None and m.group(0) == ln.msg and m.groups() == got[2:]


def test_the_edges_of_a_job_are_cut_in_c():
    """The edge lines of the corpus's plain logs and their shapes: each is cut, as EDGE reads it."""
    lines = [b"gpu-node-007:12:34 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC/read",
             b"gpu-node-007:12:34 [0] NCCL INFO Channel 01/0 : 0[0] -> 8[0] [send] via NET/IB/1/GDRDMA  ",
             b"gpu-node-007:12:34 [0] NCCL INFO Ring 00 : 7[7] -> 0[0] [receive] via NET/IB/0",
             b"gpu-node-007:12:34 [0] NCCL INFO Channel 02 : 3 -> 4 via SHM/direct/direct",
             b"gpu-node-007:12:34 [0] NCCL INFO Channel 03/1 : 3[3] via P2P/direct pointer"]
    for line in lines:
        got = _scan.edge(line)
        msg = prefixes.clean(line.decode()).msg
        assert got is not None and got[2:] == nccl.EDGE.match(msg).groups(), line


def test_scan_hands_back_new_edges_cut():
    """With cut_edges, the new messages that are edges of bare plain lines come back cut (in file order, as
    _scan.edge cuts them); a copy read before, an edge whose message holds another fact's mark, one with a
    number too long for the C scanner's ints and the lines that are not bare stay as they were."""
    p = b"gpu-node-007:12:34 [0] NCCL INFO "
    lines = [p + b"Using network IB",
             p + b"Channel 00/0 : 0[0] -> 1[1] via P2P/IPC/read",
             p + b"Channel 01/0 : 0[0] -> 8[0] [send] via NET/IB/1/GDRDMA  ",
             p + b"Channel 00/0 : 0[0] -> 1[1] via P2P/IPC/read",  # a copy: read before
             p + b"Ring 00 : 7[7] -> 0[0] [receive] via NET/IB/0",
             p + b"Channel 03/1 : 3[3] via P2P/direct pointer",
             p + b"Channel 04/0 : 3[3] -> 4[4] via NET/IB/0 nvls",  # a NOT_EDGE mark: read as any line
             p + b"Channel 05/0 : 1234567890123456789[0] -> 4[4] via SHM",  # 19 digits
             b"[1,0]<stdout>:" + p + b"Channel 06/0 : 3[3] -> 4[4] via SHM",  # not bare
             p + b"Connected all rings"]
    buf, first, last = _span([b"head"] + lines + [b"tail"])
    width = len(b"gpu-node-007:1")
    got = fastpath.compiled_messages().scan(buf, 0, len(buf), first, last, width, None)
    cut = fastpath.compiled_messages().scan(buf, 0, len(buf), first, last, width, None, True)
    _edges_cut(buf, got[0], got, cut, width)
    assert [(e[3], e[4], e[5], e[6], e[7]) for e in cut[6]] == [
        (0, 0, 1, None, "P2P/IPC/read"), (1, 0, 8, "send", "NET/IB/1/GDRDMA"), (0, 7, 0, "receive", "NET/IB/0"),
        (3, 3, None, None, "P2P/direct pointer")]
    assert [f[0][10:20] for f in cut[0]] == [b"Using netw", b"Channel 04", b"Channel 05", b"Channel 06", b"Connected "]


# A job's lines as the rank prediction reads them (_scan.c's Rank): ranks that print their own sequence of messages in
# every communicator, with messages that every rank prints among them; bare lines (the host first), so width > 0.
RANK_MSGS = [b"NCCL INFO Using network IB", b"NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [RO]", b"NCCL INFO Connected all rings",
             b"NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC/read", b"NCCL INFO Channel 01/0 : 1[1] -> 2[2] via SHM"]


def _rank_line(rank: int, msg: bytes, tid: int = 1) -> bytes:
    return f"node{rank % 3}:{100 + rank}:{tid} [{rank % 8}] ".encode() + msg


def _scan_lines(m, lines: list[bytes]) -> list[bytes]:
    """The messages scan finds new in ``lines`` (with windows: a line's first 7 bytes)."""
    buf = b"\n" + b"\n".join(lines) + b"\n"
    return [f[0] for f in m.scan(buf, 0, len(buf), 0, len(buf) - 1, 7)[0]]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["scan", "rollback", "forget"]),
                          st.lists(st.tuples(st.integers(0, 5), st.lists(st.integers(0, 11), max_size=8)), max_size=6),
                          st.integers(0, 3)), max_size=8))
def test_a_rank_s_sequence_is_tried_first_and_never_stands_for_the_set(ops):
    """Blocks of lines of one rank each (its own and shared messages, a thread id per communicator), spans of them
    scanned, rolled back, messages forgotten: scan finds exactly the messages a set of those read so far lacks."""
    m = fastpath.compiled_messages()
    kept: set[bytes] = set()
    added: set[bytes] = set()
    for op, blocks, tid in ops:
        if op == "rollback":
            m.rollback()
            kept -= added
            added = set()
            continue
        lines = [_rank_line(r, RANK_MSGS[k] if k < len(RANK_MSGS) else f"NCCL INFO Ring {k:02d} : {r} -> {k} via SHM".encode(), tid)
                 for r, ks in blocks for k in ks]
        if op == "forget":
            for line in lines[:2]:
                msg = line[line.index(b"NCCL "):]
                m.forget(msg)
                kept.discard(msg)
            continue
        want = []
        for line in lines:
            msg = line[line.index(b"NCCL "):]
            if msg not in kept and msg not in want:
                want.append(msg)
        got = _scan_lines(m, lines)
        assert got == want
        kept |= set(got)
        added = set(got)


def test_a_rolled_back_rank_sequence_is_not_read_as_kept():
    """A rank read a then b, b was rolled back (the line path read that span): its sequence still leads from a to b,
    whose bytes still lie in the set's arena, and b is found new all the same."""
    m = fastpath.compiled_messages()
    a = [_rank_line(0, f"NCCL INFO Ring {k:02d} : 0 -> 1 via SHM".encode()) for k in range(40)]
    b = [_rank_line(0, f"NCCL INFO Ring {k:02d} : 0 -> 2 via SHM".encode()) for k in range(40)]
    assert len(_scan_lines(m, a)) == 40 and len(_scan_lines(m, b)) == 40
    m.rollback()
    assert _scan_lines(m, a + b) == [line[line.index(b"NCCL "):] for line in b]
    assert _scan_lines(m, a + b) == [] and len(m) == 80


def test_more_ranks_than_the_scanner_follows():
    """9,000 ranks, beyond the 8,192 whose sequences it keeps: every message is found once all the same."""
    m = fastpath.compiled_messages()
    lines = [_rank_line(r, f"NCCL INFO Ring 00 : {r} -> {r + 1} via SHM".encode()) for r in range(9000)]
    lines = [line.replace(b"node", b"n%d-" % (i // 3)) for i, line in enumerate(lines)]  # 3,000 hosts
    assert len(_scan_lines(m, lines)) == 9000
    assert _scan_lines(m, lines) == []


def test_a_rank_s_init_line_of_the_next_communicator():
    """Each rank's init line, again in the next communicator with other 0x numbers: skipped once read (add_inits, as
    fastpath does), found where its rank or nranks differs."""
    m = fastpath.compiled_messages()

    def init(r: int, comm: int, n: int = 8) -> bytes:
        return _rank_line(r, f"NCCL INFO comm 0x{comm}ab{r} rank {r} nranks {n} cudaDev {r} - Init COMPLETE".encode())

    first = _scan_lines(m, [init(r, 1) for r in range(8)])
    assert len(first) == 8
    m.add_inits(first)
    assert _scan_lines(m, [init(r, 2) for r in (3, 1, 0, 2, 7, 6, 5, 4)]) == []
    assert _scan_lines(m, [init(r, 3) for r in range(8)] + [init(4, 3, 16)]) == [init(4, 3, 16)[init(4, 3, 16).index(b"NCCL"):]]


def _heads_model(buf: bytes, lo: int, hi: int) -> list[int]:
    out, seen = [], set()
    for i in range(lo, hi):
        if buf[i:i + 1] != b"\n":
            continue
        s = i + 1
        line = buf[s:hi].split(b"\n", 1)[0][:64]
        head = line.split(b":", 1)[0]
        if head not in seen:
            seen.add(head)
            out.append(s)
    return out


@settings(max_examples=400, deadline=None)
@given(st.lists(LINES, max_size=30), st.data())
def test_heads_are_the_lines_whose_bytes_before_a_colon_are_new(lines, draw):
    buf = b"\n".join(lines)
    lo, hi = sorted(draw.draw(st.lists(st.integers(0, len(buf)), min_size=2, max_size=2)))
    assert _scan.heads(buf, lo, hi) == _heads_model(buf, lo, hi)


def test_heads_on_a_job_s_first_chunk_find_each_host_s_first_line():
    """known.newcomers reading only the heads learns every host of a plain log's first chunk, at the same lines."""
    for name in sorted((REPO / "tests/data/logs").glob("nccl_*.log"))[:40]:
        data = name.read_bytes()
        first, last = data.find(b"\n"), data.rfind(b"\n")
        if first < 0 or first == last:
            continue
        full, fast = known.Known(), known.Known()
        want = full.newcomers(data, first, last)
        got = fast.newcomers(data, first, last, _scan.heads(data, first, last))
        assert set(got) <= set(want), name
        if not full.stamped and not full.tags:
            assert got == want and fast.hosts == full.hosts, name


def test_init_again_forgets_the_ranks_sequences():
    """__init__ on a Messages again empties its sets, and the ranks' sequences with them (they held offsets into
    the sets' old bytes: reading them once crashed the process)."""
    m = fastpath.compiled_messages()
    lines = [_rank_line(0, f"NCCL INFO Ring {k:02d} : 0 -> 1 via SHM".encode()) for k in range(200)]
    assert len(_scan_lines(m, lines + lines[:1])) == 200
    m.__init__(FACTS, VOLATILES, fastpath.SEEN_MAX, fastpath.SEEN_BYTES)
    assert len(m) == 0 and len(_scan_lines(m, lines)) == 200
