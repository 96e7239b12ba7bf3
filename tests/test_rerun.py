"""Re-runs on the real local Slurm: kill -9 mid-sweep, the lock, throttling, --force, one squeue per status.

Every job here is submitted with --hold, so none runs or takes a CPU from the shared cluster; each
test cancels exactly the jobs of its own run.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import REPO, run_cli, write

from hpcbench.rundir import RunDir
from hpcbench.submit import slurm

pytestmark = pytest.mark.slurm


def held_sweep(tmp: Path, n: int, extra: str = "") -> Path:
    sizes = ", ".join(str(i + 1) for i in range(n))
    return write(tmp / "held.toml", f"[slurm]\ntime = \"2\"\n{extra}\n[matrix]\nbatch_size = [{sizes}]\n")


def events(run: Path, name: str) -> list[dict]:
    rd = RunDir(run)
    return [e for e in rd.events() if e["event"] == name] if rd.ledger.exists() else []


def wait_for(cond, timeout: float = 60, what: str = "") -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def start_sweep(sweep: Path, run: Path, *extra: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "hpcbench", "sweep", str(sweep), "--backend", "sbatch",
                             "--hold", "--run-dir", str(run), *extra], cwd=REPO, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env={**os.environ, **(env or {})})


def queued_by_point(rd: RunDir) -> dict[str, list[str]]:
    """This run's jobs in the queue, found by their comment (not by the ledger), per point id."""
    out: dict[str, list[str]] = {}
    for job in slurm.snapshot().values():
        pid = rd.comment_point(job.comment)
        if pid is not None and job.active:
            out.setdefault(pid, []).append(job.job_id)
    return out


def test_kill_9_mid_sweep_then_rerun_submits_each_point_exactly_once(tmp_path, slurm_cluster):
    sweep, run = held_sweep(tmp_path, 8), tmp_path / "run"
    # A slow scheduler answer: 3 s between sbatch returning and the ledger recording the job id.
    # Four submissions are in flight at a time, so the kill lands with jobs queued but not recorded.
    proc = start_sweep(sweep, run, env={"HPCBENCH_TEST_SUBMIT_DELAY_S": "3"})
    try:
        wait_for(lambda: len(events(run, "submitting")) >= 1, what="the first intent")
        second = run_cli("sweep", str(sweep), "--backend", "sbatch", "--hold", "--run-dir", str(run))
        assert second.returncode == 2, second.stdout + second.stderr
        assert f"another hpcbench (pid {proc.pid}) is submitting to this run directory" in second.stderr

        wait_for(lambda: len(events(run, "submitting")) >= 5, what="the fifth intent")
        time.sleep(1.5)  # sbatch has answered for the jobs in flight; their ids are not in the ledger yet
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        recorded = len(events(run, "submitted"))
        rd = RunDir.open(run)
        in_queue = sum(len(v) for v in queued_by_point(rd).values())
        assert 1 <= recorded < in_queue, (recorded, in_queue)  # the kill left queued jobs unrecorded

        again = run_cli("sweep", str(sweep), "--backend", "sbatch", "--hold", "--run-dir", str(run))
        assert again.returncode == 0, again.stdout + again.stderr
        assert f"{in_queue - recorded} job(s) found and recorded" in again.stdout, again.stdout
        assert f"left alone: {in_queue} PENDING" in again.stdout, again.stdout
        queued = queued_by_point(rd)
        assert sorted(queued) == sorted(p.id for p in rd.points())
        assert all(len(ids) == 1 for ids in queued.values()), queued
        subs = rd.submissions()
        assert {pid: [s["job_id"]] for pid, s in subs.items()} == queued
        assert sum(1 for e in events(run, "submitted") if e.get("recovered")) == in_queue - recorded

        # Status of all eight: one squeue call, counted by a shim ahead of the real one on PATH.
        shim, log = tmp_path / "shim", tmp_path / "calls.log"
        shim.mkdir()
        for tool in ("squeue", "sacct"):
            real = subprocess.run(["which", tool], capture_output=True, text=True, check=True).stdout.strip()
            write(shim / tool, f"#!/bin/sh\necho {tool} >> {log}\nexec {real} \"$@\"\n").chmod(0o755)
        st = run_cli("status", str(run), env={"PATH": f"{shim}:{os.environ['PATH']}"})
        assert st.returncode == 0 and "8 points: 8 PENDING" in st.stdout, st.stdout + st.stderr
        assert log.read_text().split() == ["squeue"]
    finally:
        if proc.poll() is None:
            proc.kill()
        run_cli("cancel", str(run))


def test_max_jobs_in_queue_waits_and_force_resubmits_without_doubles(tmp_path, slurm_cluster):
    sweep, run = held_sweep(tmp_path, 3, "max_jobs_in_queue = 2"), tmp_path / "run"
    proc = start_sweep(sweep, run, "--poll", "0.5")
    try:
        wait_for(lambda: len(events(run, "submitted")) >= 2, what="two submissions")
        time.sleep(3)
        assert len(events(run, "submitted")) == 2 and proc.poll() is None, "the third job did not wait"
        first = events(run, "submitted")[0]["job_id"]
        slurm.cancel([first])  # frees a place in the queue
        out, _ = proc.communicate(timeout=60)
        assert proc.returncode == 0, out
        assert "2 of this run's jobs queued (max_jobs_in_queue = 2): waiting" in out
        assert len(events(run, "submitted")) == 3

        rd = RunDir.open(run)
        before = {pid: s["job_id"] for pid, s in rd.submissions().items()}
        # The same points without the limit (held jobs never leave the queue to make room).
        sweep = held_sweep(tmp_path, 3)
        forced = run_cli("sweep", str(sweep), "--backend", "sbatch", "--hold", "--force", "--run-dir", str(run))
        assert forced.returncode == 0, forced.stdout + forced.stderr
        after = {pid: s["job_id"] for pid, s in rd.submissions().items()}
        assert set(after) == set(before) and not set(after.values()) & set(before.values())
        queued = queued_by_point(rd)
        assert {pid: ids for pid, ids in queued.items()} == {pid: [j] for pid, j in after.items()}
    finally:
        if proc.poll() is None:
            proc.kill()
        run_cli("cancel", str(run))
