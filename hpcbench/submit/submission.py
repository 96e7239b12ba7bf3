"""Submitting a run's points through the ledger, so that re-runs, crashes and resubmissions never lose
or double a job.

Every submission is written twice: a 'submitting' intent before sbatch, then 'submitted' with the job
id. A submitter killed between the two leaves an intent; the next run under the lock settles it by
looking for the job in the queue of the intent's backend (one squeue call for Slurm: each job carries
``--comment=hpcbench:<run id>:<point id>``) or for its output file in the point's folder, and records
it, or records the intent as lost. Every scheduler question goes through the backend that the ledger
says submitted the job (hpcbench.submit.registry).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from hpcbench.errors import ConfigError, SchedulerError
from hpcbench.jobs import Job, backend_name, id_order
from hpcbench.plan.expand import Point, current_jobs
from hpcbench.plan.spec import SweepSpec
from hpcbench.rundir import RunDir
from hpcbench.states import PointState
from hpcbench.submit import registry
from hpcbench.submit.backends.base import Backend
from hpcbench.submit.pack import Packed, submit_pack
from hpcbench.submit.status import refresh, scheduler_view
from hpcbench.vocab import KEEP_ON_RERUN, UNKNOWN

# Test hook: seconds to sleep after sbatch answers and before the ledger records the job id, the
# window that a kill -9 of the submitter must survive. Unset in normal use.
DELAY_ENV = "HPCBENCH_TEST_SUBMIT_DELAY_S"

Echo = Callable[[str], None]


@dataclass
class SubmitReport:
    submitted: int = 0
    failed: int = 0
    skipped: dict[str, int] = field(default_factory=dict)  # state -> points left alone
    recovered: int = 0  # jobs found by their comment after a crash
    lost: int = 0  # intents with no job behind them
    allocations: int = 0  # sbatch calls that made a job
    packed_points: int = 0  # points that run as steps of a shared allocation
    packs: int = 0  # those shared allocations

    @property
    def allocations_saved(self) -> int:
        return self.packed_points - self.packs

    def add_pack(self, packed: Packed) -> None:
        if packed.job_id is None:
            self.failed += packed.points
            return
        self.submitted += packed.points
        self.allocations += 1
        self.packs += 1
        self.packed_points += packed.points


def reconcile(rd: RunDir, echo: Echo) -> tuple[int, int]:
    """Settle 'submitting' intents left by a submitter that died. Returns (recovered, lost)."""
    intents = {pid: e for pid, e in rd.submissions().items() if e["event"] == "submitting"}
    if not intents:
        return 0, 0
    known = rd.recorded_job_ids()
    found: dict[str, list[str]] = {}  # comment key (point id or pack name) -> job ids
    named = {backend_name(e.get("backend")) for e in intents.values()}
    backends = [b for n in sorted(named) if (b := registry.known(n)) is not None and b.queued]
    for backend in backends:  # one queue listing per backend (one squeue call), whatever the number of intents
        for job_id, comment in backend.queue_comments().items():
            key = rd.comment_point(comment)
            if key is not None and job_id not in known:
                found.setdefault(key, []).append(job_id)
    points = {p.id: p for p in rd.points()}
    recovered = lost = 0
    for pid, e in intents.items():
        key = e.get("pack") or pid
        ids = sorted(found.get(key, []), key=id_order)
        if not ids and pid in points:  # the job may have run and left the queue: its output file names it
            ids = sorted(rd.point(points[pid]).logged_job_ids() - known, key=id_order)
        if ids:
            rd.record("submitted", pid, job_id=ids[-1], backend=e.get("backend"), pack=e.get("pack"),
                      recovered=True)
            recovered += 1
        else:
            rd.record("submit_lost", pid, backend=e.get("backend"),
                      reason="the submitter stopped before sbatch answered, and no job of this point exists")
            lost += 1
    echo(f"  settled an interrupted submission: {recovered} job(s) found and recorded, "
         f"{lost} never submitted")
    return recovered, lost


class Throttle:
    """Waits before a submission while ``limit`` of this run's jobs are queued (0: no limit).

    The queue is asked only when the count kept since the last look reaches the limit.
    """

    def __init__(self, rd: RunDir, limit: int, poll_s: float, echo: Echo):
        self.rd, self.limit, self.poll_s, self.echo = rd, limit, poll_s, echo
        self.queued: int | None = None

    def _count(self) -> int:
        view = scheduler_view(self.rd, ended=False)
        if not view.read:
            raise view.unreadable(f"max_jobs_in_queue cannot be kept for {self.rd.root}")
        return sum(1 for job in view.jobs.values() if job.active)

    def before_submit(self) -> None:
        if not self.limit:
            return
        if self.queued is None:
            self.queued = self._count()
        said = False
        while self.queued >= self.limit:
            self.queued = self._count()
            if self.queued < self.limit:
                break
            if not said:
                self.echo(f"  {self.queued} of this run's jobs queued (max_jobs_in_queue = {self.limit}): waiting")
                said = True
            time.sleep(self.poll_s)

    def submitted(self, ok: bool = True) -> None:
        if self.queued is not None and ok:
            self.queued += 1


def _submit_one(rd: RunDir, spec: SweepSpec, p: Point, python: str, backend: Backend, echo: Echo,
                delay: float, tag: str = "") -> str | None:
    paths = rd.point(p)
    rd.record("submitting", p.id, backend=backend.name)
    started = time.monotonic()
    try:
        job = (_started(backend, spec, p, paths, python, tag) if not backend.queued else
               backend.submit(spec, p, paths, python))
    except SchedulerError as e:
        rd.record("submit_failed", p.id, backend=backend.name, reason=str(e))
        echo(f"  {p.label}: NOT submitted: {e}")
        return None
    if delay:
        time.sleep(delay)
    rd.record("submitted", p.id, job_id=job.id, backend=backend.name)
    if backend.queued:
        echo(f"  {p.label}: job {job.id}")
    else:  # the point is over: the backend's word on its end (Job.ran) is kept, as `status` keeps a scheduler's
        code = paths.exitcode.read_text().strip() if paths.exitcode.exists() else "?"
        said = {"state": job.state, "reason": job.reason} if job.state else {}
        rd.record("finished", p.id, job_id=job.id, backend=backend.name, exit_code=code, **said)
        took = f"{time.monotonic() - started:.0f} s"
        ended = "done" if code == "0" else f"{job.state or 'FAILED'} (exit {code})"
        echo(f"  {tag} {p.label}: {ended} ({took})")
    return job.id


def _started(backend: Backend, spec: SweepSpec, p: Point, paths: Any, python: str, tag: str) -> Job:
    """Run a point here, saying so: `[2/4] running gloo-mlp-b64-n1x2 (12 s)`, redrawn each second on a terminal."""
    import sys

    from hpcbench.submit.status import Progress

    bar = Progress(sys.stdout)
    bar.show(f"  {tag} running {p.label}")
    if bar.tty:
        backend.on_tick = lambda s: bar.show(f"  {tag} running {p.label} ({s:.0f} s)")
    try:
        return backend.submit(spec, p, paths, python)
    finally:
        bar.clear()


def submit_points(spec: SweepSpec, rd: RunDir, python: str, backend: Backend, echo: Echo,
                  select: Callable[[PointState], bool] | None = None, force: bool = False,
                  poll_s: float = 5.0, causes: dict[str, Any] | None = None) -> SubmitReport:
    """Submit the run's points that need it, under the run's lock.

    ``select`` picks points by their current state; by default every point without a live job or a
    result (a re-run of the same sweep submits only what is missing). ``force`` takes every point,
    cancelling its live job first so that no point ever has two. ``causes``: point id -> why an automatic
    retry resubmits it (hpcbench.submit.retry.Cause), kept in the ledger with the attempt it ends.
    """
    report = SubmitReport()
    backend.comment = rd.job_comment
    with rd.lock():
        report.recovered, report.lost = reconcile(rd, echo)
        todo = _choose(rd, backend, report, echo, select, force)
        for s in todo:  # every attempt is kept: its files under attempts/<job id>/, its ending in the ledger
            if s.job_id:
                why = (causes or {}).get(s.point.id)
                rd.record("attempt_ended", s.point.id, job_id=s.job_id, state=s.state, reason=s.reason,
                          **({"retry": why.kind, "why": why.why} if why else {}))
                rd.point(s.point).archive(s.job_id)
        points = current_jobs(spec, [s.point for s in todo])  # a time limit edited in the sweep copy applies
        if spec.slurm.pack and backend.packs and len(points) > 1:
            report.add_pack(submit_pack(spec, rd, points, python, backend, echo))
            return report
        ids = _submit_each(spec, rd, points, python, backend, echo, Throttle(
            rd, spec.slurm.max_jobs_in_queue if backend.queued else 0, poll_s, echo))
        report.failed = ids.count(None)
        report.submitted = report.allocations = len(ids) - report.failed
    return report


def _choose(rd: RunDir, backend: Backend, report: SubmitReport, echo: Echo,
            select: Callable[[PointState], bool] | None, force: bool) -> list[PointState]:
    """The points to submit now; with ``force``, every point, its live job cancelled first."""
    view, states = refresh(rd)
    blind = [s for s in states if s.state == UNKNOWN and s.job_id]
    if blind and not view.read:  # their jobs may live: a second one would double
        raise view.unreadable(f"it is not known whether the jobs of {len(blind)} point(s) of {rd.root} still live; "
                              "nothing was submitted")
    if force:
        todo = list(states)
        cancel_live(rd, states, "--force")
    else:
        keep = select or (lambda s: s.state not in KEEP_ON_RERUN)
        todo = [s for s in states if keep(s)]
    for s in states:
        if s not in todo:
            report.skipped[s.state] = report.skipped.get(s.state, 0) + 1
    if report.skipped:
        echo("  left alone: " + ", ".join(f"{n} {st}" for st, n in report.skipped.items()))
    return todo


def _submit_each(spec: SweepSpec, rd: RunDir, points: list[Point], python: str, backend: Backend, echo: Echo,
                 throttle: Throttle) -> list[str | None]:
    """One job per point; the job ids (None where sbatch refused)."""
    delay = float(os.environ.get(DELAY_ENV) or 0)
    workers = submit_workers(backend, throttle)
    if workers > 1:
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(workers) as pool:
            return list(pool.map(lambda p: _submit_one(rd, spec, p, python, backend, echo, delay), points))
    ids = []
    for n, p in enumerate(points, 1):
        throttle.before_submit()
        ids.append(_submit_one(rd, spec, p, python, backend, echo, delay, tag=f"[{n}/{len(points)}]"))
        throttle.submitted(ids[-1] is not None)
    return ids


def submit_workers(backend: Backend, throttle: Throttle) -> int:
    """How many sbatch calls may be in flight at once.

    A few concurrent calls hide most of sbatch's round trip to slurmctld without flooding it. The
    ledger stays exact: each point's intent and job id are written by the thread that submits it.
    Throttled sweeps submit one by one, since each submission changes the count they wait on.
    """
    if not backend.concurrent_submit or throttle.limit:
        return 1
    return max(1, int(os.environ.get(WORKERS_ENV) or SUBMIT_WORKERS))


SUBMIT_WORKERS = 4
WORKERS_ENV = "HPCBENCH_SUBMIT_WORKERS"  # 1 gives one sbatch at a time (benchmarks compare both)


def states_of(names: Iterable[str]) -> Callable[[PointState], bool]:
    wanted = set(names)
    return lambda s: s.state in wanted


def cancel_run(rd: RunDir, echo: Echo) -> int:
    """Cancel every live job of the run, one call per backend; record it on each point. Returns jobs cancelled."""
    live = cancel_live(rd, refresh(rd)[1], "hpcbench cancel")
    if not live:
        echo(f"{rd.root}: no queued or running job to cancel")
        return 0
    echo(f"cancelled {len(live)} job(s): {' '.join(live)}")
    return len(live)


def cancel_live(rd: RunDir, states: list[PointState], reason: str) -> list[str]:
    """Cancel the queued or running jobs among ``states``, each through the backend that submitted it (one
    call per backend), and record each on its point with ``reason``; their ids."""
    mine: dict[str, list[Job]] = {}
    for s in states:
        if s.queued and s.job_id:
            name = backend_name(s.backend)
            mine.setdefault(name, []).append(Job(s.job_id, name, rd.point(s.point)))
    done: set[str] = set()
    for name, jobs in mine.items():
        backend = registry.known(name)
        if backend is None:
            raise SchedulerError(f"{rd.root}: jobs {', '.join(j.id for j in jobs)} were submitted with backend "
                                 f"{name!r}, which is not installed here", hint="install it, then cancel again")
        backend.cancel(jobs)
        done |= {j.id for j in jobs}
    for s in states:
        if s.job_id in done:
            rd.record("cancelled", s.point.id, job_id=s.job_id, reason=reason)
    return sorted(done, key=id_order)


def check_same_plan(rd: RunDir, points: list[Point], path: str) -> None:
    """A re-run must be of the same sweep: the same point ids (scheduler settings may change)."""
    have = {p.id for p in rd.points()}
    want = {p.id for p in points}
    if have != want:
        raise ConfigError(
            f"{rd.root}: holds a run of a different sweep ({len(want - have)} points of {path} are not in it, "
            f"{len(have - want)} of its points are not in {path})",
            hint="re-run with the sweep file the run was made from, or choose another --run-dir",
        )
