"""`hpcbench hunt` and `--exclude-nodes` on the real local Slurm: a hunt of a healthy cluster names no one and
writes hunt.json with its pair matrix; a sweep given a hunt's suspects keeps every rank off them and records
which nodes were kept out and why. (The degraded-node cases run on the namespaced cluster: test_hunt_netns.py.)"""
from __future__ import annotations

import csv
import json

import pytest
from conftest import REPO, write

from hpcbench.hunt import record
from hpcbench.hunt.decide import PairTest, Probe, decide
from hpcbench.hunt.run import Allocation, Hunt, HuntSettings

SWEEP = """cluster = "{cluster}"
[sweep]
name = "excl"
[slurm]
time = "00:05:00"
[workload]
framework = "ddp"
backend = "gloo"
model = "mlp"
steps = 5
warmup_steps = 1
[matrix]
nodes = [1]
ranks_per_node = [1, 2]
"""


def _hunt_json(tmp_path, slow: str | None) -> str:
    """A hunt record as `hpcbench hunt` writes it, from the decision over pair timings of 4 nodes."""
    nodes = ("node1", "node2", "node3", "node4")
    pairs = [("node1", "node2"), ("node3", "node4"), ("node1", "node3"), ("node2", "node4"), ("node1", "node4"),
             ("node2", "node3")]
    tests = [PairTest(a, b, tuple(x * (0.2 if slow in (a, b) else 1.0) for x in (20e6, 21e6, 19e6)), (1e-4,) * 3, i // 2)
             for i, (a, b) in enumerate(pairs)]
    h = Hunt(HuntSettings(nodes=nodes), Allocation("42", nodes, own=True),
             decide(tests, [Probe(n, (0.1, 0.11, 0.1)) for n in nodes]), tests, [], 3, [1.0, 1.0, 1.0])
    return str(record.write(h, tmp_path / "hunt"))


def test_plan_with_exclude_nodes_from_a_hunt_writes_sbatch_exclude_and_records_why(cli, tmp_path):
    hunt_json = _hunt_json(tmp_path, slow="node2")
    assert json.loads(open(hunt_json).read())["excluded"] == ["node2"]
    sweep = write(tmp_path / "s.toml", SWEEP.format(cluster=REPO / "clusters" / "minicluster.toml"))
    proc = cli("plan", str(sweep), "--run-dir", str(tmp_path / "run"), "--exclude-nodes", f"@{hunt_json}")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "excluding node2 (from " in proc.stdout
    scripts = sorted((tmp_path / "run" / "points").glob("*/job.sh"))
    assert len(scripts) == 2 and all("#SBATCH --exclude=node2\n" in s.read_text() for s in scripts)
    ex = json.loads((tmp_path / "run" / "excluded.json").read_text())
    assert ex["nodes"] == ["node2"] and ex["why"]["node2"].startswith("link: 3 of 3 pairs slow")
    assert ex["source"] == hunt_json


def test_a_healthy_hunt_excludes_no_one_and_a_host_list_works_too(cli, tmp_path):
    sweep = write(tmp_path / "s.toml", SWEEP.format(cluster=REPO / "clusters" / "minicluster.toml"))
    proc = cli("plan", str(sweep), "--run-dir", str(tmp_path / "a"), "--exclude-nodes", f"@{_hunt_json(tmp_path, None)}")
    assert proc.returncode == 0 and "--exclude" not in (next((tmp_path / "a").glob("points/*/job.sh"))).read_text()
    proc = cli("plan", str(sweep), "--run-dir", str(tmp_path / "b"), "--exclude-nodes", "node[3-4]")
    assert proc.returncode == 0, proc.stderr
    assert "#SBATCH --exclude=node3,node4\n" in next((tmp_path / "b").glob("points/*/job.sh")).read_text()


@pytest.mark.parametrize("arg, says", [("@missing.json", "missing.json: no such file"),
                                       ("@{bad}", "not hpcbench.hunt/1"), ("@{garbage}", "not a hunt record")])
def test_exclude_nodes_bad_input_is_one_line_and_exit_2(cli, tmp_path, arg, says):
    bad = write(tmp_path / "bad.json", '{"schema": "hpcbench.result/4"}')
    garbage = write(tmp_path / "garbage.json", "{not json")
    sweep = write(tmp_path / "s.toml", SWEEP.format(cluster=REPO / "clusters" / "minicluster.toml"))
    proc = cli("plan", str(sweep), "--run-dir", str(tmp_path / "r"), "--exclude-nodes",
               arg.format(bad=bad, garbage=garbage), cwd=tmp_path)
    assert proc.returncode == 2 and says in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize("flag", ["--rounds", "--bytes", "--repeats", "--nodes-count"])
def test_hunt_refuses_a_count_below_one_before_it_allocates(cli, tmp_path, flag):
    proc = cli("hunt", "--nodes", "node[1-2]", flag, "0", "--out", str(tmp_path / "h"))
    assert proc.returncode == 2 and f"hunt {flag} 0: must be 1 or more" in proc.stderr, proc.stderr
    assert len(proc.stderr.strip().splitlines()) <= 2 and not (tmp_path / "h").exists()


@pytest.mark.slurm
def test_real_hunt_of_the_two_nodes_and_a_sweep_that_keeps_off_an_excluded_node(cli, tmp_path, slurm_cluster):
    out = tmp_path / "hunt"
    proc = cli("hunt", "--nodes", "node[1-2]", "--cluster", "minicluster", "--out", str(out), "--repeats", "2",
               timeout=900)
    assert "hunt over 2 nodes (node1, node2)" in proc.stdout, proc.stdout + proc.stderr
    doc = json.loads((out / "hunt.json").read_text())
    assert doc["schema"] == "hpcbench.hunt/1" and doc["nodes"] == ["node1", "node2"] and not doc["failures"]
    (pair,) = doc["pairs"]
    assert {pair["a"], pair["b"]} == {"node1", "node2"} and len(pair["bandwidth_Bps"]) == 2
    assert all(b > 1e6 for b in pair["bandwidth_Bps"]) and all(0 < t < 1 for t in pair["latency_s"])
    assert sorted(p["node"] for p in doc["probes"]) == ["node1", "node2"]
    # Two nodes make one pair: a slow pair could not be told from a slow node, so only the probes judge here.
    assert (out / "hunt-pairs.png").stat().st_size > 10_000
    assert proc.returncode == (0 if doc["healthy"] else 1)

    # node2's CPU quota at 30% (each node of this cluster has a core of its own): a compute suspect.
    assert cli("minicluster", "degrade", "node2", "--cpu", "0.3").returncode == 0
    try:
        proc = cli("hunt", "--nodes", "node[1-2]", "--cluster", "minicluster", "--out", str(tmp_path / "cpu"),
                   "--repeats", "2", "--no-plots", timeout=900)
    finally:
        assert cli("minicluster", "restore", "node2").returncode == 0
    doc = json.loads((tmp_path / "cpu" / "hunt.json").read_text())
    assert proc.returncode == 1 and [(s["node"], s["kind"]) for s in doc["suspects"]] == [("node2", "compute")], \
        proc.stdout

    sweep = write(tmp_path / "s.toml", SWEEP.format(cluster=REPO / "clusters" / "minicluster.toml"))
    run = tmp_path / "run"
    proc = cli("sweep", str(sweep), "--backend", "sbatch", "--wait", "--poll", "1", "--run-dir", str(run),
               "--exclude-nodes", "node2")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = list(csv.DictReader((run / "summary.csv").open()))
    assert len(rows) == 2 and all(r["state"] == "COMPLETED" and r["nodes_seen"] == "node1" for r in rows), rows
    proc = cli("summarize", str(run), "--out", str(tmp_path / "report"), "--no-plots", "--no-history")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    md = (tmp_path / "report" / "report.md").read_text()
    assert "nodes kept out of the jobs (--exclude-nodes)" in md and "run: node2 (from command line)" in md, md
    # a resubmit keeps the run's exclusion
    proc = cli("resubmit", str(run), "--state", "COMPLETED", "--backend", "sbatch", "--wait", "--poll", "1")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "excluding node2 (from command line" in proc.stdout
    rows = list(csv.DictReader((run / "summary.csv").open()))
    assert all(r["nodes_seen"] == "node1" for r in rows), rows
