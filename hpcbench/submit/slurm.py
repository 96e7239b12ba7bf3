"""Thin wrappers over the Slurm commands hpcbench uses (sbatch, squeue, sacct, scancel).

squeue is the source of live state, and with ``--states=all`` it also shows how recently ended jobs
ended (for MinJobAge seconds). sacct adds the jobs squeue has forgotten, where accounting runs; many
small clusters and test set-ups have no slurmdbd, and then the point's own folder tells the ending.
Each poll is one squeue call (plus one sacct call where it works) for all the run's jobs, never one
per job.
"""

from __future__ import annotations

import getpass
import shutil
from dataclasses import dataclass
from pathlib import Path

from hpcbench import proc
from hpcbench.errors import SchedulerError
from hpcbench.submit.registry import use
from hpcbench.vocab import SLURM_ACTIVE

_SEP = "|"


@dataclass(frozen=True)
class JobInfo:
    """One job as the scheduler reports it."""

    job_id: str
    state: str  # Slurm's word: PENDING, RUNNING, COMPLETED, FAILED, TIMEOUT, CANCELLED, NODE_FAIL, ...
    reason: str = ""  # squeue's %r, or sacct's Reason
    comment: str = ""  # hpcbench puts "hpcbench:<run id>:<point id>" here
    exit_code: str = ""  # sacct's ExitCode "code:signal"; squeue does not report it

    @property
    def active(self) -> bool:
        return self.state in SLURM_ACTIVE


def available() -> bool:
    return shutil.which("sbatch") is not None and shutil.which("squeue") is not None


def _run(argv: list[str], timeout: float = 60) -> str:
    ran = proc.run(argv, timeout)
    if ran.missing:
        raise SchedulerError(ran.why(), hint=", or ".join(filter(None, (
            "run on a Slurm login node", use(lambda b: not b.queued and b.auto_rank is not None, "use")))))
    if ran.problem:
        raise SchedulerError(ran.why(), hint="check that slurmctld is up: scontrol ping")
    if not ran.ok:
        raise SchedulerError(f"{argv[0]} failed: {ran.why()}")
    return ran.stdout


def sbatch(script: Path, extra: tuple[str, ...] = ()) -> str:
    """Submit a job script; return its job id."""
    out = _run(["sbatch", "--parsable", *extra, str(script)])
    job_id = out.strip().split(";")[0]
    if not job_id:
        raise SchedulerError(f"sbatch {script}: printed no job id")
    return job_id


def _state_word(raw: str) -> str:
    # sacct writes "CANCELLED by 0"; squeue writes the bare word.
    return raw.split()[0] if raw.strip() else "UNKNOWN"


def parse_squeue(text: str) -> dict[str, JobInfo]:
    """Parse ``squeue --noheader --format=%i|%T|%r|%k``; the comment is last, so it may hold anything."""
    jobs = {}
    for line in text.splitlines():
        parts = line.split(_SEP, 3)
        if len(parts) < 3 or not parts[0].strip():
            continue
        comment = parts[3].strip() if len(parts) > 3 else ""
        jid = parts[0].strip()
        jobs[jid] = JobInfo(jid, _state_word(parts[1]), parts[2].strip(), "" if comment == "(null)" else comment)
    return jobs


def snapshot() -> dict[str, JobInfo]:
    """Every job of this user that squeue knows, live or recently ended: one squeue call."""
    out = _run(["squeue", "--noheader", "--states=all", f"--user={getpass.getuser()}",
                f"--format=%i{_SEP}%T{_SEP}%r{_SEP}%k"])
    return parse_squeue(out)


SACCT_FIELDS = ("JobID", "State", "ExitCode", "Reason", "Comment")


def parse_sacct(text: str, fields: tuple[str, ...] = SACCT_FIELDS) -> dict[str, JobInfo]:
    """Parse ``sacct --parsable2 --noheader --format=<fields>`` (any order; JobID and State required).

    Only the allocation's own line counts (``123``, not the steps ``123.batch`` / ``123.0``): the
    job's state is what the user asked about, and its steps repeat or contradict it.
    """
    col = {name.lower(): i for i, name in enumerate(fields)}

    def get(parts: list[str], name: str) -> str:
        i = col.get(name)
        return parts[i].strip() if i is not None and i < len(parts) else ""

    jobs = {}
    for line in text.splitlines():
        parts = line.split(_SEP)
        jid = get(parts, "jobid")
        if len(parts) < 2 or not jid or "." in jid:
            continue
        reason = get(parts, "reason")
        jobs[jid] = JobInfo(jid, _state_word(get(parts, "state")), "" if reason in ("None", "(null)") else reason,
                            get(parts, "comment"), get(parts, "exitcode"))
    return jobs


_sacct_broken: str | None = None  # why sacct cannot be used here; asked once per process


def accounting(job_ids: list[str]) -> dict[str, JobInfo] | None:
    """sacct's view of these jobs in one call; None where accounting is off (no slurmdbd)."""
    global _sacct_broken
    if not job_ids or _sacct_broken is not None or shutil.which("sacct") is None:
        return None
    try:
        out = _run(["sacct", "--parsable2", "--noheader", "--allocations", f"--format={','.join(SACCT_FIELDS)}",
                    f"--jobs={','.join(job_ids)}"])
    except SchedulerError as e:
        _sacct_broken = str(e)
        return None
    return parse_sacct(out)


def queue_states(job_ids: list[str]) -> dict[str, str]:
    """Live state of each of these jobs still in the queue; ended jobs are absent."""
    if not job_ids:
        return {}
    wanted = set(job_ids)
    return {j: info.state for j, info in snapshot().items() if j in wanted and info.active}


def cancel(job_ids: list[str]) -> None:
    if job_ids:
        _run(["scancel", *job_ids])
