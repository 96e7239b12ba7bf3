"""Verbs that plan and run a study: sweep, plan, status, resubmit, cancel."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hpcbench.cli.common import Args, echo, profile_arg
from hpcbench.vocab import RESUBMIT_DEFAULT, UNSUPPORTED

if TYPE_CHECKING:
    from hpcbench.hunt.record import Exclusion
    from hpcbench.plan.spec import SweepSpec
    from hpcbench.rundir import RunDir
    from hpcbench.submit.backends.base import Backend

PLAN_ROWS_SHOWN = 200  # a 10,000-row table helps nobody on a terminal; plan.json has every point


def cmd_sweep(args: Args) -> int:
    from hpcbench.plan import spec as spec_mod
    from hpcbench.plan.expand import plan_columns, plan_rows
    from hpcbench.submit.registry import create
    from hpcbench.submit.runner import SweepOptions, prepare
    from hpcbench.tabular import format_table

    opts = SweepOptions(backend=args.backend, dry_run=args.dry_run, wait=args.wait,
                        run_dir=Path(args.run_dir) if args.run_dir else None, runs_root=Path(args.runs_root),
                        poll_s=args.poll, force=getattr(args, "force", False), hold=getattr(args, "hold", False))
    spec = spec_mod.load(args.file, profile_arg(args.cluster))
    exclusion = _exclusion(args, None)
    spec = _excluding(spec, exclusion)
    backend = None if opts.dry_run else create(opts.backend, opts.hold)
    if backend is not None:
        backend.check(spec)
    rd, points, python = prepare(spec, opts)
    _record_exclusion(rd, exclusion)
    from hpcbench.plan.expand import order_note

    echo(f"sweep {spec.sweep.name}: {len(points)} points -> {rd.root}")
    shown = points[:PLAN_ROWS_SHOWN]
    echo(format_table(plan_rows(shown), plan_columns(points)))
    if len(shown) < len(points):
        echo(f"... and {len(points) - len(shown)} more points (all of them in {rd.plan_json})")
    echo(order_note(spec) + "; listed above in that order")
    if backend is None:
        echo(f"dry run: {len(points)} job scripts written under {rd.points_root}; nothing submitted "
             f"(to submit these: hpcbench sweep {args.file} --run-dir {rd.root})")
        return 0
    echo(f"submitting with backend {backend.name}:")
    return _submit_and_follow(spec, rd, python, backend, args, force=opts.force)


def _submit_and_follow(spec: SweepSpec, rd: RunDir, python: str, backend: Backend, args: Args, **kw: Any) -> int:
    from hpcbench.submit.retry import retrier
    from hpcbench.submit.runner import wait as wait_for
    from hpcbench.submit.submission import submit_points

    report = submit_points(spec, rd, python, backend, echo, poll_s=args.poll, **kw)
    if report.packs:
        echo(f"packed {report.packed_points} points into {report.packs} allocation(s): "
              f"{report.allocations_saved} allocation(s) saved")
    if backend.queued and not args.wait:
        echo(f"submitted {report.submitted}, refused {report.failed}; follow with: hpcbench status {rd.root} --wait")
        return 1 if report.failed else 0
    if backend.queued:
        wait_for(rd, args.poll, echo, retry=retrier(spec, rd, python, backend, args.max_retries, echo))
    from hpcbench.report.summarize import sweep_summary

    text, rows = sweep_summary(rd, "table")
    print(text, end="" if text.endswith("\n") else "\n")
    echo(f"summary: {rd.summary_csv}")
    echo(f"next: hpcbench summarize {rd.root}   (the report: tables, plots, report.md)")
    # a collective the ranks' library does not have is recorded (UNSUPPORTED), not a failure of the sweep
    return 1 if (report.failed or any(not r["ok"] and r["state"] != UNSUPPORTED for r in rows)) else 0


def _exclusion(args: Args, rd: RunDir | None) -> Exclusion | None:
    """--exclude-nodes, joined with what the run already kept out (a resubmit keeps the sweep's exclusion)."""
    from hpcbench.hunt.record import exclusion, read_exclusion

    before = read_exclusion(rd.excluded_json) if rd is not None else None
    given = getattr(args, "exclude_nodes", None)
    return exclusion(given).merged(before) if given else before


def _excluding(spec: SweepSpec, ex: Exclusion | None) -> SweepSpec:
    from dataclasses import replace

    if ex is None:
        return spec
    return replace(spec, slurm=replace(spec.slurm, exclude=tuple(dict.fromkeys((*spec.slurm.exclude, *ex.nodes)))))


def _record_exclusion(rd: RunDir, ex: Exclusion | None) -> None:
    from hpcbench.files import atomic_write_json

    if ex is not None:
        atomic_write_json(rd.excluded_json, ex.to_json())
        echo(f"excluding {', '.join(ex.nodes) or 'no node'} (from {ex.source}; recorded in {rd.excluded_json})")


def cmd_plan(args: Args) -> int:
    from hpcbench.submit.registry import AUTO

    args.dry_run, args.backend, args.wait, args.poll = True, AUTO, False, 5.0
    return cmd_sweep(args)


def args_sweep(p: argparse.ArgumentParser, submit: bool = True) -> None:
    p.add_argument("file", help="sweep file (TOML), e.g. sweeps/local.toml")
    p.add_argument("--run-dir", help="run directory to create (default: RUNS_ROOT/<sweep>-<UTC time>)")
    p.add_argument("--runs-root", default="runs", help="where timestamped run directories go (default: runs)")
    p.add_argument("--cluster", default=os.environ.get("HPCBENCH_CLUSTER") or None,
                   help="cluster profile (clusters/NAME.toml or a path) in place of the sweep's own; "
                        "default: $HPCBENCH_CLUSTER")
    _exclude_arg(p)
    if submit:
        _backend_arg(p, "how to run the points: one of the installed backends (a site's package can add one); "
                        "auto = the first that can run here", auto=True)
        p.add_argument("--dry-run", action="store_true",
                       help="print the plan and write every job script, but submit nothing")
        args_submit(p)
        p.add_argument("--force", action="store_true",
                       help="with an existing --run-dir: resubmit every point, cancelling its live job first")


def _backend_arg(p: argparse.ArgumentParser, help_text: str, auto: bool) -> None:
    """--backend, a registered backend's name (default: auto, or None for the run's own). The names are not
    listed as argparse choices: finding them reads every installed package's metadata, which would slow every
    --help; registry.create rejects an unknown name with the list."""
    from hpcbench.submit.registry import AUTO

    p.add_argument("--backend", default=AUTO if auto else None, help=help_text)


def _exclude_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--exclude-nodes", metavar="NODES|@hunt.json",
                   help="keep these nodes out of every job (sbatch --exclude): a host list such as node[1-2], or "
                        "@hunt.json for the suspects of `hpcbench hunt`; the run records which and why")


def args_plan(p: argparse.ArgumentParser) -> None:
    args_sweep(p, submit=False)


def args_submit(p: argparse.ArgumentParser) -> None:
    p.add_argument("--wait", action="store_true", help="block until every point is final, then summarize")
    p.add_argument("--poll", type=float, default=5.0, help="seconds between queue polls with --wait")
    p.add_argument("--hold", action="store_true",
                   help="sbatch --hold: queue the jobs held, to start with 'scontrol release' (sbatch backend)")
    p.add_argument("--max-retries", type=int, metavar="N", help="with --wait: resubmit a point the cluster failed "
                   "(node failure, preemption, lost peer) up to N times; default: [slurm] max_retries (0)")


def cmd_status(args: Args) -> int:
    from hpcbench.rundir import RunDir
    from hpcbench.states import status_table
    from hpcbench.submit.runner import wait
    from hpcbench.submit.status import refresh

    rd = RunDir.open(Path(args.run_dir))
    if args.wait:
        states = wait(rd, args.poll, echo)
    else:
        view, states = refresh(rd)
        if not view.read:
            print(f"hpcbench status: the queue cannot be read ({view.why})", file=sys.stderr)
    echo(status_table(states))
    # Without --wait the states are a report; with it, scripts want to know whether all went well.
    return 1 if args.wait and not all(s.ok for s in states) else 0


def args_run_dir(p: argparse.ArgumentParser) -> None:
    p.add_argument("run_dir", help="a run directory made by 'hpcbench sweep'")


def args_status(p: argparse.ArgumentParser) -> None:
    args_run_dir(p)
    p.add_argument("--wait", action="store_true", help="show a progress line until every point is final")
    p.add_argument("--poll", type=float, default=5.0, help="seconds between polls with --wait")


def cmd_resubmit(args: Args) -> int:
    from hpcbench.plan.expand import current_jobs
    from hpcbench.rundir import RunDir
    from hpcbench.states import parse_states
    from hpcbench.errors import ConfigError
    from hpcbench.submit.registry import AUTO, create, names
    from hpcbench.submit.runner import render_all, reopen_spec
    from hpcbench.submit.submission import states_of

    rd = RunDir.open(Path(args.run_dir))
    wanted = parse_states(args.state)
    spec = reopen_spec(rd, profile_arg(args.cluster))
    exclusion = _exclusion(args, rd)
    spec = _excluding(spec, exclusion)
    _record_exclusion(rd, exclusion)
    used = [s["backend"] for s in rd.submissions().values() if s.get("backend")]
    # Without --backend, the backend the run was submitted with (the one most of its points used).
    own = max(set(used), key=used.count) if used else AUTO
    if args.backend is None and own not in names():
        raise ConfigError(f"{rd.root} was submitted with backend {own!r}, which is not installed here",
                          hint=f"install the package that provides it, or give --backend (one of: {', '.join(names())})")
    backend = create(args.backend or own, args.hold)
    backend.check(spec)
    python = spec.slurm.python or sys.executable
    render_all(spec, rd, current_jobs(spec, rd.points()), python)
    echo(f"resubmitting points of {rd.root} in state {', '.join(wanted)} with backend {backend.name}:")
    return _submit_and_follow(spec, rd, python, backend, args, select=states_of(wanted))


def args_resubmit(p: argparse.ArgumentParser) -> None:
    args_run_dir(p)
    p.add_argument("--state", default=",".join(RESUBMIT_DEFAULT),
                   help=f"comma-separated states to redo (default: {','.join(RESUBMIT_DEFAULT)})")
    _backend_arg(p, "default: the backend the run was submitted with", auto=False)
    p.add_argument("--cluster", default=None,
                   help="cluster profile (clusters/NAME.toml or a path); default: the one the sweep used")
    _exclude_arg(p)
    args_submit(p)


def cmd_cancel(args: Args) -> int:
    from hpcbench.rundir import RunDir
    from hpcbench.submit.submission import cancel_run

    cancel_run(RunDir.open(Path(args.run_dir)), echo)
    return 0
