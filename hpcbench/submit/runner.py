"""The sweep pipeline: load -> expand -> create run dir -> render -> submit -> (wait) -> summarize."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from hpcbench.errors import SchedulerError
from hpcbench.files import atomic_write_text, write_new
from hpcbench.plan import limits
from hpcbench.plan.expand import Point, expand, order_note, run_order
from hpcbench.plan.spec import SweepSpec
from hpcbench.rundir import RunDir
from hpcbench.states import PointState, count_line
from hpcbench.submit.registry import AUTO
from hpcbench.submit.render import render_job
from hpcbench.submit.status import refresh


@dataclass(frozen=True)
class SweepOptions:
    backend: str = AUTO
    dry_run: bool = False
    wait: bool = False
    run_dir: Path | None = None
    runs_root: Path = Path("runs")
    poll_s: float = 5.0
    force: bool = False
    hold: bool = False


def render_all(spec: SweepSpec, rd: RunDir, points: list[Point], python: str, fresh: bool = False) -> None:
    """Write every point's job.sh; ``fresh``: the run directory was just made, so no script exists yet."""
    for p in points:
        paths = rd.point(p)
        text = render_job(spec, p, paths, python, rd.job_comment(p.id))
        if fresh:
            write_new(paths.job_script, text, 0o777)
        else:  # a re-run: a reader (or sbatch by hand) may be looking at the old script
            atomic_write_text(paths.job_script, text, 0o777)


def prepare(spec: SweepSpec, opts: SweepOptions) -> tuple[RunDir, list[Point], str]:
    """Expand the sweep, create (or reopen, for a re-run) the run directory and write every job script.

    Submits nothing. Reopening an existing run keeps its ledger; the job scripts are rendered again,
    so changed scheduler settings (a longer time limit) apply to what is submitted next.
    """
    points = run_order(spec, expand(spec))  # plan.json holds them in the order they are submitted
    python = spec.slurm.python or sys.executable
    limits.check(spec, points, python, opts.dry_run)
    root = opts.run_dir or RunDir.default_path(opts.runs_root, spec.sweep.name)
    if opts.run_dir and RunDir(root).plan_json.exists():
        from hpcbench.submit.submission import check_same_plan

        fresh = False
        rd = RunDir.open(root)
        check_same_plan(rd, points, spec.path)
        atomic_write_text(rd.sweep_copy, spec.text)
    else:
        rd = RunDir.create(root, spec.text, spec.sweep.name, points,
                           cluster=spec.cluster.cluster_name if spec.cluster is not None else None, dry_run=opts.dry_run,
                           order={"order": spec.sweep.order, "seed": spec.sweep.seed, "note": order_note(spec)})
        fresh = True
    if Path(spec.path).is_file():
        atomic_write_text(rd.sweep_ref, f"{Path(spec.path).resolve()}\n")
    if spec.cluster is not None and Path(spec.cluster.source).is_file():
        atomic_write_text(rd.cluster_ref, f"{Path(spec.cluster.source).resolve()}\n")
    render_all(spec, rd, points, python, fresh)
    return rd, points, python


def reopen_spec(rd: RunDir, cluster: str | None = None) -> SweepSpec:
    """The sweep a run was made from, read again from its copy (a longer time edited there applies), with
    the cluster profile the sweep used unless ``cluster`` names another."""
    from dataclasses import replace

    from hpcbench.plan.spec import parse

    profile = cluster or (rd.cluster_ref.read_text(encoding="utf-8").strip() if rd.cluster_ref.exists() else None)
    spec = parse(rd.sweep_copy.read_text(encoding="utf-8"), str(rd.sweep_copy), profile, rd.sweep_base())
    # The copy is named sweep.toml; a sweep without [sweep] name took its name from the original file.
    return replace(spec, sweep=replace(spec.sweep, name=rd.sweep_name()))


def wait(rd: RunDir, poll_s: float, echo: Callable[[str], None], timeout_s: float | None = None,
         stream: TextIO | None = None, retry: Callable[[list[PointState]], int] | None = None) -> list[PointState]:
    """Block until every point is final; show one progress line of counts per state.

    Each poll is one status call per backend in use (for Slurm: one squeue call, plus one sacct call where
    accounting works) for the whole run.
    ``retry`` (hpcbench.submit.retry.retrier) resubmits the points the cluster failed; it returns how many.
    """
    from hpcbench.submit.status import Progress

    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    bar = Progress(stream or sys.stdout)
    while True:
        states = refresh(rd)[1]
        if retry is not None and retry(states):
            states = refresh(rd)[1]
        bar.show(f"  {len(states)} points: {count_line(states)}")
        if all(s.final for s in states):
            bar.done()
            return states
        if deadline is not None and time.monotonic() > deadline:
            bar.done()
            live = sorted(s.job_id or s.point.label for s in states if not s.final)
            raise SchedulerError(f"points still live after {timeout_s:.0f}s: {', '.join(live)}")
        time.sleep(poll_s)
