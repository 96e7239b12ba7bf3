"""summarize: inputs -> Samples -> aggregated points -> baseline -> tables, findings, plots, report files.

Failed, missing and running points stay rows with their state and reason; a run still in the queue
gives a partial report that says so.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hpcbench.figures import baseline as baseline_mod
from hpcbench.figures.aggregate import Agg, aggregate, point_key
from hpcbench.figures.inputs import Inputs
from hpcbench.figures.samples import OTHERS
from hpcbench.figures.study import study
from hpcbench.files import atomic_write_text
from hpcbench.plan.fields import BY_NAME
from hpcbench.report import headlines
from hpcbench.report.tidy import TIDY_COLUMNS, tidy_columns, tidy_row
from hpcbench.rundir import RunDir
from hpcbench.tabular import Table, format_table

if TYPE_CHECKING:  # explain is imported when a report is made
    from hpcbench.explain import PointWhy
    from hpcbench.report.tables_collectives import Peaks

# The short table `hpcbench sweep --wait` prints when the run ends.
TABLE_COLUMNS = ("framework", "backend", "model", "collective", "nodes", "ranks_per_node", "world_size", "state",
                 "step_time_ms", "throughput", "speedup", "efficiency", "reason")
TABLE_HEADERS = ("framework", "backend", "model", "collective", "nodes", "ranks/node", "ranks", "state",
                 "step ms ± 95% CI", "samples/s (95% CI)", "speedup", "efficiency", "reason")


def peaks_of(aggs: list[Agg], why: list[PointWhy]) -> Peaks:
    """Each point's slowest link's peak (or why it is not known), for the table and the plot, by the point's key
    (explain gives one PointWhy per point, in order)."""
    return {point_key(a.first): (w.peak, w.peak_why) for a, w in zip(aggs, why, strict=True)}


@dataclass
class Report:
    inputs: Inputs
    aggs: list[Agg]
    baseline: baseline_mod.BaselineResult
    tables: list[Table]
    findings: dict[str, list[str]]
    why: list[PointWhy] = field(default_factory=list)  # one per point of aggs, in its order
    check_errors: int = 0  # error-level transport checks
    regressions: int = 0  # references that failed
    plots: dict[str, str] = field(default_factory=dict)
    out: Path | None = None  # the folder ``write`` put the report and its plots in
    _tidy: list[dict[str, Any]] | None = field(default=None, repr=False)

    @property
    def partial(self) -> bool:
        return self.inputs.partial

    def peaks(self) -> Peaks:
        return peaks_of(self.aggs, self.why)

    def tidy(self) -> list[dict[str, Any]]:
        if self._tidy is None:
            self._tidy = [tidy_row(s) for s in self.inputs.samples]
        return self._tidy

    def columns(self) -> tuple[str, ...]:
        """records.csv's columns: one per env or [slurm] axis after the declared ones."""
        return tidy_columns(self.inputs.samples)

    def default_out(self) -> Path:
        """RUN_DIR/report for a single run directory, else ./hpcbench-report."""
        rds = self.inputs.run_dirs
        only_run = len(rds) == 1 and all(s.source == str(rds[0].root) for s in self.inputs.samples)
        return rds[0].report_dir if only_run else Path("hpcbench-report")

    def partial_note(self) -> str:
        live = [s for s in self.inputs.samples if not s.final]
        return (f"PARTIAL RESULT: {len(live)} of {len(self.inputs.samples)} points are still queued or running "
                f"({', '.join(sorted({s.state for s in live}))}); figures will change") if live else ""


def make_report(paths: list[str | Path], baseline: str = "auto", references: str | Path | None = None,
                cluster: str | None = None, inputs: Inputs | None = None) -> Report:
    """The whole report of runs and logs: their points, baselines, findings and tables (``write`` puts it on disk)."""
    from hpcbench.explain import explain
    from hpcbench.explain.inputs import subjects
    from hpcbench.report import references as refs_mod
    from hpcbench.report.tables_collectives import collective_tables
    from hpcbench.report.tables_env import environment
    from hpcbench.report.tables_scaling import (baseline_notes, comm_compute, disagreement, gpu_util, intra_inter,
                                                placement)
    from hpcbench.report.tables_transport import transports

    refs = refs_mod.load(references) if references else None  # a bad file is an error before any work
    st = study(paths, cluster, baseline, inputs)
    inputs, aggs, base = st.inputs, st.aggs, st.baseline
    why = explain(subjects(aggs))
    intra, inter = intra_inter(aggs)
    for t in (intra, inter):
        t.notes += baseline_notes(base) if t.rows else base.missing
    trans, check_findings = transports(aggs)
    env, differs = environment(inputs.samples)
    gpu, gpu_warn = gpu_util(aggs)
    tables = [intra, inter, *collective_tables(aggs, peaks_of(aggs, why)), trans, env, comm_compute(aggs), placement(aggs),
              gpu]
    regressions = 0
    if refs is not None:
        ref_table, regressions = refs_mod.check(refs, aggs)
        tables.append(ref_table)
    findings = {
        "best backend at each scale (claimed only where the 95% intervals do not overlap)":
            headlines.best_at_each_scale(aggs),
        "baselines": [disagreement(g) for g in base.disagree],
        "efficiency at the largest scale": headlines.efficiency_at_largest(aggs),
        "suspicious speedups": headlines.superlinear(aggs),
        "transport problems": headlines.transport_problems(check_findings),
        "environment differences between nodes": differs,
        "GPU utilisation": gpu_warn,
        "points without a result (failed, missing or not finished)": headlines.failed_points(aggs),
        "collectives a library does not have (recorded by the ranks; not failures)": headlines.unsupported(aggs),
        "not measured (logs with no measurement: evidence for the transport table only)": headlines.not_measured(aggs),
        "references": [f"{regressions} reference check(s) failed"] if regressions else [],
        "inferred from logs": inputs.notes,
    }
    return Report(inputs, aggs, base, tables, findings, why=why,
                  check_errors=sum(f.severity == "error" for f in check_findings), regressions=regressions)


def records_json(rows: list[dict[str, Any]]) -> str:
    """A JSON array, one record per line: json's C encoder only runs without indent, 10x faster."""
    return "[\n" + ",\n".join(json.dumps(r, default=str) for r in rows) + "\n]\n"


def text(report: Report, fmt: str = "table") -> str:
    """Everything for the terminal: the tables in ``fmt``, or the tidy records as CSV or JSON."""
    if fmt == "csv":
        return format_table(report.tidy(), report.columns(), fmt="csv")
    if fmt == "json":
        return records_json(report.tidy())
    from hpcbench.report.markdown import tables_text

    return tables_text(report, fmt)


def write(report: Report, out: Path, plots: bool = True) -> list[Path]:
    """report.md, report.tex, the PNG plots, records.csv and records.json (one row per point x repeat) into
    ``out``."""
    from hpcbench.errors import ConfigError
    from hpcbench.report.latex import latex_document
    from hpcbench.report.markdown import report_md

    if out.exists() and not out.is_dir():
        raise ConfigError(f"--out {out}: not a folder", hint="give a folder for the report (it is made when missing)")
    out.mkdir(parents=True, exist_ok=True)
    report.out = out
    if plots:
        from hpcbench.report.plots import write_all

        report.plots = write_all(report.aggs, out, report.baseline.mode, report.peaks())
    rows, columns = report.tidy(), report.columns()
    csv_text = format_table(rows, columns, fmt="csv")
    atomic_write_text(out / "records.csv", csv_text)
    atomic_write_text(out / "records.json", records_json(rows))
    atomic_write_text(out / "report.md", report_md(report))
    atomic_write_text(out / "report.tex", latex_document(report))  # pdflatex report.tex, in this folder
    for rd in report.inputs.run_dirs:  # the run directory keeps its own summary.csv, as before
        mine = [r for r in rows if r["source"] == str(rd.root)]
        atomic_write_text(rd.summary_csv, csv_text if len(mine) == len(rows) else
                          format_table(mine, columns, fmt="csv"))
    return [out / "report.md", out / "records.csv", out / "records.json", out / "report.tex",
            *(out / n for n, v in report.plots.items() if v == "written")]


def _with_intervals(row: dict[str, Any]) -> dict[str, Any]:
    """A tidy row's step time and throughput as the short table shows them: each with its 95% interval (the step
    time's, never below zero; throughput's its inverse), as the report's tables do."""
    from hpcbench.figures.aggregate import throughput_interval
    from hpcbench.report.fmt import interval, pm0

    step, h, thr = row.get("step_time_ms"), row.get("step_time_ci95_ms"), row.get("throughput")
    if step is None:
        return {}
    lo, hi = throughput_interval(thr, step, h)
    return {"step_time_ms": pm0(step, h), "throughput": interval(thr, lo, hi, 1) if thr is not None else None}


def sweep_summary(rd: RunDir, fmt: str = "table") -> tuple[str, list[dict[str, Any]]]:
    """The short table `hpcbench sweep --wait` prints when a run ends; writes summary.csv into the run directory."""
    from hpcbench.figures.inputs import run_samples

    # plan.json holds the points in the order they ran (shuffled); the table reads better in the matrix's order
    samples = sorted(run_samples(rd), key=lambda s: (str(s.kind), str(s.framework), str(s.backend), str(s.model),
                                                      str(s.collective), s.world_size or 0, s.nodes or 0, s.repeat))
    baseline_mod.apply(aggregate(samples), "auto")
    rows, columns = [tidy_row(s) for s in samples], tidy_columns(samples)
    atomic_write_text(rd.summary_csv, format_table(rows, columns, fmt="csv"))
    if fmt == "csv":
        return format_table(rows, columns, fmt="csv"), rows
    from hpcbench.report.fmt import clip

    shown = [dict(r, reason=clip(r.get("reason"), 70) or None, **_with_intervals(r)) for r in rows]
    # A parameter's column only where it applies to one of the run's kinds (a collective's, not an empty model).
    kinds = {s.kind for s in samples}
    heads = [(c, h) for c, h in zip(TABLE_COLUMNS, TABLE_HEADERS, strict=True)
             if c not in BY_NAME or any(BY_NAME[c].applies(k) for k in kinds)]
    # The parameters and axes that vary in this run have a column too: no two rows of different points look alike.
    extra = [(c, c) for c in (*OTHERS, *columns[len(TIDY_COLUMNS):])
             if c not in TABLE_COLUMNS and len({repr(r.get(c)) for r in rows}) > 1]
    at = next(i for i, (c, _) in enumerate(heads) if c == "nodes")
    heads[at:at] = extra
    return format_table(shown, tuple(c for c, _ in heads), tuple(h for _, h in heads)), rows

