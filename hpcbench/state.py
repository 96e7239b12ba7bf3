"""What happened to each point: derived from the point's folder, the ledger and the live queue.

Nothing is dropped: every planned point gets exactly one PointState, with a reason when it is not ok.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import partial

from hpcbench import schema, slurmcli
from hpcbench.errors import SchedulerError, SchemaError
from hpcbench.plan import Point
from hpcbench.rundir import PointPaths, RunDir
from hpcbench.schema import ErrorRecord, ResultRecord

# Lines in job logs that explain an ending, most specific first.
_SLURM_END = re.compile(r"\*\*\* (?:JOB|STEP) \S+ .*(CANCELLED|DUE TO TIME LIMIT|DUE TO NODE FAILURE|PREEMPTION)")
_ERRORISH = re.compile(r"(Error|error:|Exception|Traceback|FAILED|Killed|killed)")


LIVE_STATES = frozenset({"pending", "running", "unknown"})


@dataclass(frozen=True)
class PointState:
    point: Point
    state: str  # ok | failed | timeout | pending | running | missing | unparsable | not submitted | unknown
    reason: str = ""
    job_id: str | None = None
    backend: str | None = None
    result: ResultRecord | None = None

    @property
    def ok(self) -> bool:
        """A readable result record exists: the one test callers should use, whatever the state is called."""
        return self.result is not None

    @property
    def final(self) -> bool:
        """Nothing more will happen to this point without a resubmission."""
        return self.state not in LIVE_STATES


def root_cause(paths: PointPaths) -> tuple[ErrorRecord | None, int, list[str]]:
    """The earliest error record (the root cause, not its echoes), how many ranks failed, and unreadable files."""
    records, bad = [], []
    for f in paths.errors():
        try:
            records.append(ErrorRecord.from_dict(schema.read_json(f, schema.ERROR), str(f)))
        except (SchemaError, OSError) as e:
            bad.append(str(e))
    records.sort(key=lambda r: (r.time, r.rank))
    return (records[0] if records else None), len(records), bad


def log_reason(paths: PointPaths) -> tuple[str, bool]:
    """(a line from the job's logs that explains its end, whether it was a time limit)."""
    lines: list[str] = []
    for log in paths.logs():
        try:
            lines += log.read_text(encoding="utf-8", errors="replace").splitlines()
        except OSError:
            continue
    for line in reversed(lines):
        m = _SLURM_END.search(line)
        if m:
            return line.strip(), "TIME LIMIT" in line
    if any("hpcbench local: time limit reached" in l for l in lines):
        return "time limit reached (local backend)", True
    for line in reversed(lines):
        if _ERRORISH.search(line) and not line.lstrip().startswith("File "):
            return line.strip(), False
    return (lines[-1].strip() if lines else ""), False


def _exitcode(paths: PointPaths) -> int | None:
    try:
        return int(paths.exitcode.read_text().strip())
    except (OSError, ValueError):
        return None


def point_state(p: Point, paths: PointPaths, sub: dict | None, live: dict[str, str] | None) -> PointState:
    job_id = sub.get("job_id") if sub else None
    backend = sub.get("backend") if sub else None
    make = partial(PointState, point=p, job_id=job_id, backend=backend)
    if paths.result.exists():
        try:
            rec = ResultRecord.from_dict(schema.read_json(paths.result, schema.RESULT), str(paths.result))
            return make(state="ok", result=rec)
        except (SchemaError, TypeError, KeyError) as e:
            return make(state="unparsable", reason=str(e))
    if sub and sub.get("event") == "submit_failed":
        return make(state="failed", reason=f"not submitted: {sub.get('reason', '')}")
    first, n_failed, bad = root_cause(paths)
    if first is not None:
        more = f" (+{n_failed - 1} more ranks failed)" if n_failed > 1 else ""
        return make(state="failed", reason=f"rank {first.rank} on {first.hostname}: "
                          f"{first.error_type}: {first.message}{more}")
    if bad:
        return make(state="unparsable", reason=bad[0])
    if sub is None:
        return make(state="not submitted", reason="planned only (dry run?)")
    if live is not None and job_id in live:
        return make(state=live[job_id].lower())
    code = _exitcode(paths)
    line, timed_out = log_reason(paths)
    if timed_out:
        return make(state="timeout", reason=line)
    if code is not None:
        why = f"exit code {code}" + (f": {line}" if line else "")
        if code == 0:
            why = "the job exited 0 but wrote no result record" + (f"; last log line: {line}" if line else "")
        return make(state="failed", reason=why)
    if live is None and backend != "local":
        return make(state="unknown", reason=f"job {job_id}: no result yet, and the queue could not be read")
    why = f"job {job_id} left the queue without a result or exit code"
    return make(state="missing", reason=why + (f"; last log line: {line}" if line else " and without logs"))


def collect(rd: RunDir, live: dict[str, str] | None) -> list[PointState]:
    subs = rd.submissions()
    return [point_state(p, rd.point(p), subs.get(p.id), live) for p in rd.points()]


def live_states(rd: RunDir) -> dict[str, str] | None:
    """squeue's view of this run's queued jobs; {} when none were queued; None when squeue cannot be read."""
    ids = rd.queued_job_ids()
    if not ids:
        return {}
    try:
        return slurmcli.queue_states(ids)
    except SchedulerError:
        return None


