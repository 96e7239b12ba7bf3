"""Every collective of the table (hpcbench/collectives.py) in the communication benchmark (kind = "collective",
the collective axis): each test runs over every entry, so a new entry is tested by its FORMULAS and
_by_definition lines here.

nccl-tests' busbw factors against its formulas, and its sizes and factors against real nccl-tests logs of
other collectives (tests/data/logs, sources in SOURCES.tsv); the exact result each rank must hold,
against each collective computed by its definition, with misrouted data caught; our output read back by
hpcbench's parser; real runs (torch.distributed over Gloo at 3 ranks, Horovod over Gloo and over MPI under
mpirun at 2, all on this machine) with every result checked; a collective a library does not have, recorded
with the library's reason (by Horovod over Gloo: the reason is Horovod's whatever its controller, so those MPI
points are not run); and the report's table and busbw plot per collective.
"""
from __future__ import annotations

import json
import math
from dataclasses import replace

import pytest
from conftest import DATA, write
from report_helpers import make_run, point, record

from hpcbench.parse import parse_file
from hpcbench.plan.expand import point_id
from hpcbench.records import AllreduceRow, ResultRecord
from hpcbench.report.fmt import duration_us, num, size
from hpcbench.report.summarize import make_report
from hpcbench.report.tables_collectives import HEADING, curves
from hpcbench.rundir import RunDir
from hpcbench.vocab import COLLECTIVES, UNSUPPORTED
from hpcbench.collectives import TABLE, Horovod
from hpcbench.workloads import collective as ar
from hpcbench.workloads import collectives as col
from hpcbench.workloads.config import CollectiveConfig

pytestmark = pytest.mark.torch

LOGS = DATA / "logs"
# nccl-tests doc/PERFORMANCE.md "Summary" (sendrecv: src/sendrecv.cu SendRecvGetBw): busbw = algbw x factor(n)
FORMULAS = {"all_reduce": lambda n: 2 * (n - 1) / n, "all_gather": lambda n: (n - 1) / n,
            "reduce_scatter": lambda n: (n - 1) / n, "broadcast": lambda n: 1, "reduce": lambda n: 1,
            "alltoall": lambda n: (n - 1) / n, "sendrecv": lambda n: 1,
            "gather": lambda n: (n - 1) / n}  # src/gather.cu GatherGetBw (at a0b82b2: lines 38-44)
# Horovod has no call for these: each records the entry's reason
NO_HOROVOD = tuple(c for c, entry in TABLE.items() if not isinstance(entry.horovod, Horovod))
HOROVOD = tuple(c for c in TABLE if c not in NO_HOROVOD)
# Real nccl-tests logs of other collectives: (collective, ranks, bytes per element), from SOURCES.tsv and the
# logs' own lines (the rccl broadcast ran on one APU; its factor is 1 whatever the ranks).
REAL = {"nccltests_allgather-bf16-g2_50.log": ("all_gather", 2, 2),
        "nccltests_reducescatter-2x4_51.log": ("reduce_scatter", 8, 4),
        "nccltests_rccl-broadcast-trailer_60.log": ("broadcast", 1, 4),
        "nccltests_alltoall-blankredop_64.log": ("alltoall", 64, 4),
        "nccltests_sendrecv-inplace-na_56.log": ("sendrecv", 2, 4)}


def test_bus_factors_are_nccl_tests_formulas():
    assert tuple(TABLE) == COLLECTIVES and set(FORMULAS) == set(COLLECTIVES)
    for c in COLLECTIVES:
        # the printed formula is the computed one
        printed = eval("lambda n: " + TABLE[c].formula.replace("−", "-").replace("2(", "2 * ("))  # noqa: S307
        for n in range(1, 10):
            assert TABLE[c].factor(n) == pytest.approx(FORMULAS[c](n)) == pytest.approx(printed(n)), (c, n)
    assert NO_HOROVOD == ("reduce", "sendrecv", "gather")


def test_sizes_and_bus_bandwidth_agree_with_real_nccl_tests_logs():
    for name, (c, n, elsize) in REAL.items():
        rows = parse_file(LOGS / name)["nccl_tests"]["rows"]
        assert rows, name
        for r in rows:
            # nccl-tests' size convention: all_gather/reduce_scatter/alltoall print the whole buffer, n x the count
            assert TABLE[c].shape(r["size"], elsize, n) == (r["count"], r["size"]), (name, r)
            for mode in ("oop", "ip"):  # printed with two decimals
                assert abs(r[f"{mode}_busbw"] - r[f"{mode}_algbw"] * TABLE[c].factor(n)) <= 0.011, (name, r)
    # the shares round down to 16 bytes, as nccl-tests' (count/nranks) & ~(16/eltSize - 1)
    assert TABLE["all_gather"].shape(64, 4, 3) == (4, 48)
    assert TABLE["alltoall"].shape(8, 4, 2) == (0, 0) and TABLE["reduce_scatter"].shape(1024, 8, 4) == (32, 1024)
    assert TABLE["broadcast"].shape(8, 4, 3) == (2, 8) and TABLE["sendrecv"].shape(6, 4, 2) == (1, 4)


def _by_definition(c: str, n: int, count: int) -> list:
    """What every rank holds after the collective, computed from every rank's input by its definition."""
    import torch

    length = n * count if c in ("reduce_scatter", "alltoall") else count
    x = [TABLE[c].input(r, torch.arange(length)) for r in range(n)]
    block = (lambda t, r: t[r * count:(r + 1) * count])
    return {"all_reduce": [sum(x)] * n, "reduce": [sum(x)] + [None] * (n - 1),
            "reduce_scatter": [block(sum(x), r) for r in range(n)], "all_gather": [torch.cat(x)] * n,
            "broadcast": [x[0]] * n, "alltoall": [torch.cat([block(x[j], r) for j in range(n)]) for r in range(n)],
            "sendrecv": [x[(r - 1) % n] for r in range(n)], "gather": [torch.cat(x)] + [None] * (n - 1)}[c]


@pytest.mark.parametrize("c", COLLECTIVES)
def test_each_rank_result_is_checked_element_by_element(c):
    import torch

    n, count = 3, 8
    results = _by_definition(c, n, count)
    for r, got in enumerate(results):
        if got is None:  # reduce, gather: only the root's result is defined (nccl-tests checks the root alone)
            assert TABLE[c].expected(r, n, count, torch.arange(count)) is None
            continue
        for dtype in (torch.float32, torch.bfloat16, torch.int64):
            assert col.count_wrong(torch, c, got.to(dtype), r, n, count) == 0, (c, r, dtype)
        bad = got.clone()
        bad[-1] += 1
        assert col.count_wrong(torch, c, bad, r, n, count) == 1
    # misrouted data is caught whole: every element of a block from the wrong rank differs
    swapped = (lambda g: torch.cat([g[count:2 * count], g[:count], g[2 * count:]]))
    wrong_peer = {"all_gather": swapped, "alltoall": swapped, "gather": swapped}
    if c in wrong_peer:
        assert col.count_wrong(torch, c, wrong_peer[c](results[0]), 0, n, count) == 2 * count
    if c in ("sendrecv", "broadcast"):  # rank 1's data: the next rank's, not the previous one's; not the root's
        assert col.count_wrong(torch, c, TABLE[c].input(1, torch.arange(count)), 0, n, count) == count


def test_our_table_parses_back_to_the_numbers_we_record_for_every_collective():
    for c in COLLECTIVES:
        cfg = CollectiveConfig(out=".", point_id="x", label="l", framework="ddp", backend="gloo", device="cpu",
                              nodes=1, ranks_per_node=4, collective=c, min_bytes=64, max_bytes=1 << 20)
        rows = [ar.Row(s, TABLE[c].shape(s, 4, 4)[0], ar.Measured(3.0 + s / 1e4, 0), ar.Measured(2.5 + s / 3e4, 0))
                for s in (64, 4096, 1 << 20)]
        ranks = [{"rank": r, "local_rank": r, "pid": 10 + r, "bus": 0, "host": "node1", "device": "cpu"}
                 for r in range(4)]
        text = ar.format_table(cfg, 4, ranks, ar.Measurement(rows, []), "torch.distributed backend=gloo")
        parsed = _parse_text(text)
        assert parsed["collective"] == c
        _same_numbers(parsed["rows"], ar.to_rows(cfg, 4, rows))


def _parse_text(text: str) -> dict:
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as d:
        f = Path(d) / "job.out"
        f.write_text(text)
        return parse_file(f)["nccl_tests"]


def _same_numbers(parsed: list[dict], recorded: list[AllreduceRow]) -> None:
    """What the parser reads is what the record says, to the printed precision."""
    assert [(p["size"], p["count"], p["redop"], p["root"]) for p in parsed] == \
        [(r.size_bytes, r.count, r.redop, r.root) for r in recorded]
    for p, r in zip(parsed, recorded):
        for mode, (t, alg, bus, wrong) in (("ip", (r.time_us, r.algbw_gbps, r.busbw_gbps, r.wrong)),
                                           ("oop", (r.oop_time_us, r.oop_algbw_gbps, r.oop_busbw_gbps, r.oop_wrong))):
            assert abs(p[f"{mode}_time_us"] - t) <= 0.5 and p[f"{mode}_wrong"] == wrong, (p, r)
            assert abs(p[f"{mode}_algbw"] - alg) <= 0.005 + 1e-9 and abs(p[f"{mode}_busbw"] - bus) <= 0.005 + 1e-9


def test_every_horovod_call_is_named_so_its_response_cache_holds():
    """An unnamed Horovod op gets a fresh name per call, so the coordinator negotiates each one again (17 against
    2.7 ms per 1 KB allreduce over Gloo here). Each call must carry a name that is the same on every repeat and
    differs between collectives, placements, sizes and dtypes, or two ops would share one cache entry."""
    import torch

    class Recorder:  # stands in for horovod.torch at 2 ranks: records each op's name, returns a result's shape
        Sum = "sum"

        def __init__(self):
            self.names = []

        def __getattr__(self, op):
            def call(t, *args, name=None, **kw):
                self.names.append((op, name))
                return {"allgather": t.repeat(2), "reducescatter": t[:t.numel() // 2]}.get(op, t).clone()
            return call

    seen = {}
    for dtype in (torch.float32, torch.float64):
        a, b = torch.zeros(64, dtype=dtype), torch.zeros(64, dtype=dtype)
        for collective in HOROVOD:
            for count in (4, 8):
                for place in ("out-of-place", "in-place"):
                    names = []
                    for _ in range(2):
                        hvd = Recorder()
                        col.horovod_calls(hvd, collective, a, b, count, 1, 2)[place].run()
                        names.append(hvd.names)
                    assert names[0] == names[1] and all(n for _, n in names[0]), (collective, place, names)
                    key = (collective, count, place, str(dtype))
                    for _, n in names[0]:
                        assert seen.setdefault(n, key) == key, f"{n} names both {seen[n]} and {key}"
    assert len(seen) == 2 * len(HOROVOD) * 2 * 2


def test_what_a_library_lacks_is_known_before_any_traffic():
    import horovod
    import horovod.torch as hvd

    why = col.static_reason("reduce", "horovod", "gloo", 2, hvd, horovod.__version__)
    assert why.startswith(f"Horovod {horovod.__version__} has no reduce (its collectives: allreduce, allgather")
    assert why.endswith(f"): {TABLE['reduce'].horovod}")  # the entry's reason
    assert "has no sendrecv" in col.static_reason("sendrecv", "horovod", "mpi", 2, hvd, horovod.__version__)
    assert col.static_reason("reduce_scatter", "horovod", "gloo", 2, hvd, horovod.__version__) is None
    assert "Gloo cannot" in col.static_reason("sendrecv", "ddp", "gloo", 1)
    assert col.static_reason("sendrecv", "ddp", "gloo", 2) is None and col.static_reason("alltoall", "ddp", "nccl", 1) \
        is None


SWEEP = """
[sweep]
name = "collectives"
[workload]
kind = "collective"
min_bytes = 8
max_bytes = "4K"
step_factor = 8
warmup_iters = 1
iters = 2
[matrix]
framework = ["ddp", "horovod"]
backend = ["gloo", "mpi"]
ranks_per_node = [2, 3]
collective = ALL
[[exclude]]
framework = "ddp"
backend = "mpi"
[[exclude]]
framework = "ddp"
ranks_per_node = 2
[[exclude]]
framework = "horovod"
ranks_per_node = 3
[[exclude]]
framework = "horovod"
backend = "mpi"
collective = NONE
"""


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """Every collective over torch.distributed gloo (3 ranks) and Horovod gloo, and every one Horovod has over Horovod
    mpi (mpirun, 2 ranks)."""
    from conftest import run_cli

    tmp = tmp_path_factory.mktemp("collectives")
    sweep = write(tmp / "c.toml", SWEEP.replace("ALL", json.dumps(COLLECTIVES)).replace("NONE", json.dumps(NO_HOROVOD)))
    proc = run_cli("sweep", str(sweep), "--backend", "local", "--run-dir", str(tmp / "run"), timeout=1500)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return RunDir.open(tmp / "run")


def test_every_collective_runs_and_each_rank_holds_the_exact_result(run):
    seen = set()
    for p in run.points():
        paths = run.point(p)
        rec = ResultRecord.from_dict(json.loads(paths.result.read_text()))
        c, n = p.collective, p.world_size
        seen.add((p.framework, p.backend, c))
        assert rec.schema == "hpcbench.result/4" and rec.params["collective"] == c and rec.world_size == n
        log = "".join(f.read_text() for f in paths.logs() if f.suffix == ".out")
        if p.framework == "horovod" and c in NO_HOROVOD:
            continue  # the next test
        assert rec.unsupported is None and rec.allreduce, (p.label, rec.unsupported)
        wanted = [TABLE[c].shape(s, 4, n) for s in ar.sizes(8, 4096, 8)]
        assert [(r.count, r.size_bytes) for r in rec.allreduce] == [w for w in wanted if w[0] > 0]
        spec = TABLE[c]
        for r in rec.allreduce:
            assert (r.collective, r.redop, r.root) == (c, spec.redop, spec.root)
            assert r.wrong == 0 and r.oop_wrong == 0, (p.label, r)  # every element of every rank's result
            assert r.algbw_gbps == pytest.approx(r.size_bytes / r.time_us / 1e3)
            assert r.busbw_gbps == pytest.approx(r.algbw_gbps * FORMULAS[c](n))
            assert r.oop_busbw_gbps == pytest.approx(r.oop_algbw_gbps * FORMULAS[c](n))
        # the job's log is nccl-tests' table for this collective, and reads back as what was recorded
        parsed = parse_file(next(f for f in paths.logs() if f.suffix == ".out"))["nccl_tests"]
        assert parsed["collective"] == c and f"# Collective test concluded: {c}_perf" in log
        _same_numbers(parsed["rows"], rec.allreduce)
        if n == 2 and spec.shared:  # 8 B is 4 B per rank: below nccl-tests' 16-byte share, said, not run
            assert f"# not run: 8 B: less than 16 bytes per rank of {c} over 2 ranks" in log
    assert seen == {(fw, b, c) for fw, b in (("ddp", "gloo"), ("horovod", "gloo"), ("horovod", "mpi"))
                    for c in (HOROVOD if b == "mpi" else COLLECTIVES)}


def test_gather_the_newest_entry_runs_on_three_gloo_ranks_with_every_result_checked(cli, tmp_path):
    """The one entry added for issue 20 (gather, nccl-tests' src/gather.cu), run on its own: three real Gloo ranks,
    the root's result checked element by element, busbw = algbw x (n-1)/n, our table read back by the parser."""
    sweep = write(tmp_path / "g.toml", '[workload]\nkind = "collective"\ncollective = "gather"\nmin_bytes = 16\n'
                  'max_bytes = "64K"\nstep_factor = 16\nwarmup_iters = 1\niters = 2\n[matrix]\nranks_per_node = [3]\n')
    proc = cli("sweep", str(sweep), "--backend", "local", "--run-dir", str(tmp_path / "run"), timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # The end-of-sweep table names what was measured: the collective, not an empty model column.
    head, _, row = proc.stdout.splitlines()[-5:-2]
    assert "collective" in head.split() and "model" not in head.split() and row.split()[2] == "gather", proc.stdout
    rd = RunDir.open(tmp_path / "run")
    [p] = rd.points()
    rec = ResultRecord.from_dict(json.loads(rd.point(p).result.read_text()))
    assert (p.label, rec.kind, rec.unsupported) == ("ddp-gloo-gather-n1x3", "collective", None)
    # 16 B is 5 B per rank: below nccl-tests' 16-byte share, not run; then 256 B and 4 KiB, 64 KiB as n x share
    assert [(r.count, r.size_bytes) for r in rec.allreduce] == [(20, 240), (340, 4080), (5460, 65520)]
    for r in rec.allreduce:
        assert (r.collective, r.redop, r.root, r.wrong, r.oop_wrong) == ("gather", "none", 0, 0, 0), r
        assert r.busbw_gbps == pytest.approx(r.algbw_gbps * 2 / 3)
    log = "".join(f.read_text() for f in rd.point(p).logs() if f.suffix == ".out")
    parsed = _parse_text(log)
    assert parsed["collective"] == "gather" and "# Out of bounds values : 0 OK" in log
    _same_numbers(parsed["rows"], rec.allreduce)


def test_a_collective_the_library_lacks_is_recorded_with_its_reason(run):
    from hpcbench.figures.inputs import run_samples

    lacking = [s for s in run_samples(run) if s.state == UNSUPPORTED]
    assert sorted((s.backend, s.collective) for s in lacking) == sorted(("gloo", c) for c in NO_HOROVOD)
    for s in lacking:
        assert s.framework == "horovod" and not s.ok and s.final
        assert f"has no {s.collective} (its collectives: allreduce, allgather" in s.reason
        assert s.record.allreduce == [] and s.record.unsupported == s.reason
    # the report says it, and calls it neither a failure nor an error
    rep = make_report([run.root])
    assert len(rep.findings["collectives a library does not have (recorded by the ranks; not failures)"]) == \
        len(NO_HOROVOD)
    assert not rep.findings["points without a result (failed, missing or not finished)"]
    why = {w.label: w for w in rep.why}
    assert [f.rule for f in why["horovod-gloo-reduce-n1x2"].findings] == ["unsupported"]
    assert not any(f.fails for w in rep.why for f in w.findings)


def test_a_type_the_library_refuses_is_recorded_from_its_own_answer(cli, tmp_path):
    # Horovod 0.28 has no bfloat16 on the CPU: its ValueError is the reason, for every rank alike, not a crash.
    sweep = write(tmp_path / "bf16.toml", '[workload]\nkind = "collective"\nframework = "horovod"\ncollective = '
                  '"all_gather"\ndtype = "bfloat16"\nmin_bytes = 64\nmax_bytes = 64\n[matrix]\nranks_per_node = [2]\n')
    proc = cli("sweep", str(sweep), "--backend", "local", "--run-dir", str(tmp_path / "run"), timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rd = RunDir.open(tmp_path / "run")
    rec = ResultRecord.from_dict(json.loads(rd.point(rd.points()[0]).result.read_text()))
    assert "all_gather of torch.bfloat16: ValueError: Tensor type torch.BFloat16Tensor is not supported" in \
        rec.unsupported and rec.allreduce == []
    assert "UNSUPPORTED" in proc.stdout and "all_gather" in proc.stdout  # the end-of-sweep table


def test_the_report_has_one_table_and_one_busbw_plot_per_collective(run, tmp_path):
    from hpcbench.report import plots
    from hpcbench.report.summarize import write as write_report

    rep = make_report([run.root])
    tables = {t.key: t for t in rep.tables if t.title.endswith(HEADING)}
    assert list(tables) == ["allreduce", *COLLECTIVES[1:]]
    supported = {c: (3 if c not in NO_HOROVOD else 1) for c in COLLECTIVES}  # points that measured it
    lacking = {c: int(c in NO_HOROVOD) for c in COLLECTIVES}  # Horovod over Gloo's, recorded
    for c in COLLECTIVES:
        t = tables["allreduce" if c == "all_reduce" else c]
        assert len(t.headers) == 1 + supported[c], (c, t.headers)  # one column per point of this collective alone
        assert t.rows[-1][0] == "largest size vs link peak"
        assert not any("collective=" in h for h in t.headers), t.headers  # the table is of one collective
        # each cell: busbw (algbw), time per operation, as the point's record has them at that size
        for i, (name, a, _) in enumerate(curves(rep.aggs, c)):
            assert t.headers[1 + i] == name and a.collective == c
            by_size = {size(r.size_bytes): r for r in a.first.allreduce}
            cells = [(row[0], row[1 + i]) for row in t.rows[:-1]]
            assert cells and all(cell == f"{num(by_size[n].busbw_gbps)} ({num(by_size[n].algbw_gbps)}), "
                                 f"{duration_us(by_size[n].time_us)}" for n, cell in cells if n in by_size), cells
        assert any(f"busbw = algbw × {tables_factor(c)}" in n for n in t.notes)
        assert sum(n.startswith("unsupported: horovod-gloo") for n in t.notes) == lacking[c]
    # Collectives are never averaged together: the same backend and placement are separate points per collective.
    ddp = [a for a in rep.aggs if a.framework == "ddp"]
    assert sorted(a.collective for a in ddp) == sorted(COLLECTIVES)
    # Each plot draws its own collective's points, with the busbw each record holds.
    for c in COLLECTIVES:
        ax = plots.collective_bw(rep.aggs, rep.peaks(), c).axes[0]
        mine = [a for a in rep.aggs if a.collective == c and a.ok]
        lines = [line for line in ax.get_lines() if len(line.get_xdata())]
        assert len(lines) == len(mine) == supported[c]
        # the points without figures are in the legend with their state, never dropped
        absent = [line.get_label() for line in ax.get_lines() if not len(line.get_xdata())]
        assert len(absent) == lacking[c] and all(n.startswith("no figures: horovod-") and
                                                       n.endswith(": UNSUPPORTED") for n in absent)
        drawn = sorted(tuple(line.get_ydata()) for line in lines)
        want = sorted(tuple(r.busbw_gbps for r in a.first.allreduce if r.busbw_gbps > 0) for a in mine)
        assert all(math.isclose(x, y) for d, w in zip(drawn, want) for x, y in zip(d, w)) and len(drawn) == len(want)
    files = write_report(rep, tmp_path / "report")
    names = {f.name for f in files}
    assert {plots.bw_file(c) for c in COLLECTIVES} <= names and "allreduce_latency.png" in names
    md = (tmp_path / "report" / "report.md").read_text()
    assert f"## All-gather bandwidth: {HEADING}" in md and "![All-to-all bus bandwidth](alltoall_busbw.png)" \
        in md


def tables_factor(c: str) -> str:
    return TABLE[c].formula


def test_a_real_log_of_another_collective_gets_its_own_table(tmp_path):
    rep = make_report([str(LOGS / "nccltests_allgather-bf16-g2_50.log"), str(LOGS / "nccltests_rccl-broadcast-trailer_60.log")])
    keys = [t.key for t in rep.tables if t.title.endswith(HEADING)]
    assert keys == ["all_gather", "broadcast"]  # and no allreduce table: neither log is one
    gather = next(t for t in rep.tables if t.key == "all_gather")
    assert gather.headers[1].startswith("nccl-tests all_gather") and gather.rows[0][:2] == ["16 MiB", "77.10 (154.20), 109 us"]  # the log's row: 108.8 us


def test_the_scaling_model_never_takes_another_collective_for_allreduce(cli, tmp_path):
    gather = LOGS / "nccltests_allgather-bf16-g2_50.log"
    proc = cli("explain", str(LOGS / "nccltests_rccl-broadcast-trailer_60.log"), "--allreduce", str(gather))
    assert proc.returncode == 2 and proc.stderr.count("\n") <= 2
    assert f"error: {gather}: a all_gather_perf log, but the scaling model needs an all_reduce curve" in proc.stderr
    # a run's all_gather point is no allreduce curve for a training point of the same placement
    ar_point, tr = point(kind="collective", nodes=1, rpn=2), point(rpn=2)
    ag = replace(ar_point, collective="all_gather", id=point_id({**ar_point.params(), "collective": "all_gather"}))
    rows = [AllreduceRow(size_bytes=1 << k, count=1 << (k - 3), dtype="float", time_us=10.0 + k, algbw_gbps=1.0,
                         busbw_gbps=0.5, wrong=0, collective="all_gather", redop="none") for k in (10, 20)]
    rd = make_run(tmp_path / "run", [(ag, record(ag, 1.0, kind="collective", allreduce=rows,
                                                   params={"collective": "all_gather"})),
                                     (tr, record(tr, 100.0, compute_time_s=0.1, comm_time_s=0.2))])
    why = {w.label: {f.rule: f for f in w.findings} for w in make_report([rd.root]).why}
    assert "an allreduce curve of the same framework" in why[tr.label]["model"].claim


def test_a_wrong_result_is_an_error_in_the_report_and_in_explain(tmp_path):
    ar_point = point(kind="collective", nodes=1, rpn=2)
    ag = replace(ar_point, collective="all_gather", id=point_id({**ar_point.params(), "collective": "all_gather"}))
    rows = [AllreduceRow(size_bytes=1 << k, count=1 << (k - 3), dtype="float", time_us=10.0, algbw_gbps=1.0,
                         busbw_gbps=0.5, wrong=0, oop_time_us=10.0, oop_algbw_gbps=1.0, oop_busbw_gbps=0.5,
                         oop_wrong=3 if k == 10 else 0, collective="all_gather", redop="none") for k in (10, 20)]
    rd = make_run(tmp_path / "run", [(ag, record(ag, 1.0, kind="collective", allreduce=rows,
                                                   params={"collective": "all_gather"}))])
    rep = make_report([rd.root])
    table = next(t for t in rep.tables if t.key == "all_gather")
    assert any(n.startswith("wrong results") and ag.label in n for n in table.notes)  # out of place counts too
    found = {f.rule: f for w in rep.why for f in w.findings}
    assert found["wrong-results"].severity == "error" and "3 out of place at 1,024 B" in found["wrong-results"].claim
    clean = make_run(tmp_path / "clean", [(ag, record(ag, 1.0, kind="collective", params={"collective": "all_gather"},
                                                      allreduce=[replace(r, oop_wrong=0) for r in rows]))])
    assert not any(f.rule == "wrong-results" for w in make_report([clean.root]).why for f in w.findings)


def test_time_per_operation_reads_in_its_unit():
    assert [duration_us(v) for v in (8.2, 999.0, 1140.0, 2.31e6, None)] == ["8.2 us", "999 us", "1.14 ms", "2.31 s",
                                                                          "—"]
