"""``hpcbench <verb>``: the one command-line front end. Each verb is a thin layer over library calls."""

from __future__ import annotations

import argparse
import os
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
    spec = spec_mod.load(args.file, args.cluster)
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
    from hpcbench.errors import ConfigError
    from hpcbench.report import summarize as sm

    if args.compare:
        if args.paths:
            raise ConfigError("give either PATH... or --compare OLD NEW, not both")
        return _compare(args)
    report = sm.build(args.paths, baseline=args.baseline, references=args.references, cluster=args.cluster)
    out = Path(args.out) if args.out else report.default_out()
    files = sm.write(report, out, plots=not args.no_plots)
    text = sm.text(report, args.format)
    print(text, end="" if text.endswith("\n") else "\n")
    side = sys.stderr if args.format in ("csv", "json") else sys.stdout
    print(f"report: {files[0]} (plots, records.csv, records.json beside it)", file=side)
    if report.partial:
        print(report.partial_note(), file=side)
    bad = [a for a in report.aggs if a.n_ok < len(a.samples)]
    # Failed points are reported, not an error of this command (--strict makes them one);
    # a reference regression or an error-level transport check is.
    return 1 if (report.regressions or report.check_errors or (args.strict and bad)) else 0


def _compare(args: argparse.Namespace) -> int:
    from hpcbench.report.aggregate import aggregate
    from hpcbench.report.compare import compare
    from hpcbench.report.inputs import load
    from hpcbench.rundir import atomic_write_text

    old, new = (aggregate(load([p], args.cluster).samples) for p in args.compare)
    table = compare(old, new)
    fmt = "github" if args.format == "markdown" else args.format
    text = table.render("csv" if fmt == "json" else fmt)
    print(f"OLD: {args.compare[0]}\nNEW: {args.compare[1]}\n{text}")
    if args.out:
        out = Path(args.out)
        atomic_write_text(out / "compare.md", f"# {table.title}\n\nOLD: `{args.compare[0]}`  \nNEW: "
                          f"`{args.compare[1]}`\n\n{table.render('github')}\n")
        atomic_write_text(out / "compare.csv", table.render("csv"))
    return 0


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
    from dataclasses import replace

    from hpcbench import spec as spec_mod
    from hpcbench.rundir import RunDir
    from hpcbench.runner import make_backend, render_all
    from hpcbench.state import parse_states
    from hpcbench.submission import states_of

    rd = RunDir.open(Path(args.run_dir))
    wanted = parse_states(args.state)
    # The profile the sweep ran with (--cluster, or the sweep's own cluster key), unless told another.
    profile = args.cluster or (rd.cluster_ref.read_text(encoding="utf-8").strip() if rd.cluster_ref.exists() else None)
    spec = spec_mod.parse(rd.sweep_copy.read_text(encoding="utf-8"), str(rd.sweep_copy), profile, rd.sweep_base())
    # The copy is named sweep.toml; a sweep without [sweep] name took its name from the original file.
    spec = replace(spec, sweep=replace(spec.sweep, name=rd.sweep_name()))
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


def cmd_parse(args: argparse.Namespace) -> int:
    from hpcbench.logs.cli import parse_command

    return parse_command(args.files, args.format)


def cmd_check(args: argparse.Namespace) -> int:
    from hpcbench.logs.cli import check_command

    return check_command(args.files, gpu=args.gpu, provenance=args.provenance, fmt=args.format)

def cmd_data(args: argparse.Namespace) -> int:
    from hpcbench.workloads.data import fetch

    dest = fetch(args.name, args.dest)
    _echo(f"{args.name} is in {dest}; set workload.data = \"{args.name}\" and workload.data_dir = \"{dest}\"")
    return 0


def cmd_env(args: argparse.Namespace) -> int:
    from hpcbench.report.env import report

    print(report(args.format), end="")
    return 0


def cmd_doctor(args: argparse.Namespace) -> int:
    import json

    from hpcbench import cluster, doctor

    profile = cluster.load(args.cluster) if args.cluster else None
    if profile is not None and not args.json:
        _echo(f"cluster profile {profile.name} ({profile.source})")
    findings = doctor.run(profile, Path(args.runs_root), job=not args.no_job, timeout_s=args.timeout,
                          echo=None if args.json else _echo)
    if args.json:
        print(json.dumps(doctor.to_json(findings), indent=2))
    else:
        print(doctor.format_findings(findings), end="")
    return 1 if any(f.fails for f in findings) else 0


def _add_sweep_args(p: argparse.ArgumentParser, with_submit: bool) -> None:
    p.add_argument("file", help="sweep file (TOML), e.g. sweeps/local.toml")
    p.add_argument("--run-dir", help="run directory to create (default: RUNS_ROOT/<sweep>-<UTC time>)")
    p.add_argument("--runs-root", default="runs", help="where timestamped run directories go (default: runs)")
    p.add_argument("--cluster", default=os.environ.get("HPCBENCH_CLUSTER") or None,
                   help="cluster profile (clusters/NAME.toml or a path) in place of the sweep's own; "
                        "default: $HPCBENCH_CLUSTER")
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

    p = verb("summarize", "scaling report of runs or logs: tables, plots, report.md, references")
    p.add_argument("paths", nargs="*", metavar="PATH",
                   help="a run directory made by 'hpcbench sweep', or log files / folders of logs "
                        "(Horovod benchmarks, nccl-tests, torchrun)")
    p.add_argument("--out", help="folder for report.md, plots and records.csv/json "
                                 "(default: RUN_DIR/report for one run directory, else ./hpcbench-report)")
    p.add_argument("--format", choices=("table", "markdown", "github", "latex", "csv", "json"), default="table",
                   help="what is printed: the tables in this format, or the records (csv, json)")
    p.add_argument("--baseline", choices=("auto", "single-gpu", "single-node", "no-framework"), default="auto",
                   help="what speedup is relative to (default: the 1-rank point of the same backend and model)")
    p.add_argument("--references", metavar="FILE", help="TOML of reference values with tolerances; "
                                                        "exit 1 when a point regresses")
    p.add_argument("--compare", nargs=2, metavar=("OLD", "NEW"), help="ratios between two runs")
    p.add_argument("--cluster", help="cluster name for references (default: SLURM_CLUSTER_NAME from provenance)")
    p.add_argument("--no-plots", action="store_true", help="skip the PNG plots")
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
    p.add_argument("--cluster", default=None,
                   help="cluster profile (clusters/NAME.toml or a path); default: the one the sweep used")
    _add_submit_args(p)
    p.set_defaults(func=cmd_resubmit)

    p = verb("cancel", "scancel every queued or running job of a run")
    p.add_argument("run_dir", help="a run directory made by 'hpcbench sweep'")
    p.set_defaults(func=cmd_cancel)

    p = verb("parse", "read NCCL, nccl-tests, Horovod logs and hpcbench records from any log files")
    p.add_argument("files", nargs="+", metavar="FILE")
    p.add_argument("--format", choices=("json", "table"), default="table")
    p.set_defaults(func=cmd_parse)

    p = verb("check", "check NCCL transports in logs (exit 1 when an error-level check fails)")
    p.add_argument("files", nargs="+", metavar="FILE")
    p.add_argument("--gpu", action="store_true", help="the job used GPUs: a log without NCCL lines is then a warning")
    p.add_argument("--provenance", action="append", default=[], metavar="JSON",
                   help="provenance-rank<N>.json of the job (repeatable); its InfiniBand devices count as visible")
    p.add_argument("--format", choices=("json", "table"), default="table")
    p.set_defaults(func=cmd_check)

    p = verb("data", "real data sets for the training workload (jobs never download)")
    p.add_argument("action", choices=("fetch",))
    p.add_argument("name", choices=("mnist", "cifar10"))
    p.add_argument("--dest", required=True, help="folder to download into; the sweep's workload.data_dir")
    p.set_defaults(func=cmd_data)

    p = verb("doctor", "check this login node: Slurm, accounting, MPI plugins, modules, Python, shared run dir")
    p.add_argument("--cluster", default=os.environ.get("HPCBENCH_CLUSTER") or None,
                   help="also check a cluster profile (partition, srun --mpi plugin, modules); default: $HPCBENCH_CLUSTER")
    p.add_argument("--runs-root", default="runs", help="where run directories will go (default: runs)")
    p.add_argument("--no-job", action="store_true",
                   help="do not submit the probe job; judge the run directory by its filesystem type only")
    p.add_argument("--timeout", type=float, default=120, help="seconds to wait for the probe job (default: 120)")
    p.add_argument("--json", action="store_true", help="print the findings as JSON")
    p.set_defaults(func=cmd_doctor)

    p = verb("minicluster", "start, stop or check a throwaway 2-node Slurm on this machine (root)")
    p.add_argument("action", choices=("up", "down", "status"))
    from hpcbench.minicluster import DEFAULT_DIR

    p.add_argument("--dir", default=str(DEFAULT_DIR), help=f"state, config and logs (default: {DEFAULT_DIR})")
    p.set_defaults(func=cmd_minicluster)

    p = verb("env", "what this node can run (torch.distributed, Horovod build) and its provenance")
    p.add_argument("--format", choices=("table", "json"), default="table")
    p.set_defaults(func=cmd_env)
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
