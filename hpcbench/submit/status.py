"""The schedulers' view of a run: each recorded job asked of the backend that submitted it, one call per backend.

The point states themselves are derived in hpcbench.states, which reads the disk; this module adds what
only the schedulers know (a job waiting, running, or ended without a trace in its folder) and keeps their
word on each ended job in the ledger, so that a summary read later from the disk says the same.
"""

from __future__ import annotations

from collections import defaultdict
from typing import TextIO

from hpcbench.errors import HpcbenchError
from hpcbench.jobs import Job, SchedulerView, backend_name
from hpcbench.rundir import RunDir
from hpcbench.states import PointState, collect, ended_jobs, record_ended
from hpcbench.submit import registry


def current_jobs(rd: RunDir) -> dict[str, list[Job]]:
    """Each point's current job, by the name of the backend the ledger says submitted it."""
    points = {p.id: p for p in rd.points()}
    out: dict[str, list[Job]] = defaultdict(list)
    for pid, sub in rd.submissions().items():
        if sub.get("job_id") and pid in points:
            name = backend_name(sub.get("backend"))
            out[name].append(Job(str(sub["job_id"]), name, rd.point(points[pid])))
    return out


def scheduler_view(rd: RunDir, ended: bool = True) -> SchedulerView:
    """One status call per backend in use for the run's live jobs (for Slurm: one squeue call, plus one sacct
    call for jobs squeue has forgotten unless ``ended`` is False). Jobs the ledger knows to be over, and those
    of backends without a queue, are not asked about."""
    over = ended_jobs(rd)
    jobs: dict[str, Job] = {}
    why: list[str] = []
    hint = None
    for name, mine in current_jobs(rd).items():
        live = [j for j in mine if j.id not in over]
        backend = registry.known(name)
        if not live:
            continue
        if backend is None:
            why.append(f"backend {name!r}, which submitted {len(live)} of its jobs, is not installed here")
            hint = f"install the package that provides the {name!r} backend, or run this where it is"
            continue
        if not backend.queued:
            continue
        try:
            jobs.update(backend.status(live, ended=ended))
        except HpcbenchError as e:  # the scheduler could not be asked: an absent job may still live
            why.append(str(e))
            hint = hint or e.hint
    return SchedulerView(jobs, "; ".join(why), hint)


def refresh(rd: RunDir) -> tuple[SchedulerView, list[PointState]]:
    """Every point's state with the schedulers' word on it, and that word; their word on each ended job kept in
    the ledger."""
    view = scheduler_view(rd)
    states = collect(rd, view)
    record_ended(rd, view, states)
    return view, states


class Progress:
    def __init__(self, stream: TextIO):
        self.stream = stream
        self.tty = bool(getattr(stream, "isatty", lambda: False)())
        self.last: str | None = None
        self.width = 0

    def show(self, line: str) -> None:
        if line == self.last:
            return
        self.last = line
        if self.tty:
            # Pad over the previous line, which may have been longer.
            self.stream.write("\r" + line.ljust(self.width))
            self.width = max(self.width, len(line))
        else:
            self.stream.write(line + "\n")
        self.stream.flush()

    def done(self) -> None:
        if self.tty and self.last is not None:
            self.stream.write("\n")
            self.stream.flush()

    def clear(self) -> None:
        """Take the live line away (on a terminal), so the next line printed replaces it."""
        if self.tty and self.last is not None:
            self.stream.write("\r" + " " * self.width + "\r")
            self.stream.flush()
