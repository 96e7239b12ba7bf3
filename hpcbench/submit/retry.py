"""Retries for what the cluster did, never for what the code did.

A point that ended without a result is resubmitted automatically (``--max-retries N`` or ``[slurm]
max_retries``, inside the ``--wait`` loop) only when the cluster ended it:

- node failure: Slurm's NODE_FAIL, or its ``*** JOB ... DUE TO NODE FAILURE ***`` line in the job's log;
- preemption: Slurm's PREEMPTED, or ``DUE TO PREEMPTION``;
- a lost peer: every error record the ranks wrote is a communication failure (Gloo's ``Connection reset
  by peer`` / ``Connection closed by peer``, a store or rendezvous timeout, an NCCL or MPI communication
  error) AND a rank that wrote none was killed from outside (``srun: error: node2: task 1: Killed``,
  mpirun's ``exited on signal 9``), and the log shows no out-of-memory kill.

Anything else is the workload's own failure and is never retried: an error record of another kind
(``InjectedFault``, a Python error, an unavailable backend), a rank that left on its own (exit 0 or an
exit code, as ``fail_step = 0`` does), a time limit, a cancellation, an out-of-memory kill.

Every attempt is kept: the earlier one's files move to ``points/<p>/attempts/<job id>/`` and the ledger
gets an ``attempt_ended`` line with its job id, state, reason and, for an automatic retry, its cause.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from hpcbench.rundir import PointPaths, RunDir
from hpcbench.states import OOM_LINE, PointState, ended_attempts, error_records, log_lines, log_reason
from hpcbench.vocab import FAILED, NODE_FAIL

# What a surviving rank reports when its peer is gone (all seen on the minicluster when a rank is
# killed: Gloo's "Read error [127.0.0.1]:36577: Connection reset by peer", "Connection closed by peer").
COMM_ERROR = re.compile(
    r"Connection (?:reset|closed) by peer|Broken pipe|Connection refused|Socket Timeout|"
    r"timed out|Timeout|DistStoreError|DistNetworkError|rendezvous|NCCL (?:error|communicator was aborted)|"
    r"ncclRemoteError|ncclSystemError|MPI_ERR|PMIX_ERROR|Gloo connectFullMesh failed|HorovodInternalError",
    re.IGNORECASE)
# A task killed from outside, as the launchers say it. The task/rank number is group 1 where it is known.
KILLED = re.compile(r"srun: error: \S+: tasks? ([\d,-]+): (?:Killed|Terminated)|"
                    r"process rank (\d+) with PID \d+ on node \S+ exited on signal (?:9|15)\b|"
                    r"Signal (?:9|15) \(SIG(?:KILL|TERM)\) received by PID")


@dataclass(frozen=True)
class Cause:
    retry: bool
    kind: str  # node failure | preemption | lost peer | workload | <state> (not a failure the cluster made)
    why: str

    def __str__(self) -> str:
        return f"{self.kind}: {self.why}" if self.why else self.kind


def _tasks(spec: str) -> set[int]:
    out: set[int] = set()
    for part in spec.split(","):
        lo, _, hi = part.partition("-")
        if lo.isdigit():
            out |= set(range(int(lo), int(hi) + 1)) if hi.isdigit() else {int(lo)}
    return out


def classify(s: PointState, paths: PointPaths) -> Cause:
    """Why a final point without a result ended: the cluster's doing (retry) or the workload's (never)."""
    line, _ = log_reason(paths, s.job_id)
    said = f"{s.reason} {line}".upper()
    if s.state == NODE_FAIL or "DUE TO NODE FAILURE" in said:
        return Cause(True, "node failure", s.reason or line)
    if "PREEMPT" in said:
        return Cause(True, "preemption", s.reason or line)
    if s.state != FAILED:
        return Cause(False, s.state, "not a failure the cluster caused")
    errs, _ = error_records(paths)  # earliest first
    if not errs:
        return Cause(False, "workload", "the job failed without an error record naming a lost peer")
    first = errs[0]
    own = [e for e in errs if not COMM_ERROR.search(f"{e.error_type}: {e.message}")]
    if own:
        e = own[0]
        return Cause(False, "workload", f"rank {e.rank}: {e.error_type}: {e.message}")
    lines = log_lines(paths, s.job_id)
    if any(OOM_LINE.search(ln) for ln in lines):
        return Cause(False, "workload", "a rank was killed for running out of memory")
    silent = set(range(s.point.world_size)) - {e.rank for e in errs}
    for ln in lines:
        m = KILLED.search(ln)
        if m and (not (m.group(1) or m.group(2)) or _tasks(m.group(1) or m.group(2) or "") & silent):
            return Cause(True, "lost peer", f"{ln.strip()}; rank {first.rank}: {_short(first.message)}")
    return Cause(False, "workload", f"communication error, but no rank was killed from outside "
                                    f"(rank {first.rank}: {_short(first.message)})")


def _short(message: str) -> str:
    """Gloo's messages open with a source path ("[/__w/pytorch/.../pair.cc:545] "): the words are after it."""
    return re.sub(r"^\[[^\]]*\]\s*", "", message)[:100]


@dataclass
class Retrier:
    """Called by the --wait loop on every poll: resubmits the points the cluster failed, up to ``limit`` times each."""

    submit: Callable[[dict[str, Cause]], int]  # resubmits these points; returns how many were submitted
    rd: RunDir
    limit: int
    echo: Callable[[str], None]

    def __call__(self, states: list[PointState]) -> int:
        done = {pid: sum(1 for e in es if e.get("retry")) for pid, es in ended_attempts(self.rd).items()}
        todo: dict[str, Cause] = {}
        for s in states:
            if not s.final or s.ok or s.job_id is None:
                continue
            key = (s.point.id, s.job_id)  # a final job's ending does not change: read its folder once
            cause = self.known.get(key) or self.known.setdefault(key, classify(s, self.rd.point(s.point)))
            n = done.get(s.point.id, 0)
            if cause.retry and n < self.limit:
                todo[s.point.id] = cause
                self.echo(f"  {s.point.label}: {s.state} ({cause}); retry {n + 1} of {self.limit}")
            elif cause.retry and s.point.id not in self.said:
                self.said.add(s.point.id)
                self.echo(f"  {s.point.label}: {s.state} ({cause.kind}); no retries left ({n} of {self.limit} used)")
        return self.submit(todo) if todo else 0

    def __post_init__(self) -> None:
        self.said: set[str] = set()
        self.known: dict[tuple[str, str], Cause] = {}


def retrier(spec: Any, rd: RunDir, python: str, backend: Any, override: int | None,
            echo: Callable[[str], None]) -> Retrier | None:
    """The --wait loop's retry step for a run, or None without retries (or without a queue to wait on).
    ``override``: --max-retries when given, else the sweep's [slurm] max_retries counts."""
    limit = max_retries(spec, override)
    if limit <= 0 or not backend.queued:
        return None
    from hpcbench.errors import RunDirBusy
    from hpcbench.submit.submission import submit_points

    def submit(todo: dict[str, Cause]) -> int:
        try:
            return submit_points(spec, rd, python, backend, echo, select=lambda s: s.point.id in todo,
                                 causes=todo).submitted
        except RunDirBusy as e:  # someone resubmits by hand right now: try again at the next poll
            echo(f"  retry postponed: {e}")
            return 0

    return Retrier(submit, rd, limit, echo)


def max_retries(spec: Any, override: int | None) -> int:
    """--max-retries when given, else the sweep's [slurm] max_retries."""
    if override is not None and override < 0:
        from hpcbench.errors import ConfigError

        raise ConfigError(f"--max-retries: {override} is negative", hint="give 0 (no retries) or more")
    return int(spec.slurm.max_retries if override is None else override)
