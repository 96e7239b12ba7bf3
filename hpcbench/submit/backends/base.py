"""One interface for every way of running a point. All backends write the same run-directory layout.

A backend is one module with one Backend subclass, registered in the ``hpcbench.backends`` entry-point
group (hpcbench.submit.registry). What it can do is said by its flags, never by its name.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from pathlib import Path

from hpcbench.errors import ConfigError
from hpcbench.jobs import Job, id_order
from hpcbench.plan.expand import Point
from hpcbench.plan.spec import SweepSpec
from hpcbench.rundir import PointPaths
from hpcbench.submit.registry import use


class Backend(ABC):
    #: the name it is registered under (set by the registry, which makes every backend hpcbench uses)
    name: str = ""
    #: True when submit() returns before the point has run (a scheduler queue): its jobs are asked about
    #: with status() and can be cancelled. False: submit() returns once the point is over.
    queued: bool = True
    #: can queue a script of its own that runs many points as job steps (slurm.pack)
    packs: bool = False
    #: can queue jobs held, to start when released (--hold)
    holds: bool = False
    #: submit() may be called from several threads at once (hides a scheduler's round trip)
    concurrent_submit: bool = False
    #: where ``--backend auto`` ranks it among the backends available here (highest first); None: never chosen
    auto_rank: int | None = None
    #: queue this backend's jobs held (set by the registry from --hold; only where ``holds``)
    hold: bool = False
    #: point id -> the job comment that ties a job to its run and point (set by the submitter)
    comment: Callable[[str], str] | None = None
    #: a backend that runs points itself (not queued) calls this with the seconds so far, about once a second
    on_tick: Callable[[float], None] | None = None

    def available(self) -> bool:
        """Whether it can run points from here (its commands on PATH): asked by ``--backend auto``."""
        return True

    def check(self, spec: SweepSpec) -> None:
        """Raise ConfigError before anything is submitted if this backend cannot run the sweep."""
        if spec.slurm.pack and self.queued and not self.packs:
            raise ConfigError(f"slurm.pack = true needs a backend that packs points, not {self.name!r}",
                              hint=_packing_hint())

    def job(self, job_id: str, paths: PointPaths | None = None) -> Job:
        return Job(job_id, self.name, paths)

    @abstractmethod
    def submit(self, spec: SweepSpec, point: Point, paths: PointPaths, python: str) -> Job:
        """Start (or queue) one point and return its job."""

    def submit_script(self, script: Path) -> Job:
        """Queue a rendered batch script of hpcbench's own (a pack of points) and return its job."""
        raise ConfigError(f"the {self.name} backend cannot queue a pack of points (slurm.pack = true)",
                          hint=_packing_hint())

    def status(self, jobs: Sequence[Job], ended: bool = True) -> dict[str, Job]:
        """The scheduler's word on these jobs, in one call for all of them: job id -> Job with its state.

        A job it no longer knows is absent. ``ended`` False: only live jobs matter (a cheaper call may do).
        Raises SchedulerError, saying why, where the scheduler cannot be asked. A backend without a queue knows
        its jobs are over.
        """
        return {}

    def cancel(self, jobs: Sequence[Job]) -> None:
        """Cancel these jobs, in one call. A backend without a queue has nothing left to cancel."""

    def queue_comments(self) -> dict[str, str]:
        """Every job of this user the scheduler knows, live or recently ended: job id -> its comment.

        A re-run finds by its comment a job whose id the ledger never got (the submitter died mid-call).
        """
        return {}


def _packing_hint() -> str:
    return ", or ".join(filter(None, (use(lambda b: b.packs), "set pack = false")))


class SlurmQueue(Backend):
    """What every backend that queues through Slurm shares: status from one squeue call (plus one sacct call
    for the jobs squeue has forgotten), scancel, the comments squeue shows."""

    def available(self) -> bool:
        from hpcbench.submit import slurm

        return slurm.available()

    def status(self, jobs: Sequence[Job], ended: bool = True) -> dict[str, Job]:
        from hpcbench.submit import slurm

        ids = sorted({j.id for j in jobs}, key=id_order)
        if not ids:
            return {}
        seen = slurm.snapshot()
        infos = {j: seen[j] for j in ids if j in seen}
        gone = [j for j in ids if j not in infos]
        acct = slurm.accounting(gone) if gone and ended else None
        infos.update({j: acct[j] for j in gone if acct and j in acct})
        paths = {j.id: j.paths for j in jobs}
        return {j: Job(j, self.name, paths[j], state=i.state, reason=i.reason, exit_code=i.exit_code,
                       comment=i.comment) for j, i in infos.items()}

    def cancel(self, jobs: Sequence[Job]) -> None:
        from hpcbench.submit import slurm

        slurm.cancel(sorted({j.id for j in jobs}, key=id_order))

    def queue_comments(self) -> dict[str, str]:
        from hpcbench.submit import slurm

        return {j: info.comment for j, info in slurm.snapshot().items()}
