"""A job of one point as its backend knows it, and what the schedulers said about a run's jobs in one poll.

Every backend speaks these: ``submit`` returns a Job, ``status`` answers with Jobs. The state words are
Slurm's (PENDING, RUNNING, COMPLETED, FAILED, ...), the common tongue of batch schedulers; a backend for
another scheduler folds its own words onto them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from hpcbench.rundir import PointPaths
from hpcbench.vocab import SLURM_ACTIVE


@dataclass(frozen=True)
class Job:
    id: str
    backend: str  # the registry's name of the backend that runs it; the ledger records it
    paths: PointPaths | None = None  # the point's folder (None: a job seen in the queue, not yet tied to a point)
    state: str = ""  # the scheduler's word; "" where it has said none
    reason: str = ""  # why it waits, or how it ended, in the scheduler's words
    exit_code: str = ""  # "code:signal" where the scheduler reports it
    comment: str = ""  # hpcbench puts "hpcbench:<run id>:<point id>" here, where the scheduler keeps one

    @property
    def active(self) -> bool:
        """Waiting or running: cancelling it means something."""
        return self.state in SLURM_ACTIVE

    @property
    def dir(self) -> Path | None:
        return None if self.paths is None else self.paths.dir

    @property
    def stdout(self) -> Path | None:
        return None if self.paths is None else self.paths.stdout(self.id)

    @property
    def stderr(self) -> Path | None:
        return None if self.paths is None else self.paths.stderr(self.id)


@dataclass(frozen=True)
class SchedulerView:
    """What the schedulers said about a run's jobs in one poll (one status call per backend in use).

    A job the scheduler no longer knows is absent from ``jobs``. ``read`` False: a scheduler could not be
    asked, so an absent job may still live.
    """

    jobs: dict[str, Job] = field(default_factory=dict)
    read: bool = True
