"""`hpcbench summarize` as a user runs it: references, --compare, bad input, environment, GPU, allreduce, partial runs."""
from __future__ import annotations

import json
import re

from conftest import DATA, write
from report_helpers import GPU, STARVED, allreduce_rows, make_run, point, provenance, record

from hpcbench.figures.samples import Sample
from hpcbench.files import atomic_write_json
from hpcbench.figures.inputs import Inputs
from hpcbench.report.summarize import make_report, text
from hpcbench.states import COMPLETED, RUNNING


def small_run(tmp_path, name="run", factor=1.0):
    p1, p2, p4 = point(), point(nodes=2, rpn=1), point(nodes=2, rpn=2)
    return make_run(tmp_path / name, [(p1, record(p1, 100.0 * factor)), (p2, record(p2, 150.0 * factor)),
                                      (p4, record(p4, 250.0 * factor))])


REFS = """
[defaults]
lower = -0.10
upper = inf

[[reference]]
cluster = "*"
model = "mlp"
backend = "gloo"
nodes = 2
gpus_per_node = 2
throughput = [{thr}, -0.05, 0.5]
step_time_ms = {step}
"""


def test_references_pass_and_fail(cli, tmp_path):
    rd = small_run(tmp_path)
    # 2x2 measured 250 samples/s, step 32*4/250 s = 512 ms
    ok = write(tmp_path / "ok.toml", REFS.format(thr=255.0, step=512.0))
    proc = cli("summarize", str(rd.root), "--references", str(ok), "--out", str(tmp_path / "a"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert len(re.findall(r"\bpass\b", proc.stdout)) == 2 and "FAIL" not in proc.stdout

    bad = write(tmp_path / "bad.toml", REFS.format(thr=300.0, step=512.0))  # 250 < 300 * 0.95: a regression
    proc = cli("summarize", str(rd.root), "--references", str(bad), "--out", str(tmp_path / "b"))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "FAIL" in proc.stdout and "-16.7% vs reference" in proc.stdout
    assert "1 reference check(s) failed" in (tmp_path / "b" / "report.md").read_text()

    # a named cluster that does not match is "not measured", not a failure
    other = write(tmp_path / "other.toml", REFS.format(thr=300.0, step=1.0).replace('"*"', '"elsewhere"'))
    proc = cli("summarize", str(rd.root), "--references", str(other), "--out", str(tmp_path / "c"))
    assert proc.returncode == 0 and "not measured" in proc.stdout


def _mkdir(path):
    path.mkdir()
    return path


def test_bad_input_is_one_line_and_exit_2(cli, tmp_path):
    for args, words in [
        ((str(tmp_path / "nope"),), "no such file or directory"),
        ((str(_mkdir(tmp_path / "empty")),), "not an hpcbench run directory"),
        ((str(small_run(tmp_path).root), "--references", str(write(tmp_path / "r.toml", "[[reference]]\nmodel='x'\n"))),
         "missing key 'backend'"),
        ((str(tmp_path / "run"), "--references", str(write(tmp_path / "s.toml", "[[reference]]\nmodel='x'\nbackend='gloo'\n"
                                                           "nodes=1\ngpus_per_node=1\nthroughput='fast'\n"))),
         "expected a number"),
        (("--compare", str(tmp_path / "run")), "expected 2 arguments"),
    ]:
        proc = cli("summarize", *args)
        assert proc.returncode == 2, (args, proc.stdout, proc.stderr)
        assert words in proc.stderr
        if "expected 2" not in words:
            assert len(proc.stderr.strip().splitlines()) == 1 and proc.stderr.startswith("error: ")


def test_compare_two_runs(cli, tmp_path):
    old, new = small_run(tmp_path, "old"), small_run(tmp_path, "new", factor=1.2)
    proc = cli("summarize", "--compare", str(old.root), str(new.root), "--out", str(tmp_path / "cmp"))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.count("1.200") == 3  # throughput ratio NEW/OLD at each of the three points
    assert proc.stdout.count("faster (p = 0)") == 3  # every step of both runs took the same time: no noise at all
    assert "1.200" in (tmp_path / "cmp" / "compare.md").read_text()


def test_environment_flags_values_that_differ_between_nodes(tmp_path):
    p = point(nodes=2, rpn=1, device="cuda", backend="nccl")
    rd = make_run(tmp_path / "run", [(p, record(p, 100.0, gpu=GPU))])
    atomic_write_json(rd.point(p).dir / "provenance-rank0.json", provenance(0, "node1", "550.54", hostname="gpu01"))
    atomic_write_json(rd.point(p).dir / "provenance-rank1.json", provenance(1, "node2", "535.10", hostname="gpu02"))
    rep = make_report([rd.root])
    env = {r[0]: r for r in next(t for t in rep.tables if t.key == "environment").rows}
    assert env["servers (hosts)"][1] == "2: gpu01, gpu02" and "Slurm nodes" not in env  # one node per host
    assert env["GPU driver"][2] == "DIFFERS between nodes" and "node2: 535.10" in env["GPU driver"][1]
    assert env["GPU model × count"][1] == "NVIDIA A100-SXM4-80GB ×2" and env["GPU model × count"][2] == ""
    assert env["NIC model × count"][1] == "mlx5_core (infiniband, 400 Gb/s) ×4"  # loopback left out
    assert env["InfiniBand HCA × count"][1] == "MT4129 ×4"
    assert env["GPU interconnect"][1].startswith("NVLink (NV18")
    assert env["horovod"][1] == "missing (not installed)"
    assert rep.findings["environment differences between nodes"]
    assert rep.aggs[0].cluster == "alps"  # from SLURM_CLUSTER_NAME in the provenance


def test_environment_from_real_provenance_files(tmp_path):
    """Files written by hpcbench.workloads.provenance.collect on this VM for node1 and node2 (tests/data/provenance)."""
    import shutil

    p = point(nodes=2, rpn=1)
    rd = make_run(tmp_path / "run", [(p, record(p, 100.0))])
    for f in (DATA / "provenance").glob("provenance-rank*.json"):
        shutil.copy(f, rd.point(p).dir / f.name)
    rep = make_report([rd.root])
    env = {r[0]: r for r in next(t for t in rep.tables if t.key == "environment").rows}
    # The minicluster: two slurmd on one host are one server, and the table says so.
    assert env["servers (hosts)"][1] == "1: vm"
    assert env["Slurm nodes"][1] == "2: node1, node2" and "2 Slurm nodes on 1 host(s)" in env["Slurm nodes"][2]
    assert env["OS"][1] == "Debian GNU/Linux 12 (bookworm)" and env["OS"][2] == ""
    assert env["NIC model × count"][1] == "virtio_net (ethernet) ×1"  # lo and ifb* are not hardware
    assert env["GPU model × count"][1].startswith("missing (LookupError: torch sees no CUDA device")
    assert env["GPU driver"][1].startswith("missing (FileNotFoundError: nvidia-smi not found")
    # torch's CUDA/NCCL on a node without GPUs: what torch was built with, not what the node runs
    assert env["horovod"][1] == "0.28.1" and env["NCCL"][1] == "2.30.7 (torch's build; no GPU on this node, so not in use)"
    assert not rep.findings["environment differences between nodes"]
    assert rep.aggs[0].cluster == "mini"


def test_gpu_utilisation_below_80_percent_warns(tmp_path):
    a, b = point(device="cuda", backend="nccl"), point(device="cuda", backend="nccl", rpn=2)
    rd = make_run(tmp_path / "run", [(a, record(a, 100.0, gpu=GPU)), (b, record(b, 150.0, gpu=STARVED))])
    rep = make_report([rd.root])
    gpu = next(t for t in rep.tables if t.key == "gpu")
    assert [r[-1] for r in gpu.rows] == ["ok", "warning: below 80%"]
    assert any("55%" in w and "starving" in w for w in rep.findings["GPU utilisation"])


def test_allreduce_and_comm_compute_points(tmp_path):
    ar1, ar2 = point(kind="collective", nodes=1, rpn=2), point(kind="collective", nodes=2, rpn=2, framework="horovod")
    tr = point(model="lstm", framework="horovod", backend="mpi", rpn=2)
    rd = make_run(tmp_path / "run", [
        (ar1, record(ar1, 1.0, kind="collective", allreduce=allreduce_rows(3.0))),
        (ar2, record(ar2, 1.0, kind="collective", allreduce=allreduce_rows(1.5))),
        (tr, record(tr, 64.0, comm_time_s=0.25, compute_time_s=0.75, comm_fraction=0.25, comm_method="hooks"))])
    rep = make_report([rd.root])
    t = next(t for t in rep.tables if t.key == "allreduce")
    # columns named by what ran and where: framework-backend, hosts x ranks per host
    assert t.headers == ["message size", "ddp-gloo, 1 host × 2", "horovod-gloo, 2 hosts × 2"]
    assert [r[0] for r in t.rows[:-1]] == ["1 KiB", "1 MiB", "1 GiB"] and t.rows[2][1] == "3.00 (2.00), 10 us"  # busbw (algbw), time per operation
    # the speed-of-light row: no log names a link here, so no percentage is made up
    assert t.rows[-1] == ["largest size vs link peak", "peak unknown", "peak unknown"]
    assert all(n.startswith("link peak of") and "unknown" in n for n in t.notes if "link peak" in n)
    comm = next(t for t in rep.tables if t.key == "comm")
    assert comm.rows == [[tr.label, "horovod", "1,000", "750.00", "250.00", "25%"]] and "measured by: hooks" in comm.notes
    # allreduce points are neither in the scaling tables nor in the throughput plots
    assert all(r[0] != "ddp" or r[2] == "lstm" for r in rep.tables[0].rows)
    from hpcbench.report import plots

    ax = plots.allreduce_bw(rep.aggs).axes[0]
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"  # log-log: 3 GB/s next to 360 GB/s both show
    assert [len(line.get_xdata()) for line in ax.get_lines()] == [3, 3]
    fig = ax.figure
    fig.canvas.draw()
    ticks = {t.get_text() for t in ax.get_xticklabels() if t.get_text()}
    assert {"1 KiB", "1 MiB", "1 GiB"} <= ticks and not any(t.startswith("$2^") for t in ticks)
    lat = plots.allreduce_latency(rep.aggs).axes[0]  # small messages only: 1 KiB of the three sizes
    assert [list(line.get_xdata()) for line in lat.get_lines()] == [[1024], [1024]] and "µs" in lat.get_ylabel()
    fig = plots.comm_compute(rep.aggs)
    heights = sorted(p.get_height() for p in fig.axes[0].patches)
    assert heights == [250.0, 750.0]


def test_partial_run_says_so():
    live = Sample(source="run", label="gloo-n2x2", state=RUNNING, ok=False, final=False, framework="ddp",
                  backend="gloo", model="mlp", nodes=2, ranks_per_node=2, world_size=4, batch_size=32)
    done = Sample(source="run", label="gloo-n1x1", state=COMPLETED, ok=True, final=True, framework="ddp", backend="gloo",
                  model="mlp", nodes=1, ranks_per_node=1, world_size=1, batch_size=32, throughput=10.0, step_time_s=3.2)
    rep = make_report([], inputs=Inputs(samples=[live, done]))
    assert rep.partial and "1 of 2 points are still queued or running (RUNNING)" in rep.partial_note()
    out = text(rep)
    assert out.startswith("*** PARTIAL RESULT") and "gloo-n2x2" in out
    assert json.loads(text(rep, "json"))[0]["state"] == RUNNING
    latex = text(rep, "latex")
    assert latex.count("\\begin{longtable}") == 3 and "PARTIAL RESULT" in latex  # intra, inter, comm/compute


def test_comm_time_carries_its_ci_and_says_when_it_is_within_noise(tmp_path):
    # comm = step - compute: the CI half-widths of two independent means combine as sqrt(0.3^2 + 0.4^2) = 0.5 s.
    sig, noise = point(model="lstm", rpn=2), point(model="lstm", nodes=2, rpn=2)
    rd = make_run(tmp_path / "run", [
        (sig, record(sig, 64.0, comm_time_s=0.6, compute_time_s=0.4, compute_time_ci95_s=0.4, step_time_ci95_s=0.3,
                     comm_fraction=0.6, comm_method="copy")),
        (noise, record(noise, 128.0, comm_time_s=0.2, compute_time_s=0.8, compute_time_ci95_s=0.4,
                       step_time_ci95_s=0.3, comm_fraction=0.2, comm_method="copy"))])
    comm = next(t for t in make_report([rd.root]).tables if t.key == "comm")
    assert [r[4] for r in comm.rows] == ["600.00 ± 500.00", "200.00 (0.00–700.00) (within noise)"]  # never below 0
    assert any(n.startswith("within noise:") for n in comm.notes)
    # The tidy CSV / JSON keep the compute CI for people who redo the arithmetic.
    from hpcbench.figures.samples import from_record
    from hpcbench.report.tidy import tidy_row

    row = tidy_row(from_record(record(sig, 64.0, compute_time_s=0.4, compute_time_ci95_s=0.4), "run"))
    assert (row["compute_time_ms"], row["compute_time_ci95_ms"]) == (400.0, 400.0)


def test_refresh_reads_each_run_once_as_load_finds_runs(cli, tmp_path):
    """--refresh gets each run's states where load() reads the run (one walk, a run folder not descended into),
    and the summary is made of the states it gave."""
    from dataclasses import replace

    from hpcbench.figures.inputs import load
    from hpcbench.states import collect

    runs = [small_run(tmp_path / "runs", name) for name in ("a", "b")]
    (runs[0].root / "points" / "copy").mkdir(parents=True)  # a plan.json inside a run is the run's own business
    (runs[0].root / "points" / "copy" / "plan.json").write_text((runs[0].root / "plan.json").read_text())
    asked = []

    def states(rd):
        asked.append(rd.root.name)
        return [replace(s, state=RUNNING) for s in collect(rd)]

    got = load([tmp_path / "runs"], states=states)
    assert asked == ["a", "b"] and {s.state for s in got.samples} == {RUNNING}
    proc = cli("summarize", str(tmp_path / "runs"), "--refresh", "--no-history", "--out", str(tmp_path / "rep"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = (tmp_path / "rep" / "records.csv").read_text().splitlines()
    assert len(rows) == 7 and all(",COMPLETED," in r for r in rows[1:]), rows
