"""A sweep with an environment-variable axis and a steps axis, run for real on the local 2-node Slurm (issue 14):
the job scripts export each point's values, the ranks see them (their records and provenance say so), each job
gets its own time limit, and the summary keeps the points apart."""
from __future__ import annotations

import csv
import json
import subprocess

from conftest import sweep_ok, write

from hpcbench.report.summarize import make_report

SWEEP = """
[sweep]
name = "axes"
[slurm]
partition = "debug"
time = "00:10:00"
cpus_per_task = 1
[workload]
framework = "ddp"
backend = "gloo"
model = "mlp"
device = "cpu"
batch_size = 16
warmup_steps = 1
[matrix]
ranks_per_node = [1]
[matrix.env]
NCCL_IB_DISABLE = ["0", "1"]
[[zip]]                 # steps move with nodes, and the 2-node jobs get a longer time limit
nodes = [1, 2]
steps = [2, 3]
time = ["00:04:00", "00:05:00"]
"""


def test_env_and_steps_axes_on_two_node_slurm(cli, tmp_path, slurm_cluster):
    rd = sweep_ok(cli, write(tmp_path / "axes.toml", SWEEP), tmp_path / "run")
    points = rd.points()
    assert sorted((dict(p.env)["NCCL_IB_DISABLE"], p.nodes, p.steps) for p in points) == [
        ("0", 1, 2), ("0", 2, 3), ("1", 1, 2), ("1", 2, 3)]
    jobs = rd.submissions()
    for p in points:
        want, limit = dict(p.env)["NCCL_IB_DISABLE"], {1: "00:04:00", 2: "00:05:00"}[p.nodes]
        script = rd.point(p).job_script.read_text()
        assert f"export NCCL_IB_DISABLE={want}\n" in script and f"#SBATCH --time={limit}\n" in script
        # Slurm keeps a finished job for MinJobAge (600 s here): it ran with the point's own time limit
        shown = subprocess.run(["scontrol", "show", "job", jobs[p.id]["job_id"]], capture_output=True, text=True,
                               check=True).stdout
        assert f"TimeLimit={limit}" in shown and f"NumNodes={p.nodes}" in shown
        rec = json.loads(rd.point(p).result.read_text())
        assert rec["params"]["env"] == {"NCCL_IB_DISABLE": want} and rec["params"]["steps"] == p.steps
        assert len(rec["step_times_s"]) == p.steps
        provs = [json.loads(f.read_text()) for f in rd.point(p).provenances()]
        assert len(provs) == p.nodes and all(d["env"]["NCCL_IB_DISABLE"] == want for d in provs)
        assert {d["slurm_node"] for d in provs} == ({"node1", "node2"} if p.nodes == 2 else {provs[0]["slurm_node"]})
    rows = list(csv.DictReader((rd.root / "summary.csv").open()))
    assert sorted((r["env.NCCL_IB_DISABLE"], r["nodes"], r["steps"], r["state"]) for r in rows) == [
        ("0", "1", "2", "COMPLETED"), ("0", "2", "3", "COMPLETED"), ("1", "1", "2", "COMPLETED"),
        ("1", "2", "3", "COMPLETED")]
    rep = make_report([rd.root])
    assert len(rep.aggs) == 4 and all(a.n_ok == 1 for a in rep.aggs)  # never averaged together
    assert sorted(a.apart for a in rep.aggs) == ["steps=2, NCCL_IB_DISABLE=0", "steps=2, NCCL_IB_DISABLE=1",
                                                 "steps=3, NCCL_IB_DISABLE=0", "steps=3, NCCL_IB_DISABLE=1"]
    shown = cli("summarize", str(rd.root), "--out", str(tmp_path / "report"))
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.count("NCCL_IB_DISABLE=1") >= 2 and "settings" in shown.stdout
