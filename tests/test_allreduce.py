"""The allreduce benchmark: sizes and checks, nccl-tests' layout, and real runs on the local Slurm."""
from __future__ import annotations

import csv
import json
import re

import pytest
from conftest import CPU_BACKENDS, DATA, NO_DDP_MPI, sweep_ok, write

from hpcbench.errors import ConfigError
from hpcbench.plan.expand import expand
from hpcbench.plan.spec import parse
from hpcbench.records import ResultRecord
from hpcbench.rundir import RunDir
from hpcbench.collectives import TABLE
from hpcbench.workloads import collective as ar
from hpcbench.workloads import collectives as col
from hpcbench.workloads.config import CollectiveConfig

pytestmark = pytest.mark.torch  # runs the real torch workload (or probes torch)


def test_sizes_and_bus_factor():
    assert ar.sizes(8, 64, 2) == [8, 16, 32, 64]
    assert ar.sizes(8, 100, 4) == [8, 32]
    factor = TABLE["all_reduce"].factor
    assert factor(1) == 0 and factor(2) == 1 and factor(8) == 1.75
    assert ar.algbw(10**9, 1e6) == 1.0  # 1 GB in 1 s


def test_wrong_elements_are_counted():
    import torch

    world, count = 3, 11
    idx = torch.arange(count)
    good = sum(TABLE["all_reduce"].input(r, idx) for r in range(world)).to(torch.float32)
    assert col.count_wrong(torch, "all_reduce", good, 0, world, count) == 0
    bad = good.clone()
    bad[2] += 1
    bad[10] = 0  # the last element
    assert col.count_wrong(torch, "all_reduce", bad, 0, world, count) == 2
    # Exact in the narrowest float: partial sums of small integers stay representable.
    half = sum(TABLE["all_reduce"].input(r, torch.arange(8)) for r in range(16)).to(torch.bfloat16)
    assert col.count_wrong(torch, "all_reduce", half, 0, 16, 8) == 0


def test_table_has_nccl_tests_layout():
    real = (DATA / "allreduce" / "nccltests_3.log").read_text().splitlines()
    cfg = CollectiveConfig(out=".", point_id="x", label="l", framework="ddp", backend="gloo", device="cpu", nodes=2,
                          ranks_per_node=1, min_bytes=10737418240, max_bytes=10737418240)
    rows = [ar.Row(10737418240, 2684354560, ar.Measured(90330.0, 0), ar.Measured(91945.0, 0))]
    ranks = [{"rank": 0, "local_rank": 0, "pid": 417, "bus": 0, "host": "node1", "device": "cpu"}]
    ours = ar.format_table(cfg, 16, ranks, ar.Measurement(rows, []), "torch.distributed backend=gloo").splitlines()
    header = next(i for i, line in enumerate(real) if "#wrong" in line)
    # The three column-header lines are nccl-tests' own, byte for byte (trailing blanks aside).
    assert [line.rstrip() for line in ours if line.startswith("#  ") and ("size" in line or "place" in line
            or "(B)" in line)] == [line.rstrip() for line in real[header - 1:header + 2]]
    # Same numbers give the same data row, column for column.
    assert [line for line in ours if not line.startswith("#")] == [real[header + 2]]
    assert ours[0] == real[1]  # the parameter line, with nccl-tests' defaults (warm-up 5, iters 20)
    # nccl-tests' footer, and the trailer its newer releases print (it names the collective)
    assert ours[-4] == "# Out of bounds values : 0 OK"
    assert re.match(r"^# Avg bus bandwidth    : [\d.]+ $", ours[-3])
    assert ours[-2:] == ["#", "# Collective test concluded: all_reduce_perf"]


def test_allreduce_sweep_keys(tmp_path):
    spec = parse('[workload]\nkind = "collective"\nframework = "horovod"\nmax_bytes = "64K"\nmin_bytes = "1K"\n'
                 "step_factor = 4\n[matrix]\nbackend = ['gloo', 'mpi']\nnodes = [1, 2]\n", "a.toml")
    points = expand(spec)
    assert [p.label for p in points] == ["horovod-gloo-allreduce-n1x1", "horovod-gloo-allreduce-n2x1",
                                         "horovod-mpi-allreduce-n1x1", "horovod-mpi-allreduce-n2x1"]
    assert {(p.min_bytes, p.max_bytes, p.step_factor) for p in points} == {(1024, 65536, 4)}
    # Allreduce parameters are part of an allreduce point's identity, and not of a training point's.
    other = expand(parse(spec.text.replace('"64K"', '"128K"'), "a.toml"))
    assert {p.id for p in points}.isdisjoint({p.id for p in other})
    train = '[workload]\nmodel = "mlp"\n'
    assert expand(parse(train, "t.toml"))[0].id == expand(parse(train + 'max_bytes = "2K"\n', "t.toml"))[0].id
    with pytest.raises(ConfigError, match=r"a.toml: workload.max_bytes: 8 is smaller than workload.min_bytes = 1024"):
        parse('[workload]\nkind = "collective"\nmin_bytes = "1K"\nmax_bytes = 8\n', "a.toml")
    with pytest.raises(ConfigError, match=r"workload.max_bytes: expected a size in bytes"):
        parse('[workload]\nkind = "collective"\nmax_bytes = "lots"\n', "a.toml")
    with pytest.raises(ConfigError, match=r"matrix.framework\[1\]: framework 'none' has no communication"):
        parse('[workload]\nkind = "collective"\n[matrix]\nframework = ["ddp", "none"]\n', "a.toml")


def test_unavailable_backend_is_rejected_at_plan_time_and_at_start(cli, tmp_path):
    # oneCCL is not built into this Horovod: the planner refuses the point; where it cannot know the
    # ranks' environment (modules), the job ends at once with the reason, and never hangs.
    from hpcbench.workloads.capabilities import detect

    if "ccl" in detect().horovod_tensor_ops:
        pytest.skip("this Horovod has oneCCL operations: there is nothing to reject")
    text = ('[workload]\nkind = "collective"\nframework = "horovod"\nbackend = "oneccl"\nmax_bytes = 64\n'
            "[matrix]\nranks_per_node = [2]\n")
    plan = cli("plan", str(write(tmp_path / "ccl.toml", text)), "--run-dir", str(tmp_path / "p"))
    assert plan.returncode == 2
    assert "horovod-oneccl-allreduce-n1x2: Horovod backend 'oneccl': this horovod" in plan.stderr
    sweep = write(tmp_path / "ccl-mod.toml", "[slurm]\nmodules = ['oneccl']\n" + text)
    proc = cli("sweep", str(sweep), "--backend", "local", "--run-dir", str(tmp_path / "run"), timeout=300)
    [row] = list(csv.DictReader((tmp_path / "run" / "summary.csv").open()))
    assert proc.returncode == 1 and row["state"] == "FAILED"
    assert "BackendUnavailable: Horovod backend 'oneccl': this horovod" in row["reason"]
    assert "built without ccl" in row["reason"]
    # The provenance of each rank was written before the check failed: the reason has its context.
    rd = RunDir.open(tmp_path / "run")
    assert len(rd.point(rd.points()[0]).provenances()) == 2


@pytest.mark.slurm
def test_allreduce_over_every_cpu_backend_on_slurm(cli, tmp_path, slurm_cluster):
    sweep = write(tmp_path / "ar.toml", """
[sweep]
name = "ar"
[slurm]
partition = "debug"
time = "00:10:00"
cpu_bind = "cores"
[slurm.env]
OMPI_MCA_btl = "^vader"  # two nodes on one host: see sweeps/allreduce.toml
OMPI_MCA_mpi_yield_when_idle = "1"
[workload]
kind = "collective"
min_bytes = 8
max_bytes = "64K"
step_factor = 8
warmup_iters = 1
iters = 3
[matrix]
nodes = [2]
ranks_per_node = [1]
""" + CPU_BACKENDS + NO_DDP_MPI)
    rd = sweep_ok(cli, sweep, tmp_path / "run")
    seen = set()
    for p in rd.points():
        paths = rd.point(p)
        rec = ResultRecord.from_dict(json.loads(paths.result.read_text()))
        seen.add((rec.framework, rec.backend))
        assert rec.kind == "collective" and rec.world_size == 2 and rec.slurm_nodes == ["node1", "node2"]
        assert [r.size_bytes for r in rec.allreduce] == [8, 64, 512, 4096, 32768]
        for r in rec.allreduce:
            assert r.busbw_gbps > 0 and r.oop_busbw_gbps > 0, (p.label, r)
            assert r.wrong == 0 and r.oop_wrong == 0, (p.label, r)
            assert r.busbw_gbps == pytest.approx(r.algbw_gbps)  # 2(n-1)/n = 1 at two ranks
        controller = "mpi" if p.backend == "mpi" else "gloo"
        assert (f"controller={controller}" in rec.measurement) == (p.framework == "horovod"), rec.measurement
        # One provenance file per rank, with the affinity in effect and the binding check.
        provs = [json.loads(f.read_text()) for f in paths.provenances()]
        assert [d["rank"] for d in provs] == [0, 1] and rec.provenance == [f.name for f in paths.provenances()]
        assert sorted(d["slurm_node"] for d in provs) == ["node1", "node2"]
        for d in provs:
            assert d["schema"] == "hpcbench.provenance/2" and d["affinity"]["cpus"]
            assert d["affinity"]["matches"] is True, d["affinity"]
            assert d["affinity"]["requested"].startswith("slurm mask_cpu")  # srun, --mpi=pmix for Horovod-mpi
            assert d["finished_at"] >= d["started_at"]
        assert rec.affinity_ok is True and "2/2 ranks match" in rec.affinity_detail
        out = "".join(f.read_text() for f in paths.logs() if f.suffix == ".out")
        assert "#       size         count      type   redop    root     time   algbw   busbw #wrong" in out
        assert "# Out of bounds values : 0 OK" in out and "# Avg bus bandwidth    : " in out
    assert seen == {("ddp", "gloo"), ("horovod", "gloo"), ("horovod", "mpi")}


def test_a_job_script_rendered_before_the_rename_still_runs_the_benchmark():
    """Job scripts of the kind's first name (queued during an upgrade, or kept in run directories) say
    `python -m hpcbench.workloads.allreduce`: the same program answers."""
    import subprocess
    import sys

    old, new = (subprocess.run([sys.executable, "-m", f"hpcbench.workloads.{m}", "--help"], capture_output=True,
                               text=True, timeout=120) for m in ("allreduce", "collective"))
    assert old.returncode == new.returncode == 0 and old.stdout == new.stdout
    assert "usage: python -m hpcbench.workloads.collective" in old.stdout and "--collective" in old.stdout


def test_a_run_of_the_kinds_first_name_reads_as_the_collective_kind(tmp_path):
    """A run directory written before the rename: plan.json and result.json say kind "allreduce" (and plan.json
    model "allreduce", as expand.py set it then). It reads as kind "collective", into the allreduce table."""
    from report_helpers import allreduce_rows, make_run, point, record

    from hpcbench.report.summarize import make_report

    p = point(kind="collective", model=None, nodes=1, rpn=2)
    rd = make_run(tmp_path / "run", [(p, record(p, 1.0, kind="collective", allreduce=allreduce_rows(2.0)))])
    for f, old in ((rd.plan_json, '"kind": "allreduce", "model": "allreduce"'),
                   (rd.point(p).result, '"kind": "allreduce"')):
        doc = json.loads(f.read_text())
        for d in doc.get("points", [doc]):
            d.update(json.loads("{" + old + "}"))
        f.write_text(json.dumps(doc))
    assert '"kind": "allreduce"' in rd.point(p).result.read_text()
    [q] = RunDir.open(rd.root).points()
    assert (q.id, q.kind, q.model) == (p.id, "collective", None)
    rec = ResultRecord.from_dict(json.loads(rd.point(p).result.read_text()))
    assert rec.kind == "collective"
    rep = make_report([rd.root])
    [a] = rep.aggs
    assert (a.kind, a.model, a.collective, a.ok) == ("collective", None, "all_reduce", True)
    table = next(t for t in rep.tables if t.key == "allreduce")
    assert table.headers[1:] and table.rows[0][1] != "—"
