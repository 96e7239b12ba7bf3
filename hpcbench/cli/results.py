"""Verbs that read what runs and logs left: summarize (and --compare), parse, check."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from hpcbench.cli.common import Args
from hpcbench.vocab import BASELINES

if TYPE_CHECKING:
    from hpcbench.figures.inputs import Inputs


def cmd_summarize(args: Args) -> int:
    from hpcbench.errors import ConfigError
    from hpcbench.report import summarize as sm
    from hpcbench.report.history import record_report
    from hpcbench.vocab import UNKNOWN

    if args.compare:
        if args.paths:
            raise ConfigError("give either PATH... or --compare OLD NEW, not both")
        return _compare(args)
    report = sm.make_report(args.paths, baseline=args.baseline, references=args.references, cluster=args.cluster,
                            inputs=_refreshed(args.paths, args.cluster) if args.refresh else None)
    out = Path(args.out) if args.out else report.default_out()
    files = sm.write(report, out, plots=not args.no_plots)
    text = sm.text(report, args.format)
    print(text, end="" if text.endswith("\n") else "\n")
    side = sys.stderr if args.format in ("csv", "json", "latex") else sys.stdout  # stdout stays pure data
    print(f"report: {files[0]} (plots, records.csv, records.json beside it)", file=side)
    if args.html:
        from hpcbench.report.html import write_report

        print(f"web page: {write_report(report, out)} (self-contained: plots inline, works offline)", file=side)
    if report.inputs.dry_runs:
        print(report.inputs.dry_run_note(), file=side)
    if not args.no_history:
        print("history: {} ({} records)".format(*record_report(report, args.history)), file=side)
    if report.partial:
        print(report.partial_note(), file=side)
        if not args.refresh and any(s.state == UNKNOWN for s in report.inputs.samples):
            print("(a summary reads only the disk: --refresh asks the scheduler about jobs not known to have ended)",
                  file=side)
    bad = [a for a in report.aggs if a.n_ok < len(a.samples)]
    # Failed points are reported, not an error of this command (--strict makes them one);
    # a reference regression or an error-level transport check is.
    return 1 if (report.regressions or report.check_errors or (args.strict and bad)) else 0


def _refreshed(paths: list[str], cluster: str | None) -> Inputs:
    """--refresh: the summary's inputs, each run's states with the schedulers' word on its jobs (kept in its
    ledger too); a summary alone reads only the disk."""
    from hpcbench.figures.inputs import load
    from hpcbench.submit.status import refresh

    return load(list(paths), cluster, states=lambda rd: refresh(rd)[1])


def _compare(args: Args) -> int:
    from hpcbench.report.compare import compare_paths

    print(compare_paths(args.compare[0], args.compare[1], args.format, args.cluster,
                        Path(args.out) if args.out else None))
    return 0


def args_summarize(p: argparse.ArgumentParser) -> None:
    p.add_argument("paths", nargs="*", metavar="PATH",
                   help="a run directory made by 'hpcbench sweep', or log files / folders of logs "
                        "(Horovod benchmarks, nccl-tests, torchrun)")
    p.add_argument("--out", help="folder for report.md, plots and records.csv/json "
                                 "(default: RUN_DIR/report for one run directory, else ./hpcbench-report)")
    p.add_argument("--format", choices=("table", "markdown", "github", "latex", "csv", "json"), default="table",
                   help="what is printed: the tables in this format, or the records (csv, json)")
    p.add_argument("--baseline", choices=BASELINES, default="auto",
                   help="what speedup is relative to (default: one per unit of work, shared by every backend: "
                        "their 1-rank runs pooled; per-backend: each backend's own 1-rank point)")
    p.add_argument("--references", metavar="FILE", help="TOML of reference values with tolerances; "
                                                        "exit 1 when a point regresses")
    p.add_argument("--compare", nargs=2, metavar=("OLD", "NEW"), help="ratios between two runs")
    p.add_argument("--cluster", help="cluster name for references (default: SLURM_CLUSTER_NAME from provenance)")
    p.add_argument("--no-plots", action="store_true", help="skip the PNG plots")
    p.add_argument("--html", action="store_true", help="also write report.html: the whole report in one file, "
                                                        "plots inline, that works offline")
    p.add_argument("--strict", action="store_true", help="exit 1 when any point is not ok")
    p.add_argument("--refresh", action="store_true",
                   help="ask the scheduler about the runs' jobs first (as 'hpcbench status' does); without it, "
                        "a summary reads only what is on disk")
    args_history(p, summarize=True)


def cmd_history(args: Args) -> int:
    from hpcbench.report.trend import command

    return command(args)


def args_history(p: argparse.ArgumentParser, summarize: bool = False) -> None:
    from hpcbench.report.trend import arguments

    arguments(p, summarize)


# --- status, resubmit, cancel -----------------------------------------------------------------------------------
def cmd_parse(args: Args) -> int:
    from hpcbench.parse.commands import parse_command

    return parse_command(args.files, args.format)


def cmd_check(args: Args) -> int:
    from hpcbench.parse.commands import check_command

    return check_command(args.files, gpu=args.gpu, provenance=args.provenance, fmt=args.format)


def args_parse(p: argparse.ArgumentParser) -> None:
    p.add_argument("files", nargs="+", metavar="FILE")
    p.add_argument("--format", choices=("json", "table"), default="table")


def args_check(p: argparse.ArgumentParser) -> None:
    p.add_argument("files", nargs="+", metavar="FILE")
    p.add_argument("--gpu", action="store_true", help="the job used GPUs: a log without NCCL lines is then a warning")
    p.add_argument("--provenance", action="append", default=[], metavar="JSON",
                   help="provenance-rank<N>.json of the job (repeatable); its InfiniBand devices count as visible")
    p.add_argument("--format", choices=("json", "table"), default="table")


def cmd_explain(args: Args) -> int:
    from hpcbench.explain import render
    from hpcbench.explain import explain_paths

    whys = explain_paths(args.paths, baseline=args.baseline, cluster=args.cluster, allreduce_file=args.allreduce)
    if args.format == "json":  # everything, with the run's summary: a program picks what it shows
        print(render.as_json(whys), end="")
    elif args.format == "markdown":
        print(render.summary_markdown(whys) + "\n\n" + render.as_markdown(whys, everything=args.all))
    else:
        print(render.as_table(whys, everything=args.all))
    # like check: an error-level finding (Socket while IB is there, a point without result) is exit 1
    return 1 if any(f.fails for w in whys for f in w.findings) else 0


def args_explain(p: argparse.ArgumentParser) -> None:
    p.add_argument("paths", nargs="+", metavar="PATH", help="run directories, or log files / folders of logs")
    p.add_argument("--format", choices=("table", "markdown", "json"), default="table")
    p.add_argument("--all", action="store_true", help="every finding of every point, with its evidence, symptoms "
                                                      "under their cause (default: the run's causes once, then "
                                                      "what each point shows beyond them)")
    p.add_argument("--allreduce", metavar="FILE", help="an nccl-tests or hpcbench allreduce log: the curve the "
                                                       "scaling model uses when the run has no allreduce point")
    p.add_argument("--baseline", choices=BASELINES, default="auto")
    p.add_argument("--cluster", help="the cluster all the logs come from (lets logs without host names be compared)")
