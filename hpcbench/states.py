"""What happened to each point: derived from the point's folder and the ledger, and the scheduler's
word where the caller asked for it (hpcbench.submit.status).

Nothing is dropped: every planned point gets exactly one PointState, with a reason when it is not ok.
The state names are Slurm's own (COMPLETED, FAILED, TIMEOUT, ...), plus four of hpcbench's for
what Slurm cannot know: MISSING, UNPARSABLE, NOT_SUBMITTED and UNKNOWN.

Sources, most trusted first: the point's result record; the scheduler's word on the point's job (asked
now, or as the ledger's ``ended`` line kept it when `status` last heard the job end); and what the job
script left in the point's folder (its exit-status file and logs). Without the scheduler's word, a job
the ledger does not know to be over is UNKNOWN, never guessed MISSING.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Literal

from hpcbench import records
from hpcbench.errors import NoSpace, SchemaError
from hpcbench.jobs import Job, SchedulerView, backend_name
from hpcbench.plan.expand import Point
from hpcbench.records import ErrorRecord, ResultRecord
from hpcbench.rundir import PointPaths, RunDir
from hpcbench.vocab import (
    CANCELLED,
    COMPLETED,
    FAILED,
    LIVE_STATES,
    MISSING,
    NODE_FAIL,
    NOT_SUBMITTED,
    OUT_OF_MEMORY,
    PENDING,
    RUNNING,
    SLURM_ACTIVE,
    SLURM_ENDED,
    STATES,
    TIMEOUT,
    UNKNOWN,
    UNPARSABLE,
)

# Lines in job logs that explain an ending, most specific first.
_SLURM_END = re.compile(r"\*\*\* (?:JOB|STEP) \S+ .*(CANCELLED|DUE TO TIME LIMIT|DUE TO NODE FAILURE|PREEMPTION)")
OOM_LINE = re.compile(r"oom[-_ ]kill|Out Of Memory|OUT_OF_MEMORY", re.IGNORECASE)
_SRUN_ECHO = re.compile(r"srun: error: \S+: tasks? [\d,-]+: (Exited with exit code|Killed|Terminated)")
_ERRORISH = re.compile(r"(Error|error:|Exception|Traceback|FAILED|Killed|killed)")


def _normalise(state: str) -> str:
    if state not in STATES:
        raise ValueError(f"unknown point state {state!r} (one of: {', '.join(STATES)})")
    return state


@dataclass(frozen=True)
class PointState:
    point: Point
    state: str  # one of STATES
    reason: str = ""
    job_id: str | None = None
    backend: str | None = None
    result: ResultRecord | None = None
    pack: str | None = field(default=None, compare=False)
    earlier: tuple[dict, ...] = field(default=(), compare=False)  # the ledger's attempt_ended lines, oldest first

    @property
    def attempt(self) -> int:
        return len(self.earlier) + 1

    @property
    def explained(self) -> str:
        """The reason, and each earlier attempt's job, state and why it was submitted again."""
        return _join(self.reason, attempt_note(list(self.earlier))) if self.earlier else self.reason

    def __post_init__(self) -> None:
        _normalise(self.state)

    @property
    def ok(self) -> bool:
        """A readable result record exists: the one test callers should use, whatever the state is called."""
        return self.result is not None

    @property
    def queued(self) -> bool:
        """The point's job is waiting or running: cancelling it means something."""
        return self.state in (PENDING, RUNNING)

    @property
    def final(self) -> bool:
        """Nothing more will happen to this point without a resubmission."""
        return self.state not in LIVE_STATES


def parse_states(text: str) -> tuple[str, ...]:
    """``FAILED,timeout`` -> ("FAILED", "TIMEOUT"); an unknown name is a ConfigError listing the valid ones."""
    from hpcbench.errors import ConfigError

    out = []
    for word in (w.strip().upper().replace("-", "_") for w in text.split(",")):
        if word == "NOT SUBMITTED":
            word = NOT_SUBMITTED
        if word not in STATES:
            raise ConfigError(f"--state: unknown state {word!r} (choose from: {', '.join(STATES)})")
        out.append(word)
    return tuple(out)


def error_records(paths: PointPaths) -> tuple[list[ErrorRecord], list[str]]:
    """A point's error records, earliest first (the root cause, then its echoes), and its unreadable ones."""
    errs, bad = [], []
    for f in paths.errors():
        try:
            errs.append(ErrorRecord.from_dict(records.read_json(f, records.ERROR), str(f)))
        except (SchemaError, OSError) as e:
            bad.append(str(e))
    errs.sort(key=lambda r: (r.time, r.rank))
    return errs, bad


def root_cause(paths: PointPaths) -> tuple[ErrorRecord | None, int, list[str]]:
    """The earliest error record (the root cause, not its echoes), how many ranks failed, and unreadable files."""
    errs, bad = error_records(paths)
    return (errs[0] if errs else None), len(errs), bad


def log_lines(paths: PointPaths, job_id: str | None = None) -> list[str]:
    """Every line of one job's logs (every job's when None), unreadable files skipped."""
    lines: list[str] = []
    for log in paths.logs(job_id=job_id):
        try:
            lines += log.read_text(encoding="utf-8", errors="replace").splitlines()
        except OSError:
            continue
    return lines


def log_reason(paths: PointPaths, job_id: str | None = None) -> tuple[str, str | None]:
    """(a line from the job's logs that explains its end, the state that line implies or None)."""
    lines = log_lines(paths, job_id)
    for line in reversed(lines):
        m = _SLURM_END.search(line)
        if m:
            word = m.group(1)
            implied = TIMEOUT if "TIME LIMIT" in word else NODE_FAIL if "NODE" in word else CANCELLED
            return line.strip(), implied
    for line in reversed(lines):
        if OOM_LINE.search(line):
            return line.strip(), OUT_OF_MEMORY
    # srun's closing "task 0: Exited with exit code 2" only repeats the status; the line before says why.
    for line in reversed(lines):
        if _ERRORISH.search(line) and not line.lstrip().startswith("File ") and not _SRUN_ECHO.search(line):
            return line.strip(), None
    for line in reversed(lines):
        if _ERRORISH.search(line):
            return line.strip(), None
    return (lines[-1].strip() if lines else ""), None


def _exitcode(paths: PointPaths) -> int | None:
    try:
        return int(paths.exitcode.read_text().strip())
    except (OSError, ValueError):
        return None


def _failure_reason(paths: PointPaths) -> str | None:
    first, n_failed, _ = root_cause(paths)
    if first is None:
        return None
    more = f" (+{n_failed - 1} more ranks failed)" if n_failed > 1 else ""
    return f"rank {first.rank} on {first.hostname}: {first.error_type}: {first.message}{more}"


def _exit_reason(code: int, line: str) -> str:
    if code == 0:
        return _join("the job exited 0 but wrote no result record", line and f"last log line: {line}")
    return f"exit code {code}" + (f": {line}" if line else "")


def _join(*parts: str | None) -> str:
    return "; ".join(p for p in parts if p)


#: what is known of the scheduler's view of a job it has no record of: it was asked (the job is gone), it could
#: not be asked, or it was not asked (a summary reads the disk only)
Queue = Literal["read", "unreadable", "not asked"]
_UNKNOWN_WHY = {"unreadable": "the queue could not be read",
                "not asked": "its end is not in the ledger (hpcbench status RUN_DIR asks the scheduler)"}


def point_state(p: Point, paths: PointPaths, sub: dict | None, job: Job | None,
                queue: Queue = "read", ran: Job | None = None) -> PointState:
    """One point's state. ``job`` is the scheduler's record of the point's job (None: it has none);
    ``queue`` says whether an absent record means the job is gone. ``ran``: the word of a backend without a
    queue on the job it ran to its end (the ledger's ``finished`` line; Job.ran)."""
    job_id = sub.get("job_id") if sub else None
    backend = sub.get("backend") if sub else None
    pack = sub.get("pack") if sub else None
    make = partial(PointState, point=p, job_id=job_id, backend=backend, pack=pack)
    if paths.result.exists():
        return _with_result(make, paths, pack, job)
    if sub is None:
        return make(state=NOT_SUBMITTED, reason="planned only (dry run, or not submitted yet)")
    if sub["event"] == "submit_failed":
        return make(state=FAILED, reason=f"not submitted: {sub.get('reason', '')}")
    if sub["event"] == "submitting":
        return make(state=UNKNOWN, reason="the submitter stopped between its intent and sbatch's answer; "
                                          "re-run the sweep with --run-dir to settle it")
    failure = _failure_reason(paths)
    code = _exitcode(paths)
    line, implied = log_reason(paths, job_id)
    if implied is None and ran is not None and ran.state not in (COMPLETED, FAILED):  # its exit code says those
        line, implied = ran.reason or line, SLURM_ENDED.get(ran.state)
    # In a pack, the allocation outlives each point: the point's own exit status says it is over.
    if pack and code is not None:
        return make(state=FAILED, reason=failure or _exit_reason(code, line))
    if job is not None and job.active:
        if failure:  # a rank died; the others may linger until their timeout
            return make(state=RUNNING, reason=f"a rank failed, the job is still ending: {failure}")
        return make(state=SLURM_ACTIVE.get(job.state, PENDING), reason="" if job.reason in ("None", "") else job.reason)
    if job is not None and job.state in SLURM_ENDED:
        return _ended(make, job, pack, failure, code, line)
    # The scheduler has forgotten the job (or never had one): read the folder.
    if failure:
        return make(state=FAILED, reason=failure)
    bad = root_cause(paths)[2]
    if bad:
        return make(state=UNPARSABLE, reason=bad[0])
    if implied is not None:
        return make(state=implied, reason=line)
    if code is not None:
        return make(state=FAILED, reason=_exit_reason(code, line))
    if queue != "read":
        return make(state=UNKNOWN, reason=f"job {job_id}: no result yet, and {_UNKNOWN_WHY[queue]}")
    why = f"job {job_id} left the queue without a result or exit code"
    return make(state=MISSING, reason=why + (f"; last log line: {line}" if line else " and without logs"))


def _with_result(make: partial[PointState], paths: PointPaths, pack: str | None, job: Job | None) -> PointState:
    try:
        rec = ResultRecord.from_dict(records.read_json(paths.result, records.RESULT), str(paths.result))
    except (SchemaError, TypeError, KeyError) as e:
        return make(state=UNPARSABLE, reason=str(e))
    # A packed point's step writes its exit status after the record, while the allocation runs on:
    # not final until then, so that --wait returns with every point's files in place.
    if pack and job is not None and job.active and _exitcode(paths) is None:
        return make(state=RUNNING, result=rec, reason="result written; its job step is ending")
    return make(state=COMPLETED, result=rec)


def _ended(make: partial[PointState], job: Job, pack: str | None, failure: str | None, code: int | None,
           line: str) -> PointState:
    """A job the scheduler says has ended, without a result record."""
    state = SLURM_ENDED[job.state]
    if state == COMPLETED:  # Slurm is satisfied, but the workload left no result
        state = FAILED
        line = _join("the job ended COMPLETED but wrote no result record", line)
    slurm_why = f"Slurm: {job.state}" + (f" ({job.reason})" if job.reason and job.reason != "None" else "")
    if job.exit_code and job.exit_code != "0:0":
        slurm_why += f", exit {job.exit_code}"
    if pack and state == FAILED:
        slurm_why = "the pack's allocation ended before this point's step did; " + slurm_why
    # A failure's root cause (a rank's record, else the script's exit status) says more than
    # Slurm's word for it; other endings lead with Slurm's.
    if state == FAILED and (failure or code is not None):
        return make(state=state, reason=_join(failure or _exit_reason(code, line), slurm_why))  # type: ignore[arg-type]
    return make(state=state, reason=_join(slurm_why, failure or line))


def collect(rd: RunDir, view: SchedulerView | None = None) -> list[PointState]:
    """Every planned point's state.

    ``view``: what the schedulers said just now (hpcbench.submit.status.scheduler_view); None: the disk only,
    where the ledger's ``finished`` and ``ended`` lines tell which jobs are over.
    """
    subs = rd.submissions()
    earlier = ended_attempts(rd)
    over, ran = _ledger_ends(rd)
    out = []
    for p in rd.points():
        sub = subs.get(p.id)
        job_id = str(sub["job_id"]) if sub and sub.get("job_id") else None
        job = view.jobs.get(job_id) if view is not None and job_id else None
        queue: Queue = "not asked" if view is None else "read" if view.read else "unreadable"
        if job is None and job_id in over:  # over by the ledger's word: its absence from the queue says so
            job, queue = (None if job_id in ran else over[job_id]), "read"
        st = point_state(p, rd.point(p), sub, job, queue, ran.get(job_id or ""))
        out.append(replace(st, earlier=tuple(earlier[p.id])) if p.id in earlier else st)
    return out


def ended_jobs(rd: RunDir) -> dict[str, Job | None]:
    """Jobs the ledger knows to be over: job id -> the scheduler's last word on it (None: it said none).

    A backend that runs its points before submit returns records ``finished``; for a queued one, `status`
    records ``ended`` when the scheduler says the job ended or has forgotten it (record_ended).
    """
    return _ledger_ends(rd)[0]


def _ledger_ends(rd: RunDir) -> tuple[dict[str, Job | None], dict[str, Job]]:
    """ended_jobs, and of them the ``finished`` ones whose backend said how they ended (a ledger older than
    Job.ran has no state on them: their folder alone tells)."""
    over: dict[str, Job | None] = {}
    ran: dict[str, Job] = {}
    for e in rd.events():
        if e["event"] in ("finished", "ended") and e.get("job_id"):
            jid = str(e["job_id"])
            over[jid] = Job(jid, backend_name(e.get("backend")), state=e.get("state", ""), reason=e.get("reason", ""),
                            exit_code=e.get("exit_code", "")) if e.get("state") else None
            if e["event"] == "finished" and (said := over[jid]) is not None:
                ran[jid] = said
    return over, ran


def record_ended(rd: RunDir, view: SchedulerView, states: list[PointState]) -> None:
    """Keep in the ledger the scheduler's word on each job it says ended (or has forgotten), once per job, so
    that a summary, which reads only the disk, tells what `status` told."""
    if not view.read:
        return
    known = ended_jobs(rd)
    for s in states:
        job = view.jobs.get(s.job_id or "")
        # A pack's allocation may run on after one of its points is over: only the job's own end is kept.
        if not s.final or s.ok or not s.job_id or s.job_id in known or (job is not None and job.active):
            continue
        said = {"state": job.state, "reason": job.reason, "exit_code": job.exit_code} if job else {}
        try:
            rd.record("ended", s.point.id, job_id=s.job_id, backend=s.backend, **said)
        except (OSError, NoSpace):  # a run not ours to write, or a full disk: the states shown stand, unkept
            return
        known[s.job_id] = None


def ended_attempts(rd: RunDir) -> dict[str, list[dict]]:
    """Every point's earlier attempts, oldest first: the ledger's attempt_ended lines (written on resubmission)."""
    out: dict[str, list[dict]] = {}
    for e in rd.events():
        if e["event"] == "attempt_ended":
            out.setdefault(e["point_id"], []).append(e)
    return out


def attempt_note(earlier: list[dict]) -> str:
    """``attempt 2; earlier: job 41 NODE_FAIL [retried: node failure]: Slurm: NODE_FAIL (...)``."""
    said = [f"job {e.get('job_id')} {e.get('state')} [{'retried: ' + e['retry'] if e.get('retry') else 'resubmitted'}]"
            + (f": {e['reason']}" if e.get("reason") else "") for e in earlier]
    return f"attempt {len(earlier) + 1}; earlier: " + "; ".join(said)


def status_table(states: list[PointState]) -> str:
    """`hpcbench status`: one row per point, then the counts per state."""
    from hpcbench.tabular import format_table

    rows = [{"point": s.point.label, "id": s.point.id, "state": s.state, "job": s.job_id, "attempt": s.attempt,
             "reason": s.explained or None} for s in states]
    return format_table(rows, ("point", "id", "state", "job", "attempt", "reason")) + f"\n{len(states)} points: {count_line(states)}"


def counts(states: list[PointState]) -> Counter[str]:
    return Counter(s.state for s in states)


def count_line(states: list[PointState]) -> str:
    """``3 COMPLETED, 1 RUNNING, 2 PENDING`` in the fixed order of STATES."""
    c = counts(states)
    return ", ".join(f"{c[s]} {s}" for s in STATES if c[s])
