"""The fast path (hpcbench/parse/fastpath.py) drops no fact the line path finds: on every corpus file, with
the fast path forced on small chunks, on generated multi-MB logs with hosts named as clusters name them,
on the benchmark's own log, and with worker processes. Each test runs twice: with the C scanner
(_scan.c) and with the pure-Python passes that stand in where it is not built."""

from __future__ import annotations

import importlib.util
import json
import os
import random
import re
import time

import pytest
from conftest import DATA, REPO

from hpcbench.parse import fastpath, known, parallel, parse_file, prefixes, scan

LOGS = DATA / "logs"
CORPUS = sorted(json.loads((LOGS / "EXPECTED.json").read_text())["files"])
# Host names as real clusters print them (NCCL cuts gethostname() at the first '.'): Slurm nodes, a
# Kubernetes pod, an AWS instance, a DGX, an underscore, a short one.
HOSTS = ["gpu-a100-017", "trainer-7f9c8d6b5-xk2lp", "ip-10-0-3-17", "dgx-h100-b07", "node_12", "s4"]
NT = ("#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong\n"
      "     1048576        262144     float     sum      -1    12.34   84.97  169.94      0    12.40   84.56  169.13      0\n"
      "     4194304       1048576     float     sum      -1    40.10  104.60  209.20      0    40.00  104.86  209.72      0\n"
      "# Avg bus bandwidth    : 189.5\n")


@pytest.fixture(autouse=True, params=["c", "python"])
def engine(request, monkeypatch):
    if request.param == "python":
        monkeypatch.setattr(fastpath, "_scan", None)
    else:
        assert fastpath._scan is not None, "the C scanner is not built: pip install -e . where a C compiler is"
    return request.param


def _rank_lines(comm: int, r: int, lead: str) -> list[str]:
    """One rank's lines for one communicator of 48 ranks, 8 per host. The ranks of the last host print only
    what other hosts print too, and the chatter of their collectives: no fact-carrying line of their own;
    and only in one communicator."""
    host, dev = HOSTS[r // 8], r % 8
    if r // 8 == 5 and comm != 7:
        return []
    p = f"{lead}{host}:{7000 + r}:{9000 + comm} [{dev}] NCCL INFO "
    out = [f"{p}Using network IB"]
    if r // 8 < 5:
        out.append(f"{p}ncclCommInitRank comm 0x5{comm:x}{r:04x} rank {r} nranks 48 cudaDev {dev} nvmlDev {dev} "
                   f"busId {dev}1000 commId 0x7{comm:x}a - Init START")
        out.append(f"{p}NET/IB : Using [0]mlx5_{dev % 4}:1/IB [RO]; OOB ib0:10.0.{r // 8}.{dev + 1}<0>")
        nxt = (r + 1) % 40
        for c in range(12):
            how = "P2P/IPC/read" if nxt // 8 == r // 8 else f"NET/IB/{c % 4}/GDRDMA"
            tag = "" if how.startswith("P2P") else " [send]"
            out.append(f"{p}Channel {c:02d}/0 : {r}[{dev}] -> {nxt}[{nxt % 8}]{tag} via {how}")
    out += [f"{p}AllReduce: opCount {comm:x}{k:x} sendbuff 0x7f3a{r:04x}0000 recvbuff 0x7f3a{r:04x}8000 count {1 << k} "
            f"datatype 7 op 0 root 0 comm 0x5{comm:x}{r:04x} [nranks=48] stream 0x55d1" for k in range(60)]
    if r == 9:  # the same WARN in every communicator, counted across chunks
        out += ["", f"{lead}{host}:{7000 + r}:{9000 + comm} [{dev}] misc/socket.cc:484 NCCL WARN Cuda failure 'out of memory'"]
    return out


def _job_log(lead_of=lambda r: "", comms: int = 12) -> str:
    out = ["NCCL version 2.21.5+cuda12.4"]
    for comm in range(comms):
        for r in range(48):
            out += _rank_lines(comm, r, lead_of(r))
        if comm == 3:
            out += NT.splitlines() + [f"{lead_of(0)}[rank0]: step 100 | loss 2.31 | 412.5 ms"]
    out.append("Total img/sec on 48 GPU(s): 1234.5 +-3.2")
    return "\n".join(out) + "\n"


LEADS = {
    "plain": lambda r: "",
    "mpirun": lambda r: f"[1,{r}]<stdout>:",  # mpirun --tag-output
    "kubectl": lambda r: f"2024-10-23T19:30:56.{r:06d}Z ",  # kubectl logs --timestamps
}


def _fast_and_line(path, monkeypatch, chunk: int, fast_min: int) -> tuple[dict, dict, int]:
    taken = []
    real = fastpath.read_span

    def spy(*a, **k):
        got = real(*a, **k)
        taken.append(got is not None)
        return got

    with monkeypatch.context() as m:
        m.setattr(scan, "CHUNK", chunk)
        m.setattr(scan, "FAST_MIN", fast_min)
        m.setattr(fastpath, "read_span", spy)
        m.setenv(parallel.JOBS_ENV, "1")
        fast = parse_file(path)
        m.setattr(scan, "FAST_MIN", 1 << 40)
        line = parse_file(path)
    return fast, line, sum(taken)


@pytest.mark.parametrize("lead", sorted(LEADS))
@pytest.mark.parametrize("others", [fastpath.OTHERS_MAX, 1.0])
def test_a_generated_job_log(tmp_path, monkeypatch, lead, others):
    """As it is, and with the fast path taken however many lines of new hosts a chunk holds."""
    p = tmp_path / "job.log"
    p.write_text(_job_log(LEADS[lead]))
    assert p.stat().st_size > 3 << 20
    monkeypatch.setattr(fastpath, "OTHERS_MAX", others)
    fast, line, taken = _fast_and_line(p, monkeypatch, 256 << 10, 64 << 10)
    assert taken >= (6 if others < 1 else 14)  # most chunks took the fast path, or all
    assert fast == line
    n = fast["nccl"]
    assert n["hosts"] == sorted(HOSTS) and n["nranks"] == 48 and n["network"] == "IB"
    assert n["transports"] == ["NET/IB/GDRDMA", "P2P/IPC"] and len(n["edges"]) == 40 * 12
    assert {w["message"]: w["count"] for w in n["warn_details"]} == {"Cuda failure 'out of memory'": 12}
    assert fast["nccl_tests"]["avg_busbw"] == 189.5 and fast["horovod"]["num_gpus"] == 48
    assert fast["launcher_prefix"] == ("[1,N]<stdout>:" if lead == "mpirun" else None)


def test_every_corpus_file(tmp_path, monkeypatch):
    """Each file read in 2 KiB chunks, every chunk through the fast path when it has two lines or more."""
    monkeypatch.setattr(fastpath, "nccl_dominated", lambda *a: True)
    monkeypatch.setattr(fastpath, "OTHERS_MAX", 1.0)
    differ, taken = [], 0
    for name in CORPUS:
        fast, line, n = _fast_and_line(LOGS / name, monkeypatch, 2048, 0)
        taken += n
        if fast != line:
            differ.append(name)
    assert differ == []
    assert taken > 100


def _bench_module():
    """benchmarks/parse_speed.py, whose ``generate`` writes the benchmark's log."""
    spec = importlib.util.spec_from_file_location("parse_speed", REPO / "benchmarks" / "parse_speed.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    return bench


def _bench_log(path) -> bytes:
    """benchmarks/parse_speed.py's log, 4 nodes of 8 GPUs, 4 MB."""
    _bench_module().generate(path, 4 << 20, nodes=4)
    return path.read_bytes()


def test_the_benchmark_log(tmp_path, monkeypatch):
    p = tmp_path / "bench.log"
    _bench_log(p)
    fast, line, taken = _fast_and_line(p, monkeypatch, 256 << 10, 64 << 10)
    assert taken >= 10 and fast == line
    assert len(fast["nccl"]["hosts"]) == 4 and fast["nccl"]["nranks"] == 32 and fast["nccl_tests"]["avg_busbw"] == 187.321


# One line near the end of the benchmark's log, changed: (a text the line holds, the bytes changed, to what,
# what the result must then show).
LATE = {
    "host of a chatter line": (b"AllReduce", b"gpu-node-002:", b"gpu-node-009:", lambda n: "gpu-node-009" in n["hosts"]),
    "host of an edge line": (b"via P2P/IPC", b"gpu-node-001:", b"gpu-node-00b:", lambda n: "gpu-node-00b" in n["hosts"]),
    "transport of an edge line": (b"via P2P/IPC", b"P2P/IPC", b"P2P/CUMEM", lambda n: "P2P/CUMEM" in n["transports"]),
    "nranks of an init line": (b"Init COMPLETE", b" nranks 32 ", b" nranks 33 ", lambda n: n["nranks"] == 33),
}


@pytest.mark.parametrize("change", sorted(LATE))
def test_one_late_line_that_differs(tmp_path, monkeypatch, change):
    """After the same communicators were printed again and again, one line differs: the fast path, which
    skips lines of known hosts with messages it has read, finds its one new fact as the line path does."""
    holds, old, new, shows = LATE[change]
    data = _bench_log(tmp_path / "bench.log")
    start = data.index(b"\n", int(len(data) * 0.9)) + 1
    while holds not in data[start:data.index(b"\n", start)] or old not in data[start:data.index(b"\n", start)]:
        start = data.index(b"\n", start) + 1
    end = data.index(b"\n", start)
    p = tmp_path / "changed.log"
    p.write_bytes(data[:start] + data[start:end].replace(old, new, 1) + data[end:])
    fast, line, taken = _fast_and_line(p, monkeypatch, 256 << 10, 64 << 10)
    assert taken >= 10 and fast == line and shows(fast["nccl"])


@pytest.mark.parametrize("lead", ["plain", "mpirun"])  # host test in numpy, by regex
def test_worker_processes_give_the_same_facts(tmp_path, monkeypatch, worker_spans, lead):
    p = tmp_path / "job.log"
    p.write_text(_job_log(LEADS[lead]))
    one = parse_file(p)
    spans = worker_spans(3)
    many = parse_file(p)
    assert sum(spans) >= 3  # spans read by workers
    assert many == one
    monkeypatch.setattr(scan, "FAST_MIN", 1 << 40)
    assert many == parse_file(p)  # and the line path


def test_a_rank_printed_by_two_hosts_in_one_chunk(tmp_path, monkeypatch):
    """Each rank's init line printed by host A, then (a restarted job) by host B, in one chunk: the line
    path takes A, the first in file order, for the rank's host, and so must the fast path (it once took
    whichever line came first out of a set, and so gave NET edges between A's ranks no scope)."""
    out = [f"{h}:1:1 [0] NCCL INFO AllReduce: opCount {i} count 1" for h in ("hostA", "hostB") for i in range(5)]
    for r in range(64):
        out += [f"host{h}:1:1 [0] NCCL INFO comm 0x{h.lower()}{r:04x} rank {r} nranks 64 cudaDev 0 busId 1000 - Init COMPLETE"
                for h in "AB"]
    out += [f"hostA:1:1 [0] NCCL INFO Channel 00/0 : {r}[0] -> {(r + 1) % 64}[0] via NET/IB/0" for r in range(64)]
    out += [f"hostA:1:1 [0] NCCL INFO AllReduce: opCount {i} count 1" for i in range(3000)]
    p = tmp_path / "two.log"
    p.write_text("\n".join(out) + "\n")
    fast, line, taken = _fast_and_line(p, monkeypatch, 64 << 10, 0)
    assert taken >= 3 and fast == line
    assert {e["scope"] for e in fast["nccl"]["edges"]} == {"intra"}


# Prints read as lines of their own (the corpus's DDP and Horovod logs, the issue's), and ones the line path
# takes for the rest of a wrapped NCCL line before them (a blank first: a terminal's cut fell on it).
OWN = ["step 12: loss 0.5", "Iter #3: 601.7 img/sec per GPU", "Running benchmark...", "training...",
       "tensorflow_synthetic_benchmark.py", "*****************************************",
       "master_addr is only used for static rdzv_backend and when rdzv_endpoint is not specified."]
WRAP_LIKE = ["  warnings.warn(", "    main()"]


def test_training_prints_among_nccl_lines(tmp_path, monkeypatch):
    """One line in 100 followed by a print: none is glued onto an NCCL fact; those read as the rest of the line
    before them are handed on with it (they once sent every such chunk to the line path, 20x slower), and the
    fast path finds what the line path finds."""
    rng = random.Random(7)
    out = []
    for line in _job_log().splitlines():
        out.append(line)
        if rng.random() < 0.01:
            out.append(rng.choice(WRAP_LIKE + OWN))
    p = tmp_path / "job.log"
    p.write_text("\n".join(out) + "\n")
    joined = []
    real = fastpath._hand_on

    def spy(*a):
        got = real(*a)
        joined.append(len(got[1]))
        return got

    monkeypatch.setattr(fastpath, "_hand_on", spy)
    fast, line, taken = _fast_and_line(p, monkeypatch, 256 << 10, 64 << 10)
    assert taken >= 10 and fast == line and sum(joined) > 10
    assert not any(t.endswith(tuple(OWN + WRAP_LIKE)) for t in fast["nccl"]["transports_raw"])


# Lines after which a print may come: edges whose transport is whole, cut, or ends in a blank, a ring listing,
# a short line; and prints or rests the C scanner must not take for prints read alone.
CUT = ["Channel 01/0 : 3[3] -> 4[4] [send] via NET/IB/1/GDR", "Channel 01/0 : 3[3] -> 4[4] via P2P/CUMEM/re",
       "Channel 02/0 : 3[3] -> 4[4] via NET/AWS Libfabric/0/GDRDMA(PCI)/Shared", "Ring 00 : 0 1 2 3 4 5 6 7 8 9 10 11",
       "Channel 03/0 : 3[3] -> 4[4] via SHM/direct/direct", "Trees [0] 1/-1/-1->0->-1 [1] 1/-1/-1->0->-1", "x"]
RESTS = ["DMA", "ad", "/GDRDMA", "(PCI)", " 12 13 14 15", "vs", ":", "", "foo :1:2 [0] NCCL INFO x",
         "[1,0]<stdout>:step 3", "python main.py --rank 0", "| distributed init (rank 1): env://", "Epoch 3/10",
         "  File \"train.py\", line 3", "=====", "hpcbench: p: 1.0 samples/s, 2.0 ms/step over 2 ranks"]


def test_prints_the_c_scanner_hands_on_alone(tmp_path, monkeypatch, engine):
    """After 5% of the lines a print or the rest of a cut line, after lines cut or whole: the C scanner hands
    on alone the prints the line path reads alone (most of them), and the facts are the line path's."""
    rng = random.Random(11)
    out = []
    for line in _job_log(comms=6).splitlines():
        out.append(line)
        if rng.random() < 0.05:
            if rng.random() < 0.5:
                out.append(line[:line.index("NCCL INFO ") + 10] + rng.choice(CUT) if "NCCL INFO " in line else "x")
            out.append(rng.choice(RESTS + OWN + WRAP_LIKE))
    p = tmp_path / "job.log"
    p.write_text("\n".join(out) + "\n")
    alone = []
    real = scan.Scanner.read_parts

    def spy(self, parts):
        for kind, got, _ in (part for part in parts if part[0] in ("print", "prints")):
            alone.extend([got] if kind == "print" else got)
        real(self, parts)

    monkeypatch.setattr(scan.Scanner, "read_parts", spy)
    fast, line, taken = _fast_and_line(p, monkeypatch, 256 << 10, 64 << 10)
    assert taken >= 5 and fast == line
    assert (len(alone) > 500) == (engine == "c")
    raw = fast["nccl"]["transports_raw"]
    assert "NET/IB/1/GDR    main()" in raw and not any(t.endswith(tuple(OWN)) for t in raw)  # a rest joined, no print


def test_a_plain_line_cut_by_position_reads_as_clean_reads_it(engine):
    """prefixes.clean_plain gives clean's Line for each line the fast path hands on as a bare plain one: a host
    first, then known.TAIL, one NCCL tag, ASCII. Every such line of the corpus, and of the generated job log."""
    plain = re.compile(known._bytes_pattern(prefixes.HOST) + known.TAIL)
    lines = [ln for name in CORPUS for ln in (LOGS / name).read_text(encoding="utf-8", errors="replace").splitlines()]
    checked = 0
    for line in lines + _job_log(comms=1).splitlines() + [ln + "  " for ln in _job_log(comms=1).splitlines()[:50]]:
        b = line.encode()
        if plain.match(b) and b.count(b"NCCL ") == 1 and b.isascii():
            assert prefixes.clean_plain(line) == prefixes.clean(line), line
            checked += 1
    assert checked > 3000


@pytest.mark.parametrize("copy_at", [None, 1100, 6000])  # no copy, one in the same chunk, one in a later chunk
def test_a_new_message_read_with_a_rest_glued_on(tmp_path, monkeypatch, copy_at):
    """A new edge line read with the next line as its rest ('GDR' + 'DMA'): its message is not read alone there,
    so the fast path hands on its next copy too (in its chunk, or, forgotten, in a later one), as the line path
    reads it."""
    p = "gpu-a100-017:7000:9000 [0] NCCL INFO "
    edge = f"{p}Channel 00/0 : 0[0] -> 1[0] [send] via NET/IB/1/GDR"
    lines = [f"{p}AllReduce: opCount {i:x} count 1 datatype 7 op 0" for i in range(8000)]  # shorter: cut by a terminal
    if copy_at:
        lines.insert(copy_at, edge)
    lines[1000:1000] = [edge, "DMA"]
    path = tmp_path / "job.log"
    path.write_text("\n".join(lines) + "\n")
    fast, line, taken = _fast_and_line(path, monkeypatch, 64 << 10, 0)
    assert taken >= 5 and fast == line
    # the copy alone is a transport cut short ('GDR'): read as no edge by either path (check says 'could not read')
    assert fast["nccl"]["transports_raw"] == ["NET/IB/1/GDRDMA"]


def test_edges_the_c_scanner_cuts_read_as_the_line_path_reads_them(tmp_path, monkeypatch, engine):
    """Edge lines of odd shapes among chatter, each new, some printed again: a transport that normalises to
    nothing ('.'), one cut short, one with no peer, one with another fact's mark, long numbers, a host that is
    an address, NET/IB devices in a transport or a rank's bracket; the fast path (the C scanner's cut edges, or the pure passes) gives the line path's facts."""
    shapes = ["via .", "[send] via NET/IB/0/GDR", "via P2P/IPC/read", "via NET/IB/1/GDRDMA(PCI)/Shared", "via SHM/direct/direct"]
    out = []
    for i in range(3000):
        host = ("10.0.0.7", "gpu-a100-017", "s4")[i % 3]
        p = f"{host}:{7000 + i % 8}:9 [{i % 8}] NCCL INFO "
        out.append(f"{p}AllReduce: opCount {i:x} count 1 datatype 7 op 0")
        if i % 7 == 0:
            k = (i // 7) % 300  # each shape again, later
            out.append(f"{p}Channel {k % 32:02d}/0 : {k}[0] -> {k + 1}[1] {shapes[k % len(shapes)]}")
        if i % 301 == 0:
            out += [f"{p}Channel 03/1 : {i}[3] via P2P/direct pointer", f"{p}Ring 01 : {i}[1] -> {i + 1}[2] via NET/IB/0 nvls",
                    f"{p}Channel 05/0 : {10 ** 20 + i}[0] -> {i}[0] via SHM",
                    # NET/IB devices in a transport (read once for each), and a rank's bracket that says none was found
                    f"{p}Channel 06/0 : {i}[0] -> {i + 1}[1] [send] via NET/IB/0 [0]mlx5_{i % 3}:1/IB",
                    f"{p}Channel 07/0 : {i}[NET/IB : No device found] -> {i + 1}[1] via NET/IB/0 [0]mlx5_{i % 3}:1/IB"]
    out.insert(0, "s4:7000:9 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [RO]; OOB ib0:10.0.0.1<0>")
    path = tmp_path / "job.log"
    path.write_text("\n".join(out) + "\n")
    cut = []
    real = scan.Scanner.read_parts

    def spy(self, parts):
        cut.extend(e for part in parts if part[0] == "edges" for e in part[1])
        real(self, parts)

    monkeypatch.setattr(scan.Scanner, "read_parts", spy)
    fast, line, taken = _fast_and_line(path, monkeypatch, 16 << 10, 0)
    assert taken >= 10 and fast == line
    assert (len(cut) > 200) == (engine == "c")
    edges = fast["nccl"]["edges"]
    assert {e["transport"] for e in edges} == {"", "P2P/IPC", "NET/IB", "NET/IB/GDRDMA", "SHM"} and len(edges) > 200
    assert fast["nccl"]["ib_devices"][:3] == ["mlx5_0", "mlx5_1", "mlx5_2"]
    assert fast["nccl"]["network_source"] == "transport_lines"  # the bracket's "No device found" was read


def _mapped_and_read(path, monkeypatch, chunk: int = 64 << 10) -> tuple[dict, dict, int]:
    """parse_file reading ``path`` mapped (MAP_MIN 0, however new the file) and in chunks (HPCBENCH_PARSE_MMAP=0),
    and how many times it mapped a file."""
    mapped = []
    real = scan.Scanner.feed_mapped

    def spy(self, buf, size):
        mapped.append(size)
        return real(self, buf, size)

    with monkeypatch.context() as m:
        m.setattr(scan.Scanner, "feed_mapped", spy)
        m.setattr(scan, "MAP_MIN", 0)
        m.setattr(scan, "MAP_QUIET_S", -1.0)
        m.setattr(scan, "CHUNK", chunk)
        m.setattr(scan, "FAST_MIN", chunk // 4)
        m.setenv(parallel.JOBS_ENV, "1")
        got = parse_file(path)
        m.setenv(scan.MAP_ENV, "0")
        read = parse_file(path)
    return got, read, len(mapped)


def test_a_mapped_file_reads_as_one_read_in_chunks(tmp_path, monkeypatch, engine):
    """Every corpus file, the generated job logs and the benchmark's log, mapped: the same facts as read in chunks.
    The C scanner's passes read a mapped file in place; the pure-Python passes never map one."""
    paths = [LOGS / name for name in CORPUS]
    for lead in sorted(LEADS):
        paths.append(tmp_path / f"{lead}.log")
        paths[-1].write_text(_job_log(LEADS[lead], comms=3))
    _bench_log(paths[-1].with_name("bench.log"))
    paths.append(paths[-1].with_name("bench.log"))
    differ, mapped = [], 0
    for p in paths:
        got, read, n = _mapped_and_read(p, monkeypatch)
        mapped += n
        if got != read:
            differ.append(p.name)
    assert differ == []
    assert mapped == (sum(p.stat().st_size > 0 for p in paths) if engine == "c" else 0)


@pytest.mark.parametrize("before", [0, 7, 300, 555])  # where the long lines fall against the chunks' edges
@pytest.mark.parametrize("end", [b"\n", b""])
def test_lines_too_long_are_cut_alike_mapped_or_in_chunks(tmp_path, monkeypatch, before, end):
    """A line longer than MAX_LINE has its first MAX_LINE bytes read wherever it lies against the chunks (reading in
    chunks once cut such a line only where more than MAX_LINE of it fell in one read): mapped and in chunks, the
    same lines are cut, and their tails (a Horovod total) are not read. MAX_LINE is half a chunk, as it is."""
    monkeypatch.setattr(scan, "MAX_LINE", 32 << 10)
    lines = _job_log(comms=2).encode().splitlines()
    tail = b" Total img/sec on 48 GPU(s): 9999.9 +-1.0"
    longs = [b"step 1: loss 0.5 " + b"x" * n + tail for n in (48 << 10, 80 << 10, 30 << 10)]  # 1.5, 2.5, 0.9 x MAX_LINE
    body = lines[:before] + [longs[0]] + lines[before:before + 400] + [longs[1]] + lines[before + 400:-1] + [longs[2]]
    p = tmp_path / "long.log"
    p.write_bytes(b"\n".join(body + [lines[-1], longs[0]]) + end)  # a long line last, with a newline or none
    got, read, _ = _mapped_and_read(p, monkeypatch)
    assert got == read
    assert got["warnings"] == [f"3 lines longer than {32 << 10} bytes were cut"]
    assert got["horovod"]["total_img_sec"] == 1234.5  # the cut lines' tails were not read


def test_lines_too_long_are_cut_alike_by_worker_processes(tmp_path, monkeypatch, worker_spans):
    """With worker processes, the same lines are cut as by one process: each worker cuts its long lines, and the
    scanner the long lines of a span it reads itself."""
    monkeypatch.setattr(scan, "MAX_LINE", 96 << 10)  # in a worker's span of 4 x 256 KiB chunks
    lines = _job_log(comms=4).encode().splitlines()
    tail = b" Total img/sec on 48 GPU(s): 9999.9 +-1.0"
    body = list(lines[:-1])
    for k, n in enumerate((150 << 10, 300 << 10, 60 << 10)):  # 1.6, 3.1, 0.6 x MAX_LINE
        body.insert(len(body) * (k + 1) // 4, b"step 1: loss 0.5 " + b"x" * n + tail)
    p = tmp_path / "long.log"
    p.write_bytes(b"\n".join(body + lines[-1:]) + b"\n")
    one = parse_file(p)
    spans = worker_spans(2)
    many = parse_file(p)
    assert sum(spans) >= 2 and many == one
    assert one["warnings"] == [f"2 lines longer than {96 << 10} bytes were cut"]
    assert one["horovod"]["total_img_sec"] == 1234.5


def test_only_a_big_file_not_written_for_a_minute_is_mapped(tmp_path, monkeypatch, engine):
    p = tmp_path / "job.log"
    p.write_text(_job_log(comms=2))
    mapped = []
    monkeypatch.setattr(scan.Scanner, "feed_mapped", lambda self, buf, size: mapped.append(size))
    monkeypatch.setattr(scan, "MAP_MIN", p.stat().st_size)
    parse_file(p)
    assert mapped == []  # written just now: a job may still write it
    os.utime(p, (time.time() - 120, time.time() - 120))
    parse_file(p)
    assert mapped == ([p.stat().st_size] if engine == "c" else [])
    monkeypatch.setenv(scan.MAP_ENV, "0")
    parse_file(p)
    monkeypatch.setattr(scan, "MAP_MIN", p.stat().st_size + 1)
    monkeypatch.delenv(scan.MAP_ENV)
    parse_file(p)
    assert len(mapped) == (1 if engine == "c" else 0)


def test_ib_devices_read_in_the_order_a_line_names_them(tmp_path, engine):
    """A line that names IB devices before an edge whose transport names one: its devices in the order it names
    them (the line path's edge reader once read the transport's first)."""
    p = tmp_path / "ib.log"
    p.write_text("n1:1:2 [0] NCCL INFO NET/IB : Using [0]mlx5_1:1/IB ; Channel 00/0 : 0[0] -> 1[1] via NET/IB/0 "
                 "[0]mlx5_0:1/RoCE\n")
    assert parse_file(p)["nccl"]["ib_devices"] == ["mlx5_1", "mlx5_0"]
