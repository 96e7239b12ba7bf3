"""Property tests: whatever is done to a real log, or to the lines of every shape of the catalogue,
parse_file returns the schema and never raises."""

from __future__ import annotations

import json

from catalogue_lines import shapes, text
from conftest import DATA
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hpcbench.parse import parse_file

LOGS = sorted((DATA / "logs").glob("*.log"))
SHAPE_TEXTS = [text(s).encode() for s in shapes()]  # each shape's lines, as its release prints them
SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
NCCL_KEYS = {"version", "network", "transports", "hosts", "nranks", "nvls_used", "collnet_used", "edges", "warnings"}


def check_schema(d: dict) -> None:
    json.dumps(d)  # all of it serialisable
    assert set(d) >= {"file", "nccl", "nccl_tests", "horovod", "records", "hosts", "warnings"}
    assert all(isinstance(w, str) for w in d["warnings"])
    n = d["nccl"]
    if n is not None:
        assert set(n) >= NCCL_KEYS
        assert n["transports"] == sorted(set(n["transports"])) and n["hosts"] == sorted(set(n["hosts"]))
        for e in n["edges"]:
            assert isinstance(e["src"], int) and isinstance(e["dst"], int) and isinstance(e["channel"], int)
            assert e["scope"] in ("intra", "inter", None)
    t = d["nccl_tests"]
    if t is not None:
        for r in t["rows"]:  # rccl-tests may print the in-place side only
            assert isinstance(r["size"], int) and isinstance(r["oop_busbw" if r["oop_busbw"] is not None else "ip_busbw"], float)
    h = d["horovod"]
    if h is not None:
        assert set(h) >= {"total_img_sec", "per_gpu_img_sec", "num_gpus"}


def mutate(data: bytes, op: str, at: float, blob: bytes) -> bytes:
    i = int(at * len(data))
    if op == "truncate":
        return data[:i]
    if op == "insert":
        return data[:i] + blob + data[i:]
    if op == "crlf":
        return data.replace(b"\n", b"\r\n")
    if op == "ansi":
        return data.replace(b"NCCL", b"\x1b[1;31mNCCL\x1b[0m").replace(b"\n", b"\x1b[0m\n")
    if op == "huge_line":
        return data[:i] + b"x" * (3 << 20) + data[i:]
    if op == "invalid_utf8":
        return data[:i] + b"\xff\xfe\xc3\x28\xa0\xa1" + data[i:]
    if op == "nul":
        return data.replace(b" ", b"\x00", 5)
    if op == "empty":
        return b""
    if op == "join":  # two lines as one: a second prefix glued on
        j = data.find(b"\n", i)
        return data if j < 0 else data[:j] + data[j + 1:]
    if op == "untag":  # a pre-2.3 line among 2.3+ ones
        j = data.find(b"NCCL ", i)
        return data if j < 0 else data[:j] + data[j + 5:]
    if op == "reprefix":  # a line's first bytes printed twice: a malformed prefix that starts with its host
        j = data.rfind(b"\n", 0, i) + 1
        return data[:j] + data[j:j + 1 + len(blob) % 24] + data[j:]
    if op == "dup_lines":
        lines = data.split(b"\n")
        return b"\n".join(lines[: i % (len(lines) or 1)] * 3 + lines)
    return data


OPS = st.lists(st.tuples(st.sampled_from(["truncate", "insert", "crlf", "ansi", "huge_line", "invalid_utf8", "nul",
                                          "empty", "dup_lines", "join", "untag", "reprefix"]),
                         st.floats(0, 1), st.binary(max_size=200)), min_size=1, max_size=3)


@SETTINGS
@given(st.lists(st.sampled_from(SHAPE_TEXTS), min_size=1, max_size=12), OPS)
def test_mutated_catalogue_lines_never_raise(tmp_path, lines, ops):
    data = b"".join(lines)
    for op, at, blob in ops:
        data = mutate(data, op, at, blob)
    p = tmp_path / "shapes.log"
    p.write_bytes(data)
    check_schema(parse_file(p))


@SETTINGS
@given(st.sampled_from(LOGS), OPS)
def test_mutated_real_logs_never_raise(tmp_path, log, ops):
    data = log.read_bytes()
    for op, at, blob in ops:
        data = mutate(data, op, at, blob)
    p = tmp_path / "mutated.log"
    p.write_bytes(data)
    check_schema(parse_file(p))


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.binary(max_size=4000))
def test_arbitrary_bytes_never_raise(tmp_path, data):
    p = tmp_path / "bytes.log"
    p.write_bytes(data)
    check_schema(parse_file(p))


def test_a_ten_megabyte_line_and_an_empty_file(tmp_path):
    big = tmp_path / "big.log"
    big.write_bytes(b"h:1:1 [0] NCCL INFO Using network IB\n" + b"y" * (10 << 20) + b"\nh:1:1 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC\n")
    d = parse_file(big)
    check_schema(d)
    assert d["nccl"]["network"] == "IB" and d["nccl"]["transports"] == ["P2P/IPC"]
    assert any("were cut" in w for w in d["warnings"])
    empty = tmp_path / "empty.log"
    empty.write_bytes(b"")
    e = parse_file(empty)
    check_schema(e)
    assert e["warnings"] == ["empty file"] and e["nccl"] is None


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.sampled_from(LOGS), OPS, st.sampled_from([700, 2048, 9000]))
def test_the_engines_agree_on_mutated_logs(tmp_path, monkeypatch, log, ops, chunk):
    """Forced on every chunk of a mutated real log, the fast path writes the same JSON with the C scanner
    and without, and gives what the line path gives."""
    from hpcbench.parse import fastpath, scan
    from hpcbench.parse.commands import _dumps

    data = log.read_bytes()
    for op, at, blob in ops:
        data = mutate(data, op, at, blob)
    p = tmp_path / "mutated.log"
    p.write_bytes(data)
    line = parse_file(p)
    with monkeypatch.context() as m:
        m.setattr(scan, "CHUNK", chunk)
        m.setattr(scan, "FAST_MIN", 0)
        m.setattr(fastpath, "nccl_dominated", lambda *a: True)
        m.setattr(fastpath, "OTHERS_MAX", 1.0)
        c = parse_file(p)
        m.setattr(fastpath, "_scan", None)
        py = parse_file(p)
    assert _dumps([c]) == _dumps([py])
    assert c == line
