"""``hpcbench <verb>``: the one command-line front end. Each verb is a thin layer over library calls;
its arguments are declared next to it (cli/run.py, cli/results.py, cli/node.py) and listed in VERBS."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable

from hpcbench import __version__
from hpcbench.cli import node, results, run
from hpcbench.cli.common import Args
from hpcbench.errors import HpcbenchError, missing_module

VERBS: tuple[tuple[str, str, Callable[[argparse.ArgumentParser], None], Callable[[Args], int]], ...] = (
    ("sweep", "expand a sweep file into jobs and run or submit them", run.args_sweep, run.cmd_sweep),
    ("plan", "same as 'sweep --dry-run': print the matrix, write the job scripts", run.args_plan, run.cmd_plan),
    ("summarize", "scaling report of runs or logs: tables, plots, report.md, references", results.args_summarize,
     results.cmd_summarize),
    ("history", "each recorded point's trend over its runs; flags a run outside the spread", results.args_history,
     results.cmd_history),
    ("explain", "why each point scales as it does: ranked findings with evidence, effect and fix",
     results.args_explain, results.cmd_explain),
    ("status", "the state and reason of every point of a run, asked of its backend (one squeue call per poll)",
     run.args_status, run.cmd_status),
    ("resubmit", "submit again the points of a run that ended in the given states", run.args_resubmit,
     run.cmd_resubmit),
    ("cancel", "cancel every queued or running job of a run, through its backend (scancel)", run.args_run_dir,
     run.cmd_cancel),
    ("parse", "read NCCL, nccl-tests, Horovod logs and hpcbench records from any log files", results.args_parse,
     results.cmd_parse),
    ("check", "check NCCL transports in logs (exit 1 when an error-level check fails)", results.args_check,
     results.cmd_check),
    ("data", "real data sets for the training workload (jobs never download)", node.args_data, node.cmd_data),
    ("doctor", "check this login node: Slurm, accounting, MPI plugins, modules, Python, shared run dir",
     node.args_doctor, node.cmd_doctor),
    ("minicluster", "start, stop, check or degrade a throwaway Slurm of namespaced nodes on this machine (root)", node.args_minicluster,
     node.cmd_minicluster),
    ("hunt", "find the slow node or link among many (pairs in rounds, compute probes) and write hunt.json for "
     "--exclude-nodes", node.args_hunt, node.cmd_hunt),
    ("env", "what this node can run (torch.distributed, Horovod build) and its provenance", node.args_env,
     node.cmd_env),
)


def build_parser(argv: list[str] | None = None) -> argparse.ArgumentParser:
    """Every verb, with the arguments of the one ``argv`` names (of all, when it names none): declaring
    them imports their modules, and a login-node command should not pay for the other verbs'."""
    chosen = next((a for a in (sys.argv[1:] if argv is None else argv) if not a.startswith("-")), None)
    if chosen not in {v[0] for v in VERBS}:
        chosen = None
    ap = argparse.ArgumentParser(prog="hpcbench", description="Plan, run and explain distributed training scaling on Slurm.")
    ap.add_argument("--version", action="version", version=f"hpcbench {__version__}")
    ap.add_argument("--debug", action="store_true", help="show tracebacks")
    # --debug is accepted after the verb too, so `python -m hpcbench.sweep FILE --debug` works.
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help="show tracebacks")
    sub = ap.add_subparsers(dest="command", metavar="<command>")
    for name, help_text, add_args, func in VERBS:
        p = sub.add_parser(name, help=help_text, parents=[common])
        if chosen in (None, name):
            add_args(p)
        p.set_defaults(func=func)
    return ap


def main(argv: list[str] | None = None, prog: str | None = None,
         parser: Callable[[list[str] | None], argparse.ArgumentParser] = build_parser) -> int:
    ap = parser(argv)
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
    except (HpcbenchError, ModuleNotFoundError) as caught:
        # a package of an extra that is not installed (torch on a login node) is the user's to install, not a bug
        e = caught if isinstance(caught, HpcbenchError) else missing_module(caught, f"hpcbench {args.command}")
        if e is None:
            raise
        if args.debug:
            import traceback  # here: ~2 ms of every command's start otherwise

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

