"""``hpcbench <verb>``: the one command-line front end. Each verb is a thin layer over library calls;
arguments are declared next to the verb that reads them."""

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
from hpcbench.vocab import RESUBMIT_DEFAULT, SUBMITTERS

if TYPE_CHECKING:
    from hpcbench.plan.spec import SweepSpec
    from hpcbench.rundir import RunDir
    from hpcbench.submit.backends.base import Backend

PLAN_ROWS_SHOWN = 200  # a 10,000-row table helps nobody on a terminal; plan.json has every point
Args = argparse.Namespace


def _echo(line: str) -> None:
    print(line, flush=True)


def _profile_arg(value: str | None) -> str | None:
    """--cluster: a profile name, or a path. A path typed on the command line is relative to the current
    folder, as in any tool; only paths written inside a TOML file are relative to that file."""
    if value and (value.endswith(".toml") or "/" in value):
        return str(Path(value).resolve())
    return value


# --- sweep, plan ------------------------------------------------------------------------------------------------
def cmd_sweep(args: Args) -> int:
    from hpcbench.plan import spec as spec_mod
    from hpcbench.plan.expand import PLAN_COLUMNS, plan_rows
    from hpcbench.submit.runner import SweepOptions, make_backend, prepare
    from hpcbench.tabular import format_table

    opts = SweepOptions(backend=args.backend, dry_run=args.dry_run, wait=args.wait,
                        run_dir=Path(args.run_dir) if args.run_dir else None, runs_root=Path(args.runs_root),
                        poll_s=args.poll, force=getattr(args, "force", False), hold=getattr(args, "hold", False))
    spec = spec_mod.load(args.file, _profile_arg(args.cluster))
    backend = None if opts.dry_run else make_backend(opts.backend, opts.hold)
    if backend is not None:
        backend.check(spec)
    rd, points, python = prepare(spec, opts)
    _echo(f"sweep {spec.sweep.name}: {len(points)} points -> {rd.root}")
    shown = points[:PLAN_ROWS_SHOWN]
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
    from hpcbench.submit.runner import wait as wait_for
    from hpcbench.submit.submission import submit_points

    report = submit_points(spec, rd, python, backend, _echo, poll_s=poll_s, **kw)
    if report.packs:
        _echo(f"packed {report.packed_points} points into {report.packs} allocation(s): "
              f"{report.allocations_saved} allocation(s) saved")
    if backend.queued and not wait:
        _echo(f"submitted {report.submitted}, refused {report.failed}; follow with: hpcbench status {rd.root} --wait")
        return 1 if report.failed else 0
    if backend.queued:
        wait_for(rd, poll_s, _echo)
    from hpcbench.report.summarize import summarize

    text, rows = summarize(rd, "table")
    print(text, end="" if text.endswith("\n") else "\n")
    _echo(f"summary: {rd.summary_csv}")
    _echo(f"next: hpcbench summarize {rd.root}   (the report: tables, plots, report.md)")
    return 1 if (report.failed or any(not r["ok"] for r in rows)) else 0


def cmd_plan(args: Args) -> int:
    args.dry_run, args.backend, args.wait, args.poll = True, "auto", False, 5.0
    return cmd_sweep(args)


def _args_sweep(p: argparse.ArgumentParser, submit: bool = True) -> None:
    p.add_argument("file", help="sweep file (TOML), e.g. sweeps/local.toml")
    p.add_argument("--run-dir", help="run directory to create (default: RUNS_ROOT/<sweep>-<UTC time>)")
    p.add_argument("--runs-root", default="runs", help="where timestamped run directories go (default: runs)")
    p.add_argument("--cluster", default=os.environ.get("HPCBENCH_CLUSTER") or None,
                   help="cluster profile (clusters/NAME.toml or a path) in place of the sweep's own; "
                        "default: $HPCBENCH_CLUSTER")
    if submit:
        p.add_argument("--backend", choices=SUBMITTERS, default="auto",
                       help="how to run the points; auto = sbatch when it is on PATH, else local")
        p.add_argument("--dry-run", action="store_true",
                       help="print the plan and write every job script, but submit nothing")
        _args_submit(p)
        p.add_argument("--force", action="store_true",
                       help="with an existing --run-dir: resubmit every point, cancelling its live job first")


def _args_plan(p: argparse.ArgumentParser) -> None:
    _args_sweep(p, submit=False)


def _args_submit(p: argparse.ArgumentParser) -> None:
    p.add_argument("--wait", action="store_true", help="block until every point is final, then summarize")
    p.add_argument("--poll", type=float, default=5.0, help="seconds between queue polls with --wait")
    p.add_argument("--hold", action="store_true",
                   help="sbatch --hold: queue the jobs held, to start with 'scontrol release' (sbatch backend)")


# --- summarize --------------------------------------------------------------------------------------------------
def cmd_summarize(args: Args) -> int:
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
    side = sys.stderr if args.format in ("csv", "json", "latex") else sys.stdout  # stdout stays pure data
    print(f"report: {files[0]} (plots, records.csv, records.json beside it)", file=side)
    if report.partial:
        print(report.partial_note(), file=side)
    bad = [a for a in report.aggs if a.n_ok < len(a.samples)]
    # Failed points are reported, not an error of this command (--strict makes them one);
    # a reference regression or an error-level transport check is.
    return 1 if (report.regressions or report.check_errors or (args.strict and bad)) else 0


def _compare(args: Args) -> int:
    from hpcbench.report.compare import compare_paths

    print(compare_paths(args.compare[0], args.compare[1], args.format, args.cluster,
                        Path(args.out) if args.out else None))
    return 0


def _args_summarize(p: argparse.ArgumentParser) -> None:
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


# --- status, resubmit, cancel -----------------------------------------------------------------------------------
def cmd_status(args: Args) -> int:
    from hpcbench.rundir import RunDir
    from hpcbench.submit.runner import wait
    from hpcbench.submit.status import collect, scheduler_view, status_table

    rd = RunDir.open(Path(args.run_dir))
    states = wait(rd, args.poll, _echo) if args.wait else collect(rd, scheduler_view(rd))
    _echo(status_table(states))
    # Without --wait the states are a report; with it, scripts want to know whether all went well.
    return 1 if args.wait and not all(s.ok for s in states) else 0


def _args_run_dir(p: argparse.ArgumentParser) -> None:
    p.add_argument("run_dir", help="a run directory made by 'hpcbench sweep'")


def _args_status(p: argparse.ArgumentParser) -> None:
    _args_run_dir(p)
    p.add_argument("--wait", action="store_true", help="show a progress line until every point is final")
    p.add_argument("--poll", type=float, default=5.0, help="seconds between polls with --wait")


def cmd_resubmit(args: Args) -> int:
    from hpcbench.plan.expand import current_jobs
    from hpcbench.rundir import RunDir
    from hpcbench.submit.runner import make_backend, render_all, reopen_spec
    from hpcbench.submit.status import parse_states
    from hpcbench.submit.submission import states_of

    rd = RunDir.open(Path(args.run_dir))
    wanted = parse_states(args.state)
    spec = reopen_spec(rd, _profile_arg(args.cluster))
    name = args.backend
    if name == "auto":  # the backend the run was submitted with
        used = [s.get("backend") for s in rd.submissions().values() if s.get("backend")]
        name = max(set(used), key=used.count) if used else "auto"
    backend = make_backend(name, args.hold)
    backend.check(spec)
    python = spec.slurm.python or sys.executable
    render_all(spec, rd, current_jobs(spec, rd.points()), python)
    _echo(f"resubmitting points of {rd.root} in state {', '.join(wanted)} with backend {backend.name}:")
    return _submit_and_follow(spec, rd, python, backend, args.wait, args.poll, select=states_of(wanted))


def _args_resubmit(p: argparse.ArgumentParser) -> None:
    _args_run_dir(p)
    p.add_argument("--state", default=",".join(RESUBMIT_DEFAULT),
                   help=f"comma-separated states to redo (default: {','.join(RESUBMIT_DEFAULT)})")
    p.add_argument("--backend", choices=SUBMITTERS, default="auto",
                   help="default: the backend the run was submitted with")
    p.add_argument("--cluster", default=None,
                   help="cluster profile (clusters/NAME.toml or a path); default: the one the sweep used")
    _args_submit(p)


def cmd_cancel(args: Args) -> int:
    from hpcbench.rundir import RunDir
    from hpcbench.submit.submission import cancel_run

    cancel_run(RunDir.open(Path(args.run_dir)), _echo)
    return 0


# --- logs: parse, check -----------------------------------------------------------------------------------------
def cmd_parse(args: Args) -> int:
    from hpcbench.parse.commands import parse_command

    return parse_command(args.files, args.format)


def cmd_check(args: Args) -> int:
    from hpcbench.parse.commands import check_command

    return check_command(args.files, gpu=args.gpu, provenance=args.provenance, fmt=args.format)


def _args_parse(p: argparse.ArgumentParser) -> None:
    p.add_argument("files", nargs="+", metavar="FILE")
    p.add_argument("--format", choices=("json", "table"), default="table")


def _args_check(p: argparse.ArgumentParser) -> None:
    p.add_argument("files", nargs="+", metavar="FILE")
    p.add_argument("--gpu", action="store_true", help="the job used GPUs: a log without NCCL lines is then a warning")
    p.add_argument("--provenance", action="append", default=[], metavar="JSON",
                   help="provenance-rank<N>.json of the job (repeatable); its InfiniBand devices count as visible")
    p.add_argument("--format", choices=("json", "table"), default="table")


# --- the node and the site: data, env, doctor, minicluster ----------------------------------------------------
def cmd_data(args: Args) -> int:
    from hpcbench.workloads.data import fetch

    dest = fetch(args.name, args.dest)
    _echo(f"{args.name} is in {dest}; set workload.data = \"{args.name}\" and workload.data_dir = \"{dest}\"")
    return 0


def _args_data(p: argparse.ArgumentParser) -> None:
    p.add_argument("action", choices=("fetch",))
    p.add_argument("name", choices=("mnist", "cifar10"))
    p.add_argument("--dest", required=True, help="folder to download into; the sweep's workload.data_dir")


def cmd_env(args: Args) -> int:
    from hpcbench.ops.env import report

    print(report(args.format), end="")
    return 0


def _args_env(p: argparse.ArgumentParser) -> None:
    p.add_argument("--format", choices=("table", "json"), default="table")


def cmd_doctor(args: Args) -> int:
    import json

    from hpcbench.ops import doctor
    from hpcbench.plan import cluster

    profile = cluster.load(_profile_arg(args.cluster)) if args.cluster else None
    if profile is not None and not args.json:
        _echo(f"cluster profile {profile.name} ({profile.source})")
    findings = doctor.run(profile, Path(args.runs_root), job=not args.no_job, timeout_s=args.timeout,
                          echo=None if args.json else _echo)
    print(json.dumps(doctor.to_json(findings), indent=2) if args.json else doctor.format_findings(findings),
          end="\n" if args.json else "")
    return 1 if any(f.fails for f in findings) else 0


def _args_doctor(p: argparse.ArgumentParser) -> None:
    p.add_argument("--cluster", default=os.environ.get("HPCBENCH_CLUSTER") or None,
                   help="also check a cluster profile (partition, srun --mpi plugin, modules); default: $HPCBENCH_CLUSTER")
    p.add_argument("--runs-root", default="runs", help="where run directories will go (default: runs)")
    p.add_argument("--no-job", action="store_true",
                   help="do not submit the probe job; judge the run directory by its filesystem type only")
    p.add_argument("--timeout", type=float, default=120, help="seconds to wait for the probe job (default: 120)")
    p.add_argument("--json", action="store_true", help="print the findings as JSON")


def cmd_minicluster(args: Args) -> int:
    from hpcbench.ops import minicluster

    root = Path(args.dir)
    rc = 0
    if args.action in ("up", "down"):
        lines = minicluster.up(root) if args.action == "up" else minicluster.down(root)
    else:
        ok, lines = minicluster.status(root)
        rc = 0 if ok else 1
    for line in lines:
        _echo(line)
    return rc


def _args_minicluster(p: argparse.ArgumentParser) -> None:
    p.add_argument("action", choices=("up", "down", "status"))
    default = "/var/tmp/hpcbench-minicluster"  # ops.minicluster.DEFAULT_DIR, without importing it for --help
    p.add_argument("--dir", default=default, help=f"state, config and logs (default: {default})")


# --- the parser -------------------------------------------------------------------------------------------------
VERBS: tuple[tuple[str, str, Callable[[argparse.ArgumentParser], None], Callable[[Args], int]], ...] = (
    ("sweep", "expand a sweep file into jobs and run or submit them", _args_sweep, cmd_sweep),
    ("plan", "same as 'sweep --dry-run': print the matrix, write the job scripts", _args_plan, cmd_plan),
    ("summarize", "scaling report of runs or logs: tables, plots, report.md, references", _args_summarize,
     cmd_summarize),
    ("status", "the state and reason of every point of a run (one squeue call per poll)", _args_status, cmd_status),
    ("resubmit", "submit again the points of a run that ended in the given states", _args_resubmit, cmd_resubmit),
    ("cancel", "scancel every queued or running job of a run", _args_run_dir, cmd_cancel),
    ("parse", "read NCCL, nccl-tests, Horovod logs and hpcbench records from any log files", _args_parse, cmd_parse),
    ("check", "check NCCL transports in logs (exit 1 when an error-level check fails)", _args_check, cmd_check),
    ("data", "real data sets for the training workload (jobs never download)", _args_data, cmd_data),
    ("doctor", "check this login node: Slurm, accounting, MPI plugins, modules, Python, shared run dir",
     _args_doctor, cmd_doctor),
    ("minicluster", "start, stop or check a throwaway 2-node Slurm on this machine (root)", _args_minicluster,
     cmd_minicluster),
    ("env", "what this node can run (torch.distributed, Horovod build) and its provenance", _args_env, cmd_env),
)


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="hpcbench", description="Plan, run and explain distributed training scaling on Slurm.")
    ap.add_argument("--version", action="version", version=f"hpcbench {__version__}")
    ap.add_argument("--debug", action="store_true", help="show tracebacks")
    # --debug is accepted after the verb too, so `python -m hpcbench.sweep FILE --debug` works.
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help="show tracebacks")
    sub = ap.add_subparsers(dest="command", metavar="<command>")
    for name, help_text, add_args, func in VERBS:
        p = sub.add_parser(name, help=help_text, parents=[common])
        add_args(p)
        p.set_defaults(func=func)
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
        rc = int(args.func(args))
        sys.stdout.flush()  # a closed pipe shows here, not in the interpreter's shutdown
        return rc
    except BrokenPipeError:
        return _reader_gone()
    except HpcbenchError as e:
        if args.debug:
            traceback.print_exc()
        print(f"error: {e}" + (f" (hint: {e.hint})" if e.hint else ""), file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


def _reader_gone() -> int:
    """The command reading our output went away (`| head`, `| true`): stop quietly, as Unix tools do."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())  # Python's own final flush must not raise again
    return 141  # 128 + SIGPIPE, what a shell reports for a writer killed by a closed pipe

