"""The sweep pipeline: load -> expand -> create run dir -> render -> submit -> (wait) -> summarize."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from hpcbench import preflight, slurmcli
from hpcbench.backends.base import Backend
from hpcbench.errors import ConfigError, SchedulerError
from hpcbench.plan import Point, expand
from hpcbench.render import render_job
from hpcbench.rundir import RunDir, atomic_write_text
from hpcbench.spec import SweepSpec

BACKEND_CHOICES = ("auto", "sbatch", "submitit", "local")


@dataclass(frozen=True)
class SweepOptions:
    backend: str = "auto"
    dry_run: bool = False
    wait: bool = False
    run_dir: Path | None = None
    runs_root: Path = Path("runs")
    poll_s: float = 5.0


def make_backend(name: str) -> Backend:
    if name == "auto":
        name = "sbatch" if slurmcli.available() else "local"
    if name == "sbatch":
        from hpcbench.backends.sbatch import SbatchBackend

        return SbatchBackend()
    if name == "submitit":
        from hpcbench.backends.submitit import SubmititBackend

        return SubmititBackend()
    if name == "local":
        from hpcbench.backends.local import LocalBackend

        return LocalBackend()
    raise ConfigError(f"--backend: unknown backend {name!r} (choose from: {', '.join(BACKEND_CHOICES)})")


def prepare(spec: SweepSpec, opts: SweepOptions) -> tuple[RunDir, list[Point], str]:
    """Expand the sweep, create the run directory and write every job script. Submits nothing."""
    points = expand(spec)
    if not points:
        raise ConfigError(f"{spec.path}: the exclude entries remove every point of the matrix",
                          hint="loosen an [[exclude]] entry")
    python = spec.slurm.python or sys.executable
    preflight.check(spec, points, python)
    root = opts.run_dir or RunDir.default_path(opts.runs_root, spec.sweep.name)
    rd = RunDir.create(root, spec.text, spec.sweep.name, points)
    for p in points:
        paths = rd.point(p)
        atomic_write_text(paths.job_script, render_job(spec, p, paths, python))
        paths.job_script.chmod(0o755)
    return rd, points, python


def submit_all(spec: SweepSpec, rd: RunDir, points: list[Point], python: str, backend: Backend,
               echo: Callable[[str], None]) -> int:
    """Submit every point; a refused point is recorded with its reason and the others still go. Returns failures."""
    failures = 0
    for p in points:
        paths = rd.point(p)
        try:
            job_id = backend.submit(spec, p, paths, python)
        except SchedulerError as e:
            failures += 1
            rd.record("submit_failed", p.id, backend=backend.name, reason=str(e))
            echo(f"  {p.label}: NOT submitted: {e}")
            continue
        rd.record("submitted", p.id, job_id=job_id, backend=backend.name)
        if backend.queued:
            echo(f"  {p.label}: job {job_id}")
        else:
            code = paths.exitcode.read_text().strip() if paths.exitcode.exists() else "?"
            rd.record("finished", p.id, job_id=job_id, backend=backend.name, exit_code=code)
            echo(f"  {p.label}: {'done' if code == '0' else 'FAILED (exit ' + code + ')'}")
    return failures


def wait(rd: RunDir, poll_s: float, echo: Callable[[str], None], timeout_s: float | None = None) -> None:
    """Block until no job of this run is in the queue. Polls squeue (sacct may be off)."""
    ids = rd.queued_job_ids()
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    last = None
    while ids:
        states = slurmcli.queue_states(ids)
        counts: dict[str, int] = {}
        for st in states.values():
            counts[st.lower()] = counts.get(st.lower(), 0) + 1
        msg = ", ".join(f"{n} {s}" for s, n in sorted(counts.items())) or "all jobs left the queue"
        if msg != last:
            echo(f"  waiting: {msg}")
            last = msg
        if not states:
            return
        if deadline is not None and time.monotonic() > deadline:
            raise SchedulerError(f"jobs still queued after {timeout_s:.0f}s: {', '.join(sorted(states))}")
        time.sleep(poll_s)
