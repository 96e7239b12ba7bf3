"""The five faults of a real cluster, on the real local Slurm: each shows up in status and summarize with
its state and reason, and resubmit redoes only the points that need it.

The faults run concurrently where the two small nodes allow it (module fixture), in two phases: the
node-failure job first with the time-limit job beside it on node1, then the others. Jobs are pinned
with --nodelist so that setting node2 DOWN can only hit the job meant to meet it.
"""
from __future__ import annotations

import csv
import json
import subprocess
import time
from pathlib import Path

import pytest
from conftest import run_cli, write

from hpcbench.rundir import RunDir
from hpcbench.states import collect
from hpcbench.submit import slurm
from hpcbench.submit.status import scheduler_view

pytestmark = pytest.mark.slurm

LONG = "[workload]\nsteps = 10000000\nwarmup_steps = 1\n"


def sweep(tmp: Path, name: str, body: str) -> Path:
    return write(tmp / f"{name}.toml", f"[sweep]\nname = \"{name}\"\n{body}")


def submit(tmp: Path, name: str, body: str) -> Path:
    run = tmp / name
    proc = run_cli("sweep", str(sweep(tmp, name, body)), "--backend", "sbatch", "--run-dir", str(run))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return run


def wait_running(run: Path, timeout: float = 400) -> str:
    rd = RunDir.open(run)
    [job] = [s["job_id"] for s in rd.submissions().values() if s.get("job_id")]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        info = slurm.snapshot().get(job)
        if info is not None and info.state == "RUNNING" and list(rd.points_root.glob("*/job-*.out")):
            return job
        time.sleep(0.5)
    raise AssertionError(f"job {job} did not start in {timeout}s")


def wait_final(run: Path, timeout: float = 400) -> subprocess.CompletedProcess[str]:
    return run_cli("status", str(run), "--wait", "--poll", "1", timeout=timeout)


def rows(run: Path) -> list[dict[str, str]]:
    proc = run_cli("summarize", str(run), "--format", "csv")
    assert proc.returncode == 0, proc.stderr
    return list(csv.DictReader(proc.stdout.splitlines()))


@pytest.fixture(scope="module")
def faults(tmp_path_factory, slurm_cluster):
    tmp = tmp_path_factory.mktemp("faults")
    runs: dict[str, Path] = {}
    try:
        yield _run_faults(tmp, runs)
    finally:  # whatever failed above, leave none of these jobs in the shared queue
        for run in runs.values():
            run_cli("cancel", str(run))


def _run_faults(tmp: Path, runs: dict[str, Path]) -> dict[str, Path]:
    # Phase 1: a 2-node job meets node2 going DOWN; the time-limit job runs beside it on node1.
    runs["timeout"] = submit(tmp, "timeout", LONG + "[slurm]\ntime = \"1\"\nsbatch_args = [\"--nodelist=node1\"]\n")
    runs["node"] = submit(tmp, "node", LONG + "[slurm]\ntime = \"5\"\n[matrix]\nnodes = [2]\n")
    wait_running(runs["node"])
    time.sleep(3)  # the ranks are past start-up: the failure hits a running job step
    try:
        subprocess.run(["scontrol", "update", "nodename=node2", "state=down", "reason=hpcbench-test"], check=True)
        time.sleep(2)
    finally:
        # With ReturnToService=2 the node may already be back; then resume says so and that is fine.
        subprocess.run(["scontrol", "update", "nodename=node2", "state=resume"], capture_output=True, check=False)
    # Phase 2: a cancelled job on node1, a crashing rank and a rendezvous timeout on node2.
    runs["cancel"] = submit(tmp, "cancel", LONG + "[slurm]\ntime = \"5\"\nsbatch_args = [\"--nodelist=node1\"]\n")
    runs["crash"] = submit(tmp, "crash", "[workload]\nsteps = 5\nwarmup_steps = 1\nfail_rank = 1\nfail_step = 3\n"
                                         "[slurm]\ntime = \"5\"\nsbatch_args = [\"--nodelist=node2\"]\n"
                                         "[matrix]\nranks_per_node = [1, 2]\n")
    runs["rendezvous"] = submit(tmp, "rendezvous", "[workload]\nsteps = 5\nfail_rank = 1\nfail_step = 0\n"
                                                   "init_timeout_s = 8\n[slurm]\ntime = \"5\"\n"
                                                   "sbatch_args = [\"--nodelist=node2\"]\n[matrix]\nranks_per_node = [2]\n")
    wait_running(runs["cancel"])
    cancelled = run_cli("cancel", str(runs["cancel"]))
    assert cancelled.returncode == 0 and "cancelled 1 job(s)" in cancelled.stdout, cancelled.stdout + cancelled.stderr
    for name, run in runs.items():
        proc = wait_final(run)
        assert "points:" in proc.stdout, f"{name}: {proc.stdout}{proc.stderr}"
    return runs


def test_scancel_of_a_running_job_is_cancelled(faults):
    [row] = rows(faults["cancel"])
    assert row["state"] == "CANCELLED", row
    assert "CANCELLED" in row["reason"], row
    events = [json.loads(line) for line in (faults["cancel"] / "ledger.jsonl").read_text().splitlines()]
    # the cancel, then (from `status`) Slurm's word on the job's end, which the summary above read
    assert [e["event"] for e in events][-2:] == ["cancelled", "ended"], events
    assert events[-2]["reason"] == "hpcbench cancel" and events[-1]["state"] == "CANCELLED"


def test_node_down_during_a_two_node_job_is_node_fail(faults):
    [row] = rows(faults["node"])
    assert row["state"] == "NODE_FAIL", row
    assert "NODE" in row["reason"].upper(), row
    # Ended, not requeued: the job must not silently start again over its own logs.
    rd = RunDir.open(faults["node"])
    assert all(s.final for s in collect(rd, scheduler_view(rd)))


def test_time_limit_is_timeout(faults):
    [row] = rows(faults["timeout"])
    assert row["state"] == "TIMEOUT", row
    assert "TIME" in row["reason"].upper(), row


def test_rank_crash_fails_only_that_point_and_resubmit_redoes_only_it(faults):
    run = faults["crash"]
    by_ranks = {r["ranks_per_node"]: r for r in rows(run)}
    # fail_rank = 1 does not exist in the 1-rank point: it completes.
    assert by_ranks["1"]["state"] == "COMPLETED" and float(by_ranks["1"]["throughput"]) > 0
    crashed = by_ranks["2"]
    assert crashed["state"] == "FAILED", crashed
    assert "rank 1" in crashed["reason"] and "InjectedFault: injected failure of rank 1 at step 3" in crashed["reason"]

    rd = RunDir.open(run)
    before = {p: s["job_id"] for p, s in rd.submissions().items()}
    proc = run_cli("resubmit", str(run), "--hold")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    try:
        after = {p: s["job_id"] for p, s in rd.submissions().items()}
        ok_id, bad_id = by_ranks["1"]["point_id"], crashed["point_id"]
        assert after[ok_id] == before[ok_id], "the completed point was resubmitted"
        assert after[bad_id] != before[bad_id]
        assert "left alone: 1 COMPLETED" in proc.stdout
        # The failed attempt's records moved aside; the completed point kept its result.
        [bad] = [p for p in rd.points() if p.id == bad_id]
        assert list((rd.point(bad).dir / "attempts" / before[bad_id]).glob("error-rank1.json"))
        assert not rd.point(bad).errors()
        states = {s.point.id: s.state for s in collect(rd, scheduler_view(rd))}
        assert states == {ok_id: "COMPLETED", bad_id: "PENDING"}
    finally:
        cancel = run_cli("cancel", str(run))
    assert f"cancelled 1 job(s): {after[bad_id]}" in cancel.stdout, cancel.stdout + cancel.stderr


def test_rendezvous_timeout_is_failed_with_the_timeout_as_reason(faults):
    [row] = rows(faults["rendezvous"])
    assert row["state"] == "FAILED", row
    # Rank 1 never joins; rank 0's process-group set-up times out and is the root cause.
    assert row["reason"].startswith("rank 0 on "), row
    assert "timed out" in row["reason"].lower() or "timeout" in row["reason"].lower(), row


def test_status_table_names_every_fault(faults):
    for name, state in [("cancel", "CANCELLED"), ("node", "NODE_FAIL"), ("timeout", "TIMEOUT")]:
        proc = run_cli("status", str(faults[name]))
        assert proc.returncode == 0 and f"1 points: 1 {state}" in proc.stdout, proc.stdout
