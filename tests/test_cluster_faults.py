"""When the cluster misbehaves, nothing is lost: the controller stopped mid-sweep, a node's slurmd killed during a
job (resubmitted by hand, and retried automatically with --max-retries), and the disk filling up while a
result or the ledger is written.

Each disruption is short and undone in a finalizer (the cluster is shared): slurmctld restarted with its
saved state, so queued jobs survive; slurmd restarted and the node resumed; the tmpfs unmounted. Jobs carry
this file's own sweep names and only they are cancelled.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import REPO, run_cli, write

from hpcbench.errors import NoSpace
from hpcbench.ops import minicluster, nodes
from hpcbench.rundir import RunDir
from hpcbench.states import collect
from hpcbench.submit import slurm
from hpcbench.submit.status import scheduler_view

LAY = nodes.Layout(minicluster.DEFAULT_DIR.resolve())
NODES = ("node1", "node2")  # the suite's cluster: `minicluster up`'s default shape
SLURM_ENV = {**os.environ, "SLURM_CONF": str(LAY.conf)}
# About 15 s of training on two nodes of the minicluster: long enough to be hit while running, short to redo.
# A rank lost before the rendezvous leaves the other waiting for init_timeout_s: 20 s, not the default 600.
TWO_NODES = "[slurm]\ntime = \"5\"\n[workload]\nsteps = 3000\nwarmup_steps = 1\ninit_timeout_s = 20\n"


def _wait(cond, timeout: float, what: str, step: float = 0.5) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, f"timed out after {timeout:.0f}s waiting for {what}"
        time.sleep(step)


def _ctld_pid() -> int | None:
    return minicluster._alive(LAY.ctld_pid(), "slurmctld")


def _slurmd_pid(node: str) -> int | None:
    return minicluster._alive(LAY.slurmd_pid(node), "slurmd")


def _node_state(node: str) -> str:
    out = subprocess.run(["sinfo", "--noheader", "--Node", "--nodes", node, "--format=%T"], capture_output=True,
                         text=True, env=SLURM_ENV, check=False).stdout
    return out.strip().rstrip("*~#").lower()


def restore_cluster() -> None:
    """Whatever a test stopped comes back: slurmctld with its saved state (queued jobs survive), each slurmd,
    node2 resumed; then `minicluster status` must say up."""
    if _ctld_pid() is None:
        subprocess.run(["slurmctld", "-f", str(LAY.conf)], env=SLURM_ENV, check=True)
        _wait(lambda: "UP" in subprocess.run(["scontrol", "ping"], capture_output=True, text=True, env=SLURM_ENV,
                                              check=False).stdout, 60, "slurmctld to answer")
    for node in NODES:
        if _slurmd_pid(node) is None:
            minicluster.start_slurmd(LAY, node)  # back inside its node's namespaces and cgroups
        if _node_state(node).startswith(("down", "drain", "fail")):
            subprocess.run(["scontrol", "update", f"nodename={node}", "state=resume"], env=SLURM_ENV,
                           capture_output=True, check=False)
    _wait(lambda: all(_node_state(n) in ("idle", "mixed", "allocated") for n in NODES), 90,
          "node1 and node2 to be back")
    up = run_cli("minicluster", "status")
    assert up.returncode == 0, up.stdout + up.stderr


@pytest.fixture
def restored(slurm_cluster):
    try:
        yield
    finally:
        restore_cluster()


def _environ(pid: int) -> dict[str, str]:
    try:
        raw = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return {}
    return dict(kv.split("=", 1) for kv in raw.decode(errors="replace").split("\0") if "=" in kv)


def _ppid(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def node_death(node: str, job: str) -> list[int]:
    """What a node dying does to a job: its slurmd and the job's processes there vanish (SIGKILL). slurmctld
    notices a silent node after SlurmdTimeout (300 s here) and sets it DOWN; the test says so at once."""
    ranks = [int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit()
             and (env := _environ(int(p.name))).get("SLURM_JOB_ID") == job and env.get("SLURMD_NODENAME") == node
             and b"hpcbench.workloads" in Path(f"/proc/{p.name}/cmdline").read_bytes()]
    assert ranks, f"no rank of job {job} on {node}"
    victims = [_slurmd_pid(node), *{_ppid(r) for r in ranks}, *ranks]  # slurmd, the job's slurmstepd, its ranks
    for pid in victims:
        if pid:
            os.kill(pid, signal.SIGKILL)
    subprocess.run(["scontrol", "update", f"nodename={node}", "state=down", "reason=hpcbench test: slurmd killed"],
                   env=SLURM_ENV, check=True)
    return [p for p in victims if p]


def others_leave(node: str, mine: set[str], timeout: float = 180) -> None:
    """Wait (bounded) until no job but ours runs on ``node``: the cluster is shared, and a DOWN node ends its jobs."""
    def free() -> bool:
        out = subprocess.run(["squeue", "--noheader", "--states=running", "--nodelist", node, "--format=%i"],
                             capture_output=True, text=True, env=SLURM_ENV, check=False).stdout.split()
        return not set(out) - mine
    try:
        _wait(free, timeout, f"other jobs to leave {node}", step=2)
    except AssertionError:
        pass  # go on: a neighbour's job there ends NODE_FAIL, which its own test reports


def wait_running(rd: RunDir, job: str, timeout: float = 300) -> None:
    def running() -> bool:
        info = slurm.snapshot().get(job)
        return info is not None and info.state == "RUNNING" and any(rd.points_root.glob(f"*/job-{job}.out")) \
            and any(rd.points_root.glob("*/provenance-rank1.json"))
    _wait(running, timeout, f"job {job} to run")
    time.sleep(5)  # past start-up (torch's import, the rendezvous): the ranks are in their timed steps


def state_line(run: Path) -> str:
    return run_cli("status", str(run)).stdout


# --- the controller stopped while jobs are pending ---------------------------------------------------------------
def test_slurmctld_stopped_mid_sweep_is_unknown_then_right_with_no_resubmission(tmp_path, restored):
    sweep = write(tmp_path / "ctld.toml", "[sweep]\nname = \"faultctld\"\n[slurm]\ntime = \"2\"\n"
                                           "[matrix]\nbatch_size = [1, 2]\n")
    run = tmp_path / "run"
    first = run_cli("sweep", str(sweep), "--backend", "sbatch", "--hold", "--run-dir", str(run))
    assert first.returncode == 0, first.stdout + first.stderr
    rd = RunDir.open(run)
    jobs = {pid: s["job_id"] for pid, s in rd.submissions().items()}
    try:
        pid = _ctld_pid()
        os.kill(pid, signal.SIGTERM)  # slurmctld saves its state and stops
        _wait(lambda: _ctld_pid() is None, 60, "slurmctld to stop")
        down = run_cli("status", str(run))
        assert down.returncode == 0 and "2 points: 2 UNKNOWN" in down.stdout, down.stdout + down.stderr
        assert down.stdout.count("no result yet, and the queue could not be read") == 2, down.stdout
        again = run_cli("sweep", str(sweep), "--backend", "sbatch", "--hold", "--run-dir", str(run))
        assert again.returncode == 2 and again.stderr.count("\n") == 1, again.stdout + again.stderr
        assert "the queue cannot be read (squeue" in again.stderr and "nothing was submitted" in again.stderr

        restore_cluster()
        back = run_cli("status", str(run))
        assert back.returncode == 0 and "2 points: 2 PENDING" in back.stdout, back.stdout + back.stderr
        events = [e["event"] for e in rd.events()]
        assert events.count("submitted") == 2 and events.count("submitting") == 2 and len(events) == 4, events
        assert {pid: s["job_id"] for pid, s in rd.submissions().items()} == jobs
        queued = {j.job_id for j in slurm.snapshot().values() if rd.comment_point(j.comment) and j.active}
        assert queued == set(jobs.values())
    finally:
        restore_cluster()
        run_cli("cancel", str(run))
    print(down.stdout, back.stdout, again.stderr, sep="\n")


# --- a node's slurmd killed during a job ---------------------------------------------------------------------------
def test_slurmd_killed_during_a_job_is_node_fail_and_resubmit_redoes_only_that_point(tmp_path, restored):
    sweep = write(tmp_path / "node.toml", f"[sweep]\nname = \"faultnode\"\n{TWO_NODES}[matrix]\nnodes = [1, 2]\n")
    run = tmp_path / "run"
    first = run_cli("sweep", str(sweep), "--backend", "sbatch", "--hold", "--run-dir", str(run))
    assert first.returncode == 0, first.stdout + first.stderr
    rd = RunDir.open(run)
    job = {p.nodes: rd.submissions()[p.id]["job_id"] for p in rd.points()}
    try:
        subprocess.run(["scontrol", "release", job[1]], env=SLURM_ENV, check=True)
        _wait(lambda: {s.point.nodes: s.state for s in collect(rd, scheduler_view(rd))}[1] == "COMPLETED", 300,
              "the 1-node point to complete")
        others_leave("node2", set(job.values()))
        subprocess.run(["scontrol", "release", job[2]], env=SLURM_ENV, check=True)
        wait_running(rd, job[2])
        node_death("node2", job[2])
        restore_cluster()
        final = run_cli("status", str(run), "--wait", "--poll", "1", timeout=300)
        assert "2 points: 1 COMPLETED, 1 NODE_FAIL" in final.stdout, final.stdout + final.stderr
        [failed] = [s for s in collect(rd, scheduler_view(rd)) if s.point.nodes == 2]
        assert failed.state == "NODE_FAIL" and failed.reason.startswith("Slurm: NODE_FAIL"), failed
        again = run_cli("resubmit", str(run), "--hold")
        assert again.returncode == 0 and "left alone: 1 COMPLETED" in again.stdout, again.stdout + again.stderr
        after = {p.nodes: rd.submissions()[p.id]["job_id"] for p in rd.points()}
        assert after[1] == job[1] and after[2] != job[2]
        shown = state_line(run)
        assert f"attempt 2; earlier: job {job[2]} NODE_FAIL [resubmitted]: Slurm: NODE_FAIL" in shown, shown
    finally:
        restore_cluster()
        run_cli("cancel", str(run))
    print(final.stdout, shown, sep="\n")


# --- retries: the cluster's failures, never the workload's ------------------------------------------------------------
def kill_rank(job: str, rank: int) -> None:
    """One rank's process killed from outside (SIGKILL), the way the OOM killer or an admin's kill -9 does it."""
    [pid] = [int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit()
             and (env := _environ(int(p.name))).get("SLURM_JOB_ID") == job and env.get("SLURM_PROCID") == str(rank)
             and b"hpcbench.workloads" in Path(f"/proc/{p.name}/cmdline").read_bytes()]
    os.kill(pid, signal.SIGKILL)


@pytest.mark.parametrize(("fault", "state", "cause"), [("node", "NODE_FAIL", "node failure"),
                                                        ("rank", "FAILED", "lost peer")])
def test_a_cluster_failure_is_retried_and_the_retry_completes(tmp_path, restored, fault, state, cause):
    sweep = write(tmp_path / "retry.toml", f"[sweep]\nname = \"faultretry\"\n{TWO_NODES}[matrix]\nnodes = [2]\n")
    run = tmp_path / "run"
    proc = subprocess.Popen([sys.executable, "-m", "hpcbench", "sweep", str(sweep), "--backend", "sbatch", "--wait",
                             "--poll", "1", "--max-retries", "1", "--run-dir", str(run)], cwd=REPO, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        _wait(lambda: (run / "ledger.jsonl").exists() and any(s.get("job_id") for s in RunDir(run).submissions().values()), 60, "the submission")
        rd = RunDir.open(run)
        [first] = [s["job_id"] for s in rd.submissions().values()]
        if fault == "node":
            others_leave("node2", {first})
        wait_running(rd, first)
        if fault == "node":
            node_death("node2", first)
            restore_cluster()
        else:
            kill_rank(first, 1)
        out, _ = proc.communicate(timeout=400)
        assert proc.returncode == 0, out
        assert f"{state} ({cause}: " in out and "retry 1 of 1" in out, out
        [st] = collect(rd, scheduler_view(rd))
        assert st.state == "COMPLETED" and st.attempt == 2 and st.job_id != first, st
        [ended] = [e for e in rd.events() if e["event"] == "attempt_ended"]
        assert (ended["job_id"], ended["state"], ended["retry"]) == (first, state, cause)
        shown = state_line(run)
        assert f"attempt 2; earlier: job {first} {state} [retried: {cause}]" in shown, shown
        rows = run_cli("summarize", str(run), "--format", "csv", "--no-history").stdout
        assert f"attempt 2; earlier: job {first} {state}" in rows
    finally:
        if proc.poll() is None:
            proc.kill()
        restore_cluster()
        run_cli("cancel", str(run))
    print(out, shown, sep="\n")


def test_a_workload_fault_is_never_retried(tmp_path, slurm_cluster):
    sweep = write(tmp_path / "crash.toml", "[sweep]\nname = \"faultcrash\"\n[slurm]\ntime = \"5\"\nmax_retries = 3\n"
                                            "[workload]\nsteps = 5\nwarmup_steps = 1\nfail_rank = 1\nfail_step = 3\n"
                                            "[matrix]\nnodes = [2]\n")
    run = tmp_path / "run"
    proc = run_cli("sweep", str(sweep), "--backend", "sbatch", "--wait", "--poll", "1", "--run-dir", str(run))
    try:
        assert proc.returncode == 1, proc.stdout + proc.stderr
        assert "retry" not in proc.stdout.lower(), proc.stdout
        rd = RunDir.open(run)
        events = [e["event"] for e in rd.events()]
        assert events.count("submitted") == 1 and "attempt_ended" not in events, events
        [st] = collect(rd, scheduler_view(rd))
        assert st.state == "FAILED" and st.attempt == 1 and "InjectedFault" in st.reason, st
    finally:
        run_cli("cancel", str(run))


# --- the disk filling up -------------------------------------------------------------------------------------------
@pytest.fixture
def small_disk(tmp_path):
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m", "hpcbench-test", str(mnt)], check=True)
    try:
        yield mnt
    finally:
        if subprocess.run(["umount", str(mnt)], capture_output=True, check=False).returncode:
            subprocess.run(["umount", "-l", str(mnt)], check=True)  # a process still had a file open there


def fill(mnt: Path) -> Path:
    filler = mnt / "filler"
    with open(filler, "ab") as f:
        try:
            while True:
                f.write(b"\0" * 65536)
                f.flush()
        except OSError:
            pass
    for n in range(1000):  # the last partial page too
        try:
            (mnt / f"crumb{n}").write_bytes(b"\0" * 512)
        except OSError:
            break
    return filler


def free(mnt: Path) -> None:
    for f in mnt.glob("crumb*"):
        f.unlink()
    (mnt / "filler").unlink()


def test_a_full_disk_leaves_no_torn_ledger_line(small_disk):
    rd = RunDir.create(small_disk / "run", "", "t", [])
    line = len(json.dumps({"schema": "hpcbench.ledger/1", "time": "2026-11-23T00:00:00+00:00", "event": "submitted",
                           "point_id": "abc", "job_id": "1"})) + 1
    while (rd.ledger.stat().st_size if rd.ledger.exists() else 0) < 4096 - 3 * line:
        rd.record("submitted", "abc", job_id="1")
    before = rd.ledger.read_bytes()
    fill(small_disk)
    with pytest.raises(NoSpace, match="ledger.jsonl: cannot write: No space left on device"):
        for _ in range(10):  # the line that crosses into a page the disk no longer has
            rd.record("submitted", "abc", job_id="1")
    after = rd.ledger.read_bytes()
    assert after.startswith(before) and after.endswith(b"\n")
    assert all(json.loads(ln) for ln in after.decode().splitlines())


def test_disk_full_while_a_result_is_written_then_a_rerun_completes(tmp_path, small_disk):
    sweep = write(tmp_path / "full.toml", "[sweep]\nname = \"faultfull\"\n[workload]\nsteps = 2000\nwarmup_steps = 1\n"
                                           "[matrix]\nbatch_size = [8, 16]\n")
    run = small_disk / "run"
    proc = subprocess.Popen([sys.executable, "-m", "hpcbench", "sweep", str(sweep), "--backend", "local",
                             "--run-dir", str(run)], cwd=REPO, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        _wait(lambda: any(run.glob("points/*/provenance-rank0.json")), 120, "the first rank to start", step=0.1)
        fill(small_disk)
        out, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 2, out + err
    assert err.count("\n") == 1 and "cannot write: No space left on device (hint: free space" in err, err
    assert not list(run.rglob("result.json")) and not list(run.rglob(".result.json.*"))
    for f in run.rglob("*.json"):  # every record there is whole
        json.loads(f.read_text())
    assert all(json.loads(ln) for ln in (run / "ledger.jsonl").read_text().splitlines())

    free(small_disk)
    again = run_cli("sweep", str(sweep), "--backend", "local", "--run-dir", str(run))
    assert again.returncode == 0, again.stdout + again.stderr
    status = run_cli("status", str(run))
    assert "2 points: 2 COMPLETED" in status.stdout, status.stdout
    print(err, again.stdout, sep="\n")
