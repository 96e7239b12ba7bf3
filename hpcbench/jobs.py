"""A job of one point as its backend knows it, and what the schedulers said about a run's jobs in one poll.

Every backend speaks these: ``submit`` returns a Job, ``status`` answers with Jobs. The state words are
Slurm's (PENDING, RUNNING, COMPLETED, FAILED, ...), the common tongue of batch schedulers; a backend for
another scheduler folds its own words onto them.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from hpcbench.errors import SchedulerError
from hpcbench.rundir import PointPaths
from hpcbench.vocab import COMPLETED, FAILED, SLURM_ACTIVE, TIMEOUT


@dataclass(frozen=True)
class Job:
    id: str
    backend: str  # the registry's name of the backend that runs it; the ledger records it
    paths: PointPaths | None = None  # the point's folder (None: a job seen in the queue, not yet tied to a point)
    state: str = ""  # the scheduler's word; "" where it has said none
    reason: str = ""  # why it waits, or how it ended, in the scheduler's words
    exit_code: str = ""  # "code:signal" where the scheduler reports it
    comment: str = ""  # hpcbench puts "hpcbench:<run id>:<point id>" here, where the scheduler keeps one

    def ran(self, code: int, timed_out: str = "") -> Job:
        """This job, run to its end by a backend without a queue: COMPLETED or FAILED by its exit code, or
        TIMEOUT where ``timed_out`` says how the time limit ended it. The ledger keeps this word."""
        state = TIMEOUT if timed_out else COMPLETED if code == 0 else FAILED
        return replace(self, state=state, reason=timed_out, exit_code=str(code))

    @property
    def active(self) -> bool:
        """Waiting or running: cancelling it means something."""
        return self.state in SLURM_ACTIVE


@dataclass(frozen=True)
class SchedulerView:
    """What the schedulers said about a run's jobs in one poll (one status call per backend in use).

    A job the scheduler no longer knows is absent from ``jobs``. ``why``: why a scheduler could not be asked
    (then an absent job may still live), with ``hint`` on what to do; "" where every one answered.
    """

    jobs: dict[str, Job] = field(default_factory=dict)
    why: str = ""
    hint: str | None = None

    @property
    def read(self) -> bool:
        return not self.why

    def unreadable(self, doing: str) -> SchedulerError:
        """The error of a command that cannot go on without the queue: ``doing`` says what it would not risk."""
        return SchedulerError(f"the queue cannot be read ({self.why}), so {doing}",
                              hint=self.hint or "run the same command again once the scheduler answers")


def id_order(job_id: str) -> tuple[int, str]:
    """Sort key of job ids: shorter first, then by text, so that numeric ids go by number ("9" before "10")."""
    return len(job_id), job_id


def backend_name(recorded: object) -> str:
    """The registry's name of the backend that a ledger event (or a PointState) records: "" where none is."""
    return str(recorded or "")
