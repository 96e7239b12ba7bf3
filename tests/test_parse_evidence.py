"""The lines that show parse's facts (hpcbench/parse/evidence.py), read in the same read as the facts: each
names the line a person finds at that number in the file, the same with and without the C scanner, and the
same however the file's bytes are cut into blocks."""
from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from dataclasses import asdict
from pathlib import Path

from conftest import REPO

from hpcbench.explain.rules.net import _SHOWN_BY
from hpcbench.parse import parse_file, read_log
from hpcbench.parse.evidence import HEAD_BYTES, SHAPES, Evidence, Reader, ranks_named

LOGS = REPO / "tests" / "data" / "logs"
CORPUS = sorted(LOGS.glob("*.log")) + sorted((REPO / "tests" / "data" / "allreduce").glob("*.log"))

DUMP = """
import json, sys
from dataclasses import asdict
from hpcbench.parse import fastpath
from hpcbench.parse.api import read_log
assert (fastpath._scan is not None) == (sys.argv[1] == "1"), "the C scanner is not built: pip install -e ."
out = {}
for f in sys.argv[2:]:
    ev = read_log(f).evidence
    out[f] = [asdict(ev)["first"], asdict(ev)["env"], asdict(ev)["affinity"], sorted(ev.gpus)]
print(json.dumps(out, sort_keys=True))
"""


def _dump(engine: str, files: list[Path]) -> str:
    env = dict(os.environ, HPCBENCH_PARSE_C=engine, PYTHONPATH=str(REPO))
    return subprocess.run([sys.executable, "-c", DUMP, engine, *map(str, files)], env=env, capture_output=True,
                          text=True, check=True).stdout


def _nccl_log(path: Path, lines: int) -> Path:
    """A log of corpus NCCL INFO lines, big enough that its chunks take the fast path (which skips lines)."""
    source = [ln for f in sorted(LOGS.glob("nccl_*.log")) for ln in f.read_text(errors="replace").splitlines()
              if "NCCL INFO" in ln]
    rng = random.Random(20)
    path.write_text("\n".join(rng.choice(source) for _ in range(lines)) + "\n")
    return path


def test_the_evidence_is_the_same_with_and_without_the_c_scanner(tmp_path):
    files = [*CORPUS, _nccl_log(tmp_path / "big.log", 30_000)]
    pure, compiled = _dump("0", files), _dump("1", files)
    assert pure == compiled
    assert len(json.loads(pure)[str(files[-1])][0]) >= 5  # the generated log shows most transport shapes


def test_every_evidence_line_is_the_line_at_its_number():
    checked = 0
    for f in CORPUS:
        lines = f.read_text(encoding="utf-8", errors="replace").splitlines()
        ev = read_log(f).evidence
        shown = [*ev.first.values(), *(line for _, line in ev.env.values()), *(a.line for a in ev.affinity)]
        for line in shown:
            assert line.file == f.name and lines[line.number - 1] == line.text, (f.name, line)
        checked += len(shown)
    assert checked > 150  # every corpus log with NCCL lines shows some


def test_the_facts_of_read_log_are_parse_files(tmp_path):
    for f in [*CORPUS[::10], _nccl_log(tmp_path / "big.log", 30_000)]:
        assert read_log(f).facts == parse_file(f)


def test_a_file_read_by_worker_processes_gives_the_same_evidence(tmp_path, worker_spans):
    """The workers read the facts of a big file; the evidence of its head is read here, once, all the same."""
    p = _nccl_log(tmp_path / "big.log", 30_000)
    one = read_log(p)
    spans = worker_spans(2)
    many = read_log(p)
    assert sum(spans) >= 2  # spans whose lines this process never read
    assert asdict(many.evidence) == asdict(one.evidence) and many.facts == one.facts


def _read(data: bytes, cuts: list[int], limit: int = 1 << 30) -> Evidence:
    reader = Reader("x.log", limit)
    for a, b in zip([0, *cuts], [*cuts, len(data)]):
        reader.feed(data[a:b])
    return reader.close()


def test_blocks_cut_anywhere_give_the_same_evidence():
    data = b"".join(f.read_bytes() for f in CORPUS[:40]).replace(b"NCCL INFO Channel 00", b"NCCL INFO\r\nChannel 00")
    whole = asdict(_read(data, []))
    rng = random.Random(3)
    for _ in range(20):
        cuts = sorted(rng.sample(range(1, len(data)), 30))
        assert asdict(_read(data, cuts)) == whole
    assert whole["first"] and whole["env"]


def test_only_the_head_up_to_the_limit_is_read():
    head = b"h1:1:1 [0] NCCL INFO Channel 00 : 0[0] -> 1[1] via P2P/IPC\n"
    tail = b"h1:1:1 [0] NCCL INFO Channel 00 : 1[1] -> 0[0] via SHM/direct/direct\n"
    assert set(_read(head + tail, [], limit=len(head) + 10).first) == {"p2p"}
    assert set(_read(head + tail, [7, 90]).first) == {"p2p", "shm"}


def test_the_head_is_the_logs_first_bytes_and_names_its_ranks(tmp_path):
    p = _nccl_log(tmp_path / "big.log", 30_000)
    assert read_log(p).head == p.read_bytes()[:HEAD_BYTES].decode("utf-8", errors="replace")
    tests = REPO / "tests" / "data" / "logs" / "nccltests_1.log"
    assert ranks_named(read_log(tests).head) == 2  # its two "#  Rank  N Group ... on HOST" lines


# evidence key -> the fact of parse's "nccl" object that its line shows (socket is left out: "NET/Socket : Using" is
# also the bootstrap's line where IB carries the traffic, and the network is decided among the lines)
SHOWS = {
    "nvls_used": lambda n: n["nvls_used"],
    "collnet_used": lambda n: n["collnet_used"],
    "ib_device": lambda n: bool(n["ib_link_layer"]),
    "roce": lambda n: "RoCE" in (n["ib_link_layer"] or ""),
    "ib_transport": lambda n: any(t.startswith("NET/IB") for t in n["transports"]),
    "gdrdma": lambda n: any(t.endswith("/GDRDMA") for t in n["transports"]),
    "shm": lambda n: "SHM" in n["transports"],
    "p2p": lambda n: any(t.startswith("P2P") for t in n["transports"]),
}


def test_every_fact_with_a_line_has_parses_shape_and_they_agree_on_the_corpus():
    """A fact and the line that shows it are read by the same patterns (parse/nccl.py's), so a log never has a fact
    without its line, nor a line for a fact it does not have."""
    read = {k for keys in _SHOWN_BY.values() for k in keys} | set(SHOWS) | {"nvls_available", "collnet_available"}
    assert read <= set(SHAPES)
    disagree, shown = [], dict.fromkeys(SHOWS, 0)
    for f in CORPUS:
        log = read_log(f)
        nccl = log.facts.get("nccl")
        for key, fact in SHOWS.items():
            has = bool(nccl) and fact(nccl)
            shown[key] += has
            if has != (key in log.evidence.first):
                disagree.append(f"{f.name}: {key}: fact {has}, line {log.evidence.first.get(key)}")
    assert not disagree, "\n".join(disagree)
    assert all(shown.values()), shown  # the corpus shows each of them somewhere
