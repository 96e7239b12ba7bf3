"""Which failures are retried: the cluster's (node failure, preemption, a lost peer) and never the workload's.

The messages are the real ones the minicluster gave: rank 1's process killed with SIGKILL mid-run (Gloo's
"Connection reset by peer" on rank 0, srun's "task 1: Killed"), fail_rank/fail_step's InjectedFault and
fail_step = 0's rendezvous timeout.
"""
from __future__ import annotations

import pytest
from conftest import queue
from report_helpers import point

from hpcbench.files import atomic_write_json
from hpcbench.records import ErrorRecord
from hpcbench.rundir import RunDir
from hpcbench.states import PointState, collect
from hpcbench.submit.retry import Retrier, classify

GLOO_RESET = ("[/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:545] Read error "
              "[127.0.0.1]:36577: Connection reset by peer. This is typically caused by a remote worker hanging or "
              "bugs in the application. Check the logs of the remote worker before reporting an error. GLHF!")
GLOO_CLOSED = ("[/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:561] Connection closed by peer "
               "[127.0.0.1]:17305. This is typically caused by a remote worker crashing. Check the logs of the remote "
               "worker before reporting an error. GLHF!")
RDV_TIMEOUT = ("Timed out after 9 seconds waiting for clients. 1/2 clients joined.")
KILLED_LOG = "srun: error: node2: task 1: Killed\nsrun: error: node1: task 0: Exited with exit code 1\n"
CRASH_LOG = "srun: error: node2: task 1: Exited with exit code 1\nsrun: error: node1: task 0: Exited with exit code 1\n"
P = point(nodes=2, rpn=1)


def folder(tmp_path, errors, log="", state="FAILED", reason="", job="40"):
    rd = RunDir.create(tmp_path / "run", "", "t", [P])
    rd.record("submitted", P.id, job_id=job, backend="sbatch")
    paths = rd.point(P)
    for rank, (etype, msg, t) in errors.items():
        atomic_write_json(paths.error(rank), ErrorRecord(point_id=P.id, rank=rank, hostname="vm", error_type=etype,
                                                         message=msg, traceback="", time=t).to_dict())
    (paths.dir / f"job-{job}.err").write_text(log)
    (paths.exitcode).write_text("137\n" if "Killed" in log else "1\n")
    return rd, PointState(point=P, state=state, reason=reason, job_id=job, backend="sbatch")


def test_a_killed_peer_is_a_lost_peer_and_retried(tmp_path):
    rd, st = folder(tmp_path, {0: ("RuntimeError", GLOO_RESET, "2026-11-23T15:26:41.598396+00:00")}, KILLED_LOG)
    cause = classify(st, rd.point(P))
    assert (cause.retry, cause.kind) == (True, "lost peer")
    assert "srun: error: node2: task 1: Killed" in cause.why and "Connection reset by peer" in cause.why


def test_an_injected_fault_is_never_retried_even_with_a_lost_peer_echo(tmp_path):
    rd, st = folder(tmp_path, {1: ("InjectedFault", "injected failure of rank 1 at step 3", "2026-11-23T15:40:01.1+00:00"),
                               0: ("RuntimeError", GLOO_CLOSED, "2026-11-23T15:40:01.2+00:00")}, CRASH_LOG)
    cause = classify(st, rd.point(P))
    assert (cause.retry, cause.kind) == (False, "workload")
    assert cause.why == "rank 1: InjectedFault: injected failure of rank 1 at step 3"


def test_a_rank_that_left_on_its_own_is_the_workload(tmp_path):
    # fail_step = 0: rank 1 exits 0 before the rendezvous; srun says nothing about it, rank 0 times out.
    rd, st = folder(tmp_path, {0: ("DistStoreError", RDV_TIMEOUT, "2026-11-23T15:41:00+00:00")},
                    "srun: error: node1: task 0: Exited with exit code 1\n")
    cause = classify(st, rd.point(P))
    assert (cause.retry, cause.kind) == (False, "workload")
    assert "no rank was killed from outside" in cause.why


def test_an_out_of_memory_kill_is_the_workload(tmp_path):
    rd, st = folder(tmp_path, {0: ("RuntimeError", GLOO_RESET, "2026-11-23T15:26:41+00:00")},
                    "slurmstepd: error: Detected 1 oom_kill event in StepId=40.0.\n" + KILLED_LOG)
    assert classify(st, rd.point(P)).retry is False


@pytest.mark.parametrize(("state", "reason", "log", "kind"), [
    ("NODE_FAIL", "Slurm: NODE_FAIL (NodeDown)", "", "node failure"),
    ("CANCELLED", "Slurm: PREEMPTED", "", "preemption"),
    ("CANCELLED", "", "slurmstepd: error: *** JOB 40 ON node1 CANCELLED AT 2026-11-23T15:00:00 DUE TO PREEMPTION ***",
     "preemption"),
    ("FAILED", "", "slurmstepd: error: *** STEP 40.0 ON node1 CANCELLED AT 2026-11-23T15:00:00 DUE TO NODE FAILURE ***",
     "node failure"),
])
def test_node_failure_and_preemption_are_retried(tmp_path, state, reason, log, kind):
    rd, st = folder(tmp_path, {}, log, state=state, reason=reason)
    cause = classify(st, rd.point(P))
    assert (cause.retry, cause.kind) == (True, kind)


@pytest.mark.parametrize("state", ["TIMEOUT", "CANCELLED", "OUT_OF_MEMORY", "MISSING"])
def test_other_endings_are_not_retried(tmp_path, state):
    rd, st = folder(tmp_path, {}, "", state=state, reason="Slurm: " + state)
    assert classify(st, rd.point(P)).retry is False


def test_retries_stop_at_the_limit_and_every_attempt_is_kept(tmp_path):
    rd, st = folder(tmp_path, {}, "", state="NODE_FAIL", reason="Slurm: NODE_FAIL")
    said: list[str] = []
    submitted: list[dict] = []

    def submit(todo):  # what submit_points does to the ledger and the folder, without a scheduler
        submitted.append(todo)
        for pid, cause in todo.items():
            rd.record("attempt_ended", pid, job_id=st.job_id, state=st.state, reason=st.reason, retry=cause.kind,
                      why=cause.why)
            rd.record("submitted", pid, job_id=str(41 + len(submitted)), backend="sbatch")
        return len(todo)

    retry = Retrier(submit, rd, 2, said.append)
    assert retry([st]) == 1 and retry([st]) == 1 and retry([st]) == 0
    assert said[:2] == [f"  {P.label}: NODE_FAIL (node failure: Slurm: NODE_FAIL); retry {n} of 2" for n in (1, 2)]
    assert said[2] == f"  {P.label}: NODE_FAIL (node failure); no retries left (2 of 2 used)"
    [now] = collect(rd, queue({}))
    assert now.attempt == 3
    assert "attempt 3; earlier: job 40 NODE_FAIL [retried: node failure]: Slurm: NODE_FAIL" in now.explained
