"""``hpcbench <verb>``: the one command-line front end. Each verb is a thin layer over library calls."""

from __future__ import annotations

import argparse
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hpcbench import __version__
from hpcbench.errors import HpcbenchError

if TYPE_CHECKING:
    from hpcbench.backends.base import Backend
    from hpcbench.rundir import RunDir
    from hpcbench.spec import SweepSpec
    from hpcbench.state import PointState


PLAN_ROWS_SHOWN = 200  # a 10,000-row table helps nobody on a terminal; plan.json has every point


def _echo(line: str) -> None:
    print(line, flush=True)


def cmd_sweep(args: argparse.Namespace) -> int:
    from hpcbench import spec as spec_mod
    from hpcbench.plan import PLAN_COLUMNS, plan_rows
    from hpcbench.report.tables import format_table
    from hpcbench.runner import SweepOptions, make_backend, prepare

    opts = SweepOptions(backend=args.backend, dry_run=args.dry_run, wait=args.wait,
                        run_dir=Path(args.run_dir) if args.run_dir else None, runs_root=Path(args.runs_root),
                        poll_s=args.poll, force=getattr(args, "force", False), hold=getattr(args, "hold", False))
    spec = spec_mod.load(args.file)
    backend = None if opts.dry_run else make_backend(opts.backend, opts.hold)
    if backend is not None:
        backend.check(spec)
    rd, points, python = prepare(spec, opts)
    _echo(f"sweep {spec.sweep.name}: {len(points)} points -> {rd.root}")
    shown = points if len(points) <= PLAN_ROWS_SHOWN else points[:PLAN_ROWS_SHOWN]
    _echo(format_table(plan_rows(shown), PLAN_COLUMNS))
    if len(shown) < len(points):
        _echo(f"... and {len(points) - len(shown)} more points (all of them in {rd.plan_json})")
    if backend is None:
        _echo(f"dry run: {len(points)} job scripts written under {rd.points_root}; nothing submitted")
        return 0
    _echo(f"submitting with backend {backend.name}:")
    return _submit_and_follow(spec, rd, python, backend, opts.wait, opts.poll_s, force=opts.force)


def _submit_and_follow(spec: SweepSpec, rd: RunDir, python: str, backend: Backend, wait: bool, poll_s: float,
                       **kw: Any) -> int:
    from hpcbench.runner import wait as wait_for
    from hpcbench.submission import submit_points

    report = submit_points(spec, rd, python, backend, _echo, poll_s=poll_s, **kw)
    if report.packs:
        _echo(f"packed {report.packed_points} points into {report.packs} allocation(s): "
              f"{report.allocations_saved} allocation(s) saved")
    if backend.queued and not wait:
        _echo(f"submitted {report.submitted}, refused {report.failed}; follow with: hpcbench status {rd.root} --wait")
        return 1 if report.failed else 0
    if backend.queued:
        wait_for(rd, poll_s, _echo)
    return _print_summary(rd, "table", report.failed)


def _print_summary(rd: RunDir, fmt: str, failures: int = 0) -> int:
    from hpcbench.report.summarize import summarize

    text, rows = summarize(rd, fmt)
    print(text, end="" if text.endswith("\n") else "\n")
    if fmt == "table":
        _echo(f"summary: {rd.summary_csv}")
    bad = [r for r in rows if not r["ok"]]
    return 1 if (failures or bad) else 0


def cmd_plan(args: argparse.Namespace) -> int:
    args.dry_run, args.backend, args.wait, args.poll = True, "auto", False, 5.0
    return cmd_sweep(args)


def cmd_summarize(args: argparse.Namespace) -> int:
    from hpcbench.rundir import RunDir

    rc = _print_summary(RunDir.open(Path(args.run_dir)), args.format)
    # Failed points are reported, not an error of this command; --strict makes them one.
    return rc if args.strict else 0


def _status_table(states: list[PointState]) -> str:
    from hpcbench.report.tables import format_table
    from hpcbench.state import count_line

    rows = [{"point": s.point.label, "id": s.point.id, "state": s.state, "job": s.job_id,
             "reason": s.reason or None} for s in states]
    return format_table(rows, ("point", "id", "state", "job", "reason")) + f"\n{len(states)} points: {count_line(states)}"


def cmd_status(args: argparse.Namespace) -> int:
    from hpcbench.rundir import RunDir
    from hpcbench.runner import wait
    from hpcbench.state import collect, scheduler_view

    rd = RunDir.open(Path(args.run_dir))
    if args.wait:
        states = wait(rd, args.poll, _echo)
    else:
        states = collect(rd, scheduler_view(rd))
    _echo(_status_table(states))
    # Without --wait the states are a report; with it, scripts want to know whether all went well.
    return 1 if args.wait and not all(s.ok for s in states) else 0


def cmd_resubmit(args: argparse.Namespace) -> int:
    from hpcbench import spec as spec_mod
    from hpcbench.rundir import RunDir
    from hpcbench.runner import make_backend, render_all
    from hpcbench.state import parse_states
    from hpcbench.submission import states_of

    rd = RunDir.open(Path(args.run_dir))
    wanted = parse_states(args.state)
    spec = spec_mod.parse(rd.sweep_copy.read_text(encoding="utf-8"), str(rd.sweep_copy))
    name = args.backend
    if name == "auto":  # the backend the run was submitted with
        used = [s.get("backend") for s in rd.submissions().values() if s.get("backend")]
        name = max(set(used), key=used.count) if used else "auto"
    backend = make_backend(name, args.hold)
    backend.check(spec)
    python = spec.slurm.python or sys.executable
    render_all(spec, rd, rd.points(), python)
    _echo(f"resubmitting points of {rd.root} in state {', '.join(wanted)} with backend {backend.name}:")
    return _submit_and_follow(spec, rd, python, backend, args.wait, args.poll, select=states_of(wanted))


def cmd_cancel(args: argparse.Namespace) -> int:
    from hpcbench.rundir import RunDir
    from hpcbench.submission import cancel_run

    cancel_run(RunDir.open(Path(args.run_dir)), _echo)
    return 0


def cmd_minicluster(args: argparse.Namespace) -> int:
    from hpcbench import minicluster

    root = Path(args.dir)
    if args.action == "up":
        lines = minicluster.up(root)
        rc = 0
    elif args.action == "down":
        lines = minicluster.down(root)
        rc = 0
    else:
        ok, lines = minicluster.status(root)
        rc = 0 if ok else 1
    for line in lines:
        _echo(line)
    return rc


def _add_sweep_args(p: argparse.ArgumentParser, with_submit: bool) -> None:
    p.add_argument("file", help="sweep file (TOML), e.g. sweeps/local.toml")
    p.add_argument("--run-dir", help="run directory to create (default: RUNS_ROOT/<sweep>-<UTC time>)")
    p.add_argument("--runs-root", default="runs", help="where timestamped run directories go (default: runs)")
    if with_submit:
        from hpcbench.runner import BACKEND_CHOICES

        p.add_argument("--backend", choices=BACKEND_CHOICES, default="auto",
                       help="how to run the points; auto = sbatch when it is on PATH, else local")
        p.add_argument("--dry-run", action="store_true",
                       help="print the plan and write every job script, but submit nothing")
        _add_submit_args(p)
        p.add_argument("--force", action="store_true",
                       help="with an existing --run-dir: resubmit every point, cancelling its live job first")


def _add_submit_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--wait", action="store_true", help="block until every point is final, then summarize")
    p.add_argument("--poll", type=float, default=5.0, help="seconds between queue polls with --wait")
    p.add_argument("--hold", action="store_true",
                   help="sbatch --hold: queue the jobs held, to start with 'scontrol release' (sbatch backend)")


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="hpcbench", description="Plan, run and explain distributed training scaling on Slurm.")
    ap.add_argument("--version", action="version", version=f"hpcbench {__version__}")
    ap.add_argument("--debug", action="store_true", help="show tracebacks")
    # --debug is accepted after the verb too, so `python -m hpcbench.sweep FILE --debug` works.
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help="show tracebacks")
    sub = ap.add_subparsers(dest="command", metavar="<command>")

    def verb(name: str, help: str) -> argparse.ArgumentParser:
        return sub.add_parser(name, help=help, parents=[common])

    p = verb("sweep", "expand a sweep file into jobs and run or submit them")
    _add_sweep_args(p, with_submit=True)
    p.set_defaults(func=cmd_sweep)

    p = verb("plan", "same as 'sweep --dry-run': print the matrix, write the job scripts")
    _add_sweep_args(p, with_submit=False)
    p.set_defaults(func=cmd_plan)

    p = verb("summarize", "tables of a run directory (writes summary.csv)")
    p.add_argument("run_dir", help="a run directory made by 'hpcbench sweep'")
    p.add_argument("--format", choices=("table", "csv"), default="table")
    p.add_argument("--strict", action="store_true", help="exit 1 when any point is not ok")
    p.set_defaults(func=cmd_summarize)

    p = verb("status", "the state and reason of every point of a run (one squeue call per poll)")
    p.add_argument("run_dir", help="a run directory made by 'hpcbench sweep'")
    p.add_argument("--wait", action="store_true", help="show a progress line until every point is final")
    p.add_argument("--poll", type=float, default=5.0, help="seconds between polls with --wait")
    p.set_defaults(func=cmd_status)

    from hpcbench.state import RESUBMIT_DEFAULT

    p = verb("resubmit", "submit again the points of a run that ended in the given states")
    p.add_argument("run_dir", help="a run directory made by 'hpcbench sweep'")
    p.add_argument("--state", default=",".join(RESUBMIT_DEFAULT),
                   help=f"comma-separated states to redo (default: {','.join(RESUBMIT_DEFAULT)})")
    from hpcbench.runner import BACKEND_CHOICES

    p.add_argument("--backend", choices=BACKEND_CHOICES, default="auto",
                   help="default: the backend the run was submitted with")
    _add_submit_args(p)
    p.set_defaults(func=cmd_resubmit)

    p = verb("cancel", "scancel every queued or running job of a run")
    p.add_argument("run_dir", help="a run directory made by 'hpcbench sweep'")
    p.set_defaults(func=cmd_cancel)

    p = verb("minicluster", "start, stop or check a throwaway 2-node Slurm on this machine (root)")
    p.add_argument("action", choices=("up", "down", "status"))
    from hpcbench.minicluster import DEFAULT_DIR

    p.add_argument("--dir", default=str(DEFAULT_DIR), help=f"state, config and logs (default: {DEFAULT_DIR})")
    p.set_defaults(func=cmd_minicluster)
    return ap


def main(argv: list[str] | None = None, prog: str | None = None,
         parser: Callable[[], argparse.ArgumentParser] = build_parser) -> int:
    ap = parser()
    if prog:
        ap.prog = prog
    args = ap.parse_args(argv)
    if not getattr(args, "func", None):
        ap.print_help()
        return 2
    try:
        return int(args.func(args))
    except HpcbenchError as e:
        if args.debug:
            traceback.print_exc()
        print(f"error: {e}" + (f" (hint: {e.hint})" if e.hint else ""), file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
