"""One parser whatever the install: `hpcbench parse --format json` writes the same bytes with the C scanner
(_scan.c) and with the pure-Python passes (HPCBENCH_PARSE_C=0), and both give what the line path gives: on
every corpus file, on generated 1024-rank logs, and on lines that once told the engines apart (README,
"known gaps"). test_logs_fuzz.py compares them on mutated logs too."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from conftest import DATA, REPO
from test_logs_fastpath import CORPUS, _bench_log, _fast_and_line

from hpcbench.parse import fastpath, nccl
from hpcbench.parse.commands import _dumps

LOGS = DATA / "logs"


def _cli_json(files: list, c: str) -> str:
    env = {**os.environ, "PYTHONPATH": str(REPO), fastpath.C_ENV: c}
    return subprocess.run([sys.executable, "-m", "hpcbench", "parse", *map(str, files), "--format", "json"], env=env,
                          cwd=REPO, capture_output=True, text=True, check=True).stdout


def test_the_c_scanner_is_built_here():
    assert fastpath._scan is not None, "hpcbench/parse/_scan.c is not built: pip install -e . where a C compiler is"


def test_hpcbench_parse_writes_the_same_json_on_every_corpus_file():
    files = [LOGS / name for name in CORPUS]
    c = _cli_json(files, "1")
    assert len(json.loads(c)) == len(files) > 100
    assert c == _cli_json(files, "0")


def test_hpcbench_parse_writes_the_same_json_on_a_1024_rank_log(tmp_path):
    """Big enough for the fast path (chunks of 2 MiB), in one process and with worker processes."""
    from test_logs_fastpath import _bench_module

    p = tmp_path / "job.log"
    _bench_module().generate(p, 12 << 20, nodes=128)
    c = _cli_json([p], "1")
    doc = json.loads(c)[0]
    assert doc["nccl"]["nranks"] == 1024 and len(doc["nccl"]["hosts"]) == 128
    assert c == _cli_json([p], "0")


def test_hpcbench_parse_writes_the_same_json_on_a_log_with_training_prints(tmp_path):
    """The benchmark's interleaved log (real NCCL lines of the corpus for 1024 ranks, real training prints after
    1 line in 100): the same bytes from both engines, and no print glued onto an NCCL fact."""
    from test_logs_fastpath import _bench_module

    p = tmp_path / "job.log"
    _bench_module().interleaved(p, 12 << 20, nodes=128, share=0.01)
    c = _cli_json([p], "1")
    doc = json.loads(c)[0]
    assert doc["nccl"]["nranks"] == 1024 and len(doc["nccl"]["hosts"]) == 128 and doc["hpcbench"]
    prints = tuple(_bench_module().corpus_lines()[3])
    assert not any(t.endswith(prints) for t in doc["nccl"]["transports_raw"])  # none glued onto an edge line
    assert c == _cli_json([p], "0")


def _engines(path, monkeypatch, chunk: int, fast_min: int) -> tuple[str, str, str, int]:
    """The JSON of the C engine's fast path, of the pure one's, and of the line path; the chunks that both
    engines read by the fast path."""
    fast_c, line, taken = _fast_and_line(path, monkeypatch, chunk, fast_min)
    with monkeypatch.context() as m:
        m.setattr(fastpath, "_scan", None)
        fast_py, _, taken_py = _fast_and_line(path, monkeypatch, chunk, fast_min)
    return _dumps([fast_c]), _dumps([fast_py]), _dumps([line]), min(taken, taken_py)


def test_both_engines_on_every_corpus_file_in_small_chunks(monkeypatch):
    """Each corpus file in 2 KiB chunks, every chunk through the fast path when it has two lines or more."""
    monkeypatch.setattr(fastpath, "nccl_dominated", lambda *a: True)
    monkeypatch.setattr(fastpath, "OTHERS_MAX", 1.0)
    differ, taken = [], 0
    for name in CORPUS:
        c, py, line, n = _engines(LOGS / name, monkeypatch, 2048, 0)
        taken += n
        if not c == py == line:
            differ.append(name)
    assert differ == []
    assert taken > 100


# Lines printed after the benchmark's log has shown every host and message: (the line, what it must add).
# The C scanner alone once read the lines with no NCCL tag or two; the pure passes also took a message
# after a second tag for read; neither engine read the malformed prefixes.
ODD_LINES = {
    "a second prefix glued on, of a host seen nowhere else": (
        b"gpu-node-002:1:1 [0] NCCL INFO gpu-node-0zz:2:2 [1] NCCL INFO AllReduce: opCount 1 count 1",
        lambda n: "gpu-node-0zz" in n["hosts"]),
    "a bare pre-2.3 INFO line of a known host, with a transport seen nowhere else": (
        b"gpu-node-002:3:4 [1] INFO Ring 00 : 17[1] -> 18[2] via P2P/CUMEM",
        lambda n: "P2P/CUMEM" in n["transports"]),
    "a second prefix glued on in the pre-2.3 form": (
        b"gpu-node-002:1:1 [0] NCCL INFO gpu-node-0zz:2:2 [1] INFO AllReduce: opCount 1 count 1",
        lambda n: "gpu-node-0zz" in n["hosts"]),
    "a malformed prefix that starts with a known host": (
        b"gpu-node-001:12:gpu-node-0zy:3:4 [0] NCCL INFO AllReduce: opCount 1 count 1",
        lambda n: "gpu-node-0zy" in n["hosts"]),
    "a message first seen after a second tag, where the line path does not read it": (
        b"gpu-node-001:1:1 [0] NCCL INFO cudaDev 1 nvmgpu-node-002:2:2 [1] NCCL INFO Ring 00 : 0[0] -> 9[1] via P2P/CUMEM\n"
        b"gpu-node-003:1:1 [0] NCCL INFO Ring 00 : 0[0] -> 9[1] via P2P/CUMEM",
        lambda n: "P2P/CUMEM" in n["transports"]),
}


@pytest.mark.parametrize("case", sorted(ODD_LINES))
def test_lines_that_told_the_engines_apart(tmp_path, monkeypatch, case):
    line, shows = ODD_LINES[case]
    data = _bench_log(tmp_path / "bench.log")
    at = data.index(b"\n", data.index(b"AllReduce", int(len(data) * 0.9))) + 1  # after a chatter line
    p = tmp_path / "odd.log"
    p.write_bytes(data[:at] + line + b"\n" + data[at:])
    c, py, slow, taken = _engines(p, monkeypatch, 256 << 10, 64 << 10)
    assert taken >= 10 and shows(json.loads(slow)[0]["nccl"])
    assert c == py == slow


def test_parse_json_is_what_json_reads_back(tmp_path):
    """`hpcbench parse --format json` writes edges one a line from a format string (commands._edges_json): json
    reads back exactly the objects parse_file made, with hosts and scopes of None, quotes, backslashes and
    non-ASCII in a transport; edges of another shape go through json's encoder, and read back as well."""
    from hpcbench.parse import parse_file

    docs = [parse_file(LOGS / name) for name in CORPUS[:60]]
    edges = [e for d in docs for e in (d["nccl"] or {}).get("edges") or []]
    assert len(edges) > 100 and {tuple(e) for e in edges} == {nccl.EDGE_FIELDS}  # the shape it writes fast
    odd = {"channel": 2, "src": 0, "dst": 10**20, "transport": 'NET/"x"\\y', "raw": "caf\u00e9 \u2603", "host": None,
           "scope": None}
    docs.append({"file": "odd", "nccl": {"edges": [odd, {**odd, "host": "h", "scope": "intra"}]}})
    docs.append({"file": "shape", "nccl": {"edges": [{**odd, "extra": [1, {"a": None}]}, odd]}})
    text = _dumps(docs)
    assert json.loads(text) == docs
    listed = text.split('"edges": [\n')[1:]  # the non-empty lists: one edge a line, each an object
    assert len(listed) >= 3
    for block in listed:
        edges = block.split("\n   ]")[0].split("\n")
        assert all(e.startswith('    {"channel": ') and e.endswith(("},", "}")) for e in edges)
