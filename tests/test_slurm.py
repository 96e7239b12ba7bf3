"""Integration: sweeps/ci.toml on the real 2-node Slurm, through sbatch and submitit."""
from __future__ import annotations

import csv
import json

import pytest
from conftest import REPO, write

from hpcbench.parse import parse_file
from hpcbench.rundir import RunDir


@pytest.mark.slurm
@pytest.mark.parametrize("backend", ["sbatch", "submitit"])
def test_ci_sweep_on_two_node_slurm(cli, tmp_path, slurm_cluster, backend):
    run = tmp_path / "run"
    proc = cli("sweep", str(REPO / "sweeps" / "ci.toml"), "--backend", backend, "--wait", "--poll", "1",
               "--run-dir", str(run))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = list(csv.DictReader((run / "summary.csv").open()))
    assert len(rows) == 4
    assert all(r["state"] == "COMPLETED" and float(r["throughput"]) > 0 for r in rows), rows
    for r in rows:
        # Both slurmd share one host, so the Slurm node name (SLURMD_NODENAME) is what tells them apart.
        expected = "node1 node2" if r["nodes"] == "2" else None
        if expected:
            assert r["nodes_seen"] == expected, r
        else:
            assert r["nodes_seen"] in ("node1", "node2"), r
    rd = RunDir.open(run)
    subs = rd.submissions()
    assert {s["backend"] for s in subs.values()} == {backend}
    assert all(s["job_id"].isdigit() for s in subs.values())
    two = next(p for p in rd.points() if (p.nodes, p.ranks_per_node) == (2, 2))
    rec = json.loads(rd.point(two).result.read_text())
    assert sorted((r["slurm_node"], r["local_rank"]) for r in rec["ranks"]) == [
        ("node1", 0), ("node1", 1), ("node2", 0), ("node2", 1)]
    assert rec["job_id"] == subs[two.id]["job_id"]
    # hpcbench parse reads its own job log: the summary line and the record, the same as result.json
    [parsed] = [d for d in map(parse_file, rd.point(two).logs()) if d["records"]]  # rank 0's stdout
    assert parsed["records"] == [rec] and parsed["warnings"] == []
    assert parsed["hpcbench"] == [{"label": two.label, "kind": "train", "throughput": pytest.approx(rec["throughput"], abs=0.05),
                                   "unit": "samples/s", "step_ms": pytest.approx(rec["mean_step_time_s"] * 1e3, abs=0.005),
                                   "ranks": 4}]
    if backend == "sbatch":
        check_report_of_ci_run(cli, run, tmp_path / "report")


def check_report_of_ci_run(cli, run, out):
    """The scaling report of the real run: both tables, the plots, one tidy row per point."""
    proc = cli("summarize", str(run), "--out", str(out), "--format", "markdown")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    md = (out / "report.md").read_text()
    intra = md.split("## Intra-node scaling")[1].split("##")[0]
    inter = md.split("## Inter-node scaling")[1].split("##")[0]
    # The minicluster's two nodes share one host: its 2-node points are one server, flagged, not inter-node.
    assert intra.count("| ddp ") == 4 and inter.count("| ddp ") == 0, md
    assert intra.count("(2 Slurm nodes on ") == 2
    assert "| 1.00 " in intra and "100%" in intra  # the 1-rank baseline against itself
    assert "Baseline (auto)" in md and "weak (batch/rank 32)" in md
    for png in ("scalability.png", "speedup_efficiency.png", "comm_compute.png"):
        assert (out / png).stat().st_size > 10_000 and f"]({png})" in md
    rows = list(csv.DictReader((out / "records.csv").open()))
    assert len(rows) == 4 and all(float(r["throughput"]) > 0 and r["step_time_ci95_ms"] for r in rows)
    assert {r["nodes_seen"] for r in rows if r["nodes"] == "2"} == {"node1 node2"}
    assert "## Findings" in md and "at 4 ranks, mlp: only ddp-gloo" in md  # CPU ranks are not GPUs; one point: no "best"
    # gloo on CPU prints no NCCL lines: its ranks' provenance names the interface (the profile's GLOO_SOCKET_IFNAME)
    transports = md.split("## Transports")[1].split("\n## ")[0] if "## Transports" in md else md
    assert transports.count("| Gloo TCP over eth0 |") == 4, transports  # the namespaced nodes' own link


@pytest.mark.slurm
def test_mpirun_launcher_inside_allocation(cli, tmp_path, slurm_cluster):
    sweep = write(tmp_path / "mpirun.toml", """
[slurm]
launcher = "mpirun"
time = "00:05:00"
[workload]
steps = 5
warmup_steps = 1
[matrix]
nodes = [2]
ranks_per_node = [1]
""")
    # One rank per node: a minicluster node on a 2-core host has a single core of its own (its cpuset), and mpirun
    # refuses to bind two ranks to one core ("binding more processes than cpus").
    run = tmp_path / "run"
    proc = cli("sweep", str(sweep), "--backend", "sbatch", "--wait", "--poll", "1", "--run-dir", str(run))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rd = RunDir.open(run)
    [p] = rd.points()
    assert "mpirun -np 2 --map-by socket --bind-to socket" in rd.point(p).job_script.read_text()
    rec = json.loads(rd.point(p).result.read_text())
    assert sorted(r["slurm_node"] for r in rec["ranks"]) == ["node1", "node2"]


@pytest.mark.slurm
def test_failed_job_is_a_row_with_its_reason(cli, tmp_path, slurm_cluster):
    # A python that does not exist: the job starts, the launcher fails, the script records the exit code.
    sweep = write(tmp_path / "broken.toml", "[slurm]\npython = '/nonexistent/python'\ntime = '2'\n")
    run = tmp_path / "run"
    proc = cli("sweep", str(sweep), "--backend", "sbatch", "--wait", "--poll", "1", "--run-dir", str(run))
    assert proc.returncode == 1
    [row] = list(csv.DictReader((run / "summary.csv").open()))
    assert row["state"] == "FAILED"
    assert row["reason"].startswith("exit code ") and "/nonexistent/python" in row["reason"]
