"""Thin wrappers over the Slurm commands hpcbench uses (sbatch, squeue, scontrol).

squeue, not sacct, is the source of live state: sacct needs slurmdbd, which many small clusters and
test set-ups do not run. A job that has left squeue is over; how it ended is read from its folder.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from hpcbench.errors import SchedulerError

ACTIVE = {"PENDING", "CONFIGURING", "RUNNING", "COMPLETING", "SUSPENDED", "REQUEUED", "RESIZING", "STAGE_OUT"}


def available() -> bool:
    return shutil.which("sbatch") is not None and shutil.which("squeue") is not None


def _run(argv: list[str], timeout: float = 60) -> str:
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    except FileNotFoundError:
        raise SchedulerError(f"{argv[0]}: command not found", hint="run on a Slurm login node, or use --backend local") from None
    except subprocess.TimeoutExpired:
        raise SchedulerError(f"{' '.join(argv[:2])}: no answer from Slurm in {timeout:.0f}s",
                             hint="check that slurmctld is up: scontrol ping") from None
    if proc.returncode != 0:
        msg = (proc.stderr or proc.stdout).strip().splitlines()
        raise SchedulerError(f"{' '.join(argv[:2])} failed: {msg[-1] if msg else f'exit {proc.returncode}'}")
    return proc.stdout


def sbatch(script: Path) -> str:
    """Submit a job script; return its job id."""
    out = _run(["sbatch", "--parsable", str(script)])
    job_id = out.strip().split(";")[0]
    if not job_id:
        raise SchedulerError(f"sbatch {script}: printed no job id")
    return job_id


def queue_states(job_ids: list[str]) -> dict[str, str]:
    """Live state of each job still known to squeue; finished jobs are absent from the result."""
    if not job_ids:
        return {}
    # squeue rejects the whole call when one id is unknown to it, so ask for all jobs and filter.
    out = _run(["squeue", "--noheader", "--all", "--format=%i %T"])
    wanted = set(job_ids)
    states = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0] in wanted:
            states[parts[0]] = parts[1]
    return states


def cancel(job_ids: list[str]) -> None:
    if job_ids:
        _run(["scancel", *job_ids])
