"""`hpcbench history`: the trend of every point over its recorded runs, a flag for a run that falls outside
the spread of the ones before it, the reference contract checked on each run, and a trend plot.

The rule for the flag: the latest run's throughput (its mean over repeats) is compared with the 95%
prediction interval of the last N earlier runs, mean ± t(0.975, n−1) · sd · √(1 + 1/n) (Student's t;
the interval a new run of the same distribution falls into 95% of the time). With fewer than
MIN_RUNS earlier runs the verdict is "not enough history": no interval is honest from one or two.
"""

from __future__ import annotations

import json
import math
import statistics
import sys
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from hpcbench.errors import ConfigError
from hpcbench.plan.fields import POINT_KEY
from hpcbench.report.fmt import clip, num
from hpcbench.report.names import describe
from hpcbench.stats import t975
from hpcbench.tabular import Table

MIN_RUNS = 3  # earlier runs needed before a flag means anything
LAST_N = 10  # default window of earlier runs
MAX_PLOTTED = 10  # series in the trend plot; flagged points first
PLOT_NAME = "history.png"  # written into --out, else beside the history database


@dataclass
class RunPoint:
    """One point in one run: its repeats averaged."""

    run: str
    date: str
    n: int
    n_ok: int
    throughput: float | None
    step_time_ms: float | None
    states: str
    reason: str | None
    versions: dict[str, Any]
    commit: str | None


@dataclass
class Trend:
    key: str
    params: dict[str, Any]
    cluster: str | None
    runs: list[RunPoint] = field(default_factory=list)
    verdict: str = ""
    flagged: bool = False
    interval: tuple[float, float] | None = None
    window: list[float] = field(default_factory=list)
    reference: str = ""
    world_size: int | None = None

    def __getattr__(self, name: str) -> Any:  # framework, backend, model, ... for references.Reference.matches
        params = self.__dict__.get("params", {})
        if name in params:
            return params[name]
        raise AttributeError(name)

    @property
    def latest(self) -> RunPoint:
        return self.runs[-1]

    @property
    def name(self) -> str:
        """What the point is, from its fields; a field the source did not show is left out, never printed None."""
        p = self.params
        words = [describe(p.get("framework"), p.get("backend"), p.get("model"), p.get("kind"), p.get("collective"))]
        if p.get("batch_size") is not None:
            words.append(f"b{p['batch_size']}")
        nodes, rpn = p.get("nodes"), p.get("ranks_per_node")
        if nodes is not None and rpn is not None:
            words.append(f"{nodes}x{rpn}")
        elif self.world_size is not None:
            words.append(f"{self.world_size} ranks" + (f" on {nodes} nodes" if nodes is not None else ""))
        elif nodes is not None:
            words.append(f"{nodes} nodes")
        if p.get("kind") not in ("train", None) and p.get("framework") != "nccl-tests":
            words.append(f"({p.get('collective') or p.get('kind')})")
        return " ".join(words)


def _where(cluster: str | None, model: str | None, since: str | None) -> tuple[str, list[Any]]:
    conds, args = [], []
    for col, value in (("cluster", cluster), ("model", model)):
        if value is not None:
            conds.append(f"{col} = ?")
            args.append(value)
    if since is not None:
        conds.append("date >= ?")
        args.append(since)
    return (" WHERE " + " AND ".join(conds)) if conds else "", args


def parse_since(text: str | None) -> str | None:
    if text is None:
        return None
    try:
        datetime.fromisoformat(text)
    except ValueError:
        raise ConfigError(f"--since: {text!r} is not a date", hint="give YYYY-MM-DD or an ISO time") from None
    return text


def query(db: Any, cluster: str | None = None, model: str | None = None, since: str | None = None) -> list[Trend]:
    """Every point's runs, oldest first: one SQL pass that averages the repeats of each run, and one that reads
    each point's parameters from a single row (13 MIN()s per group would have doubled the time)."""
    where, args = _where(cluster, model, since)
    cols = ", ".join(f'"{n}"' for n in POINT_KEY)
    params = {row[0]: (dict(zip(POINT_KEY, row[2:])), row[1]) for row in db.execute(
        f"SELECT point_key, world_size, {cols} FROM records WHERE rowid IN "
        f"(SELECT MIN(rowid) FROM records{where} GROUP BY point_key)", args)}
    sql = (f"SELECT point_key, run, MIN(date) AS d, cluster, COUNT(*), SUM(ok), "
           f"AVG(CASE WHEN ok THEN throughput END), AVG(CASE WHEN ok THEN step_time_ms END), "
           f"GROUP_CONCAT(DISTINCT state), MAX(CASE WHEN NOT ok THEN reason END), MAX(versions), "
           f"MAX(hpcbench_commit) FROM records{where} GROUP BY point_key, run ORDER BY point_key, d, MIN(rowid)")
    trends: dict[str, Trend] = {}
    for row in db.execute(sql, args):
        key, run, date, cl, n, n_ok, thr, step, states, reason, versions, commit = row
        t = trends.get(key)
        if t is None:
            known, world = params.get(key, ({}, None))
            t = trends[key] = Trend(key, known, cl, world_size=world)
        t.runs.append(RunPoint(run, date, n, n_ok or 0, thr, step, states or "", reason,
                               json.loads(versions) if versions else {}, commit))
    return sorted(trends.values(), key=lambda t: (str(t.cluster), t.name))


def judge(t: Trend, last_n: int = LAST_N) -> None:
    """Set the trend's verdict: outside the 95% prediction interval of its last N earlier runs, or not."""
    latest = t.latest
    earlier = [r.throughput for r in t.runs[:-1] if r.throughput is not None][-last_n:]
    t.window = earlier
    if latest.throughput is None:
        why = f"{latest.states}" + (f": {clip(latest.reason, 60)}" if latest.reason else "")
        t.verdict = f"no result in the latest run ({why})" if latest.n_ok == 0 else "no throughput measured"
        return
    if len(earlier) < MIN_RUNS:
        t.verdict = f"not enough history ({len(earlier)} earlier run(s) with a result; need {MIN_RUNS})"
        return
    n, m, sd = len(earlier), statistics.fmean(earlier), statistics.stdev(earlier)
    half = t975(n - 1) * sd * math.sqrt(1 + 1 / n)
    t.interval = (m - half, m + half)
    if t.interval[0] <= latest.throughput <= t.interval[1]:
        t.verdict = "within"
        return
    t.flagged = True
    side = "below" if latest.throughput < m else "above"
    t.verdict = f"OUTSIDE: {side} ({(latest.throughput / m - 1) * 100:+.1f}% vs mean of {n})"


def changed(t: Trend) -> str:
    """What differs between the latest run and the one before: versions and the hpcbench commit."""
    if len(t.runs) < 2:
        return ""
    old, new = t.runs[-2], t.latest
    out = [f"{k} {old.versions.get(k) or '?'}→{new.versions.get(k) or '?'}"
           for k in sorted(set(old.versions) | set(new.versions)) if old.versions.get(k) != new.versions.get(k)]
    if old.commit != new.commit and (old.commit or new.commit):
        out.append(f"hpcbench {(old.commit or '?')[:8]}→{(new.commit or '?')[:8]}")
    return ", ".join(out)


def check_references(trends: list[Trend], refs: list[Any]) -> tuple[int, list[str]]:
    """Each reference against the latest run of the points it names, and how often earlier runs failed it.
    Returns (failures in latest runs, notes)."""
    failures, notes = 0, []
    for ref in refs:
        lo, hi = ref.bounds()
        hits = [t for t in trends if ref.matches(t)]
        if not hits:
            notes.append(f"{ref.where} ({ref.metric}): matches no recorded point (not measured)")
        for t in hits:
            got = _metric(t.latest, ref.metric)
            ok = got is not None and lo <= got <= hi
            failures += not ok
            past = sum(1 for r in t.runs if not ((v := _metric(r, ref.metric)) is not None and lo <= v <= hi))
            detail = "pass" if ok else ("FAIL (no result)" if got is None else f"FAIL ({(got / ref.value - 1) * 100:+.1f}%)")
            t.reference = _join(t.reference, f"{ref.metric} {detail}; {past} of {len(t.runs)} runs fail")
    return failures, notes


def _metric(r: RunPoint, metric: str) -> float | None:
    return r.throughput if metric == "throughput" else r.step_time_ms


def _join(a: str, b: str) -> str:
    return f"{a} | {b}" if a else b


def table(trends: list[Trend], last_n: int, refs: bool) -> Table:
    headers = ["cluster", "point", "runs", "first", "latest run", "samples/s", f"last {last_n}: mean ± sd",
               "95% prediction", "verdict", "changed since the run before"] + (["reference"] if refs else [])
    rows = []
    for t in trends:
        w = t.window
        spread = f"{num(statistics.fmean(w))} ± {num(statistics.stdev(w))} (n={len(w)})" if len(w) >= 2 else "—"
        pi = f"[{num(t.interval[0])}, {num(t.interval[1])}]" if t.interval else "—"
        row = [t.cluster or "?", t.name, len(t.runs), t.runs[0].date[:10], t.latest.date[:16].replace("T", " "),
               num(t.latest.throughput), spread, pi, t.verdict, changed(t)]
        rows.append(row + ([t.reference] if refs else []))
    return Table("history", "History: each point's latest run against the spread of its earlier runs", headers, rows,
                 empty="no recorded run matches")


def summary_line(trends: list[Trend], last_n: int) -> str:
    flagged = sum(t.flagged for t in trends)
    short = sum(t.verdict.startswith("not enough") for t in trends)
    failed = sum(t.verdict.startswith("no result") for t in trends)
    runs = len({r.run for t in trends for r in t.runs})
    return (f"{len(trends)} points over {runs} runs: {flagged} outside the 95% prediction interval of their last "
            f"{last_n} runs (when nothing changed, about 1 in 20 is, by chance), {short} without enough history "
            f"(< {MIN_RUNS} earlier runs), {failed} without a result in their latest run")


def plot(trends: list[Trend], out: Path) -> Path:
    """Throughput of each point per run over time; the flagged points' intervals drawn, their latest run marked."""
    # The Figure API without pyplot: pyplot's import and tight_layout's extra draw were a third of the
    # time of `hpcbench history` over 100,000 records.
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    shown = sorted((t for t in trends if any(r.throughput for r in t.runs)),
                   key=lambda t: (not t.flagged, -len(t.runs), t.name))[:MAX_PLOTTED]
    fig = Figure(figsize=(12.0, 5.0))
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    for t in shown:
        pts = [(datetime.fromisoformat(r.date), r.throughput) for r in t.runs if r.throughput is not None]
        # matplotlib plots datetimes (its date converter); its type stubs name only numbers
        line, = ax.plot([d for d, _ in pts], [v for _, v in pts], marker="o", markersize=3,  # type: ignore[arg-type]
                        label=f"{t.cluster} {t.name}" if t.cluster else t.name)
        if t.interval is not None:
            d = datetime.fromisoformat(t.latest.date)
            ax.errorbar([d], [sum(t.interval) / 2],  # type: ignore[arg-type]
                        yerr=[[(t.interval[1] - t.interval[0]) / 2]], color=line.get_color(),
                        capsize=4, alpha=0.6)
        if t.flagged:
            ax.plot([datetime.fromisoformat(t.latest.date)], [t.latest.throughput], "x",  # type: ignore[arg-type]
                    color="red", markersize=12,
                    markeredgewidth=2)
    more = f" ({len(shown)} of {len(trends)} points, flagged first)" if len(trends) > len(shown) else ""
    # y= fixes the title's place: matplotlib otherwise measures every tick label to place it (0.17 s here)
    ax.set_title(f"hpcbench history: throughput per run{more}\nbar: 95% prediction from earlier runs; red x: outside", y=1.01)
    ax.set_xlabel("run date (UTC)")
    ax.set_ylabel("samples/s (mean over repeats)")
    ax.grid(True, alpha=0.3)
    values = [r.throughput for t in shown for r in t.runs if r.throughput]
    if values and max(values) > 20 * min(values):  # points of very different scales: each line keeps its shape
        from matplotlib.ticker import FuncFormatter

        ax.set_yscale("log")
        # plain numbers, no minor ticks: mathtext's "10^4" labels and the minor ticks cost 0.15 s of 1
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}"))
        ax.minorticks_off()
    if shown:
        # beside the axes, never over a point (a legend inside hid the first run's point)
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)
    ax.tick_params(axis="x", labelrotation=20)
    fig.subplots_adjust(left=0.07, right=0.7, top=0.88, bottom=0.15)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=100)
    return out


def arguments(p: Any, summarize: bool = False) -> None:
    """`hpcbench history`'s options; with ``summarize``, only the two that `hpcbench summarize` takes."""
    p.add_argument("--history", metavar="PATH", help="the history database (default: $HPCBENCH_HISTORY, else "
                                                      "$XDG_DATA_HOME/hpcbench/history.sqlite)")
    if summarize:
        p.add_argument("--no-history", action="store_true", help="do not record this summary in the history")
        return
    p.add_argument("--cluster", help="only this cluster (SLURM_CLUSTER_NAME, or summarize's --cluster)")
    p.add_argument("--model", help="only this model")
    p.add_argument("--since", metavar="DATE", help="only runs measured on or after DATE (YYYY-MM-DD)")
    p.add_argument("--last", type=int, default=LAST_N, metavar="N",
                   help=f"earlier runs a point's latest run is compared with (default: {LAST_N})")
    p.add_argument("--references", metavar="FILE", help="TOML reference values (as summarize reads): each "
                                                        "point's latest run must pass; exit 1 when one fails")
    p.add_argument("--out", metavar="DIR", help=f"folder for the trend plot, {PLOT_NAME} (default: the history "
                                                 "database's folder)")
    p.add_argument("--plot", metavar="PNG", help="the trend plot's file, in place of --out")
    p.add_argument("--no-plot", action="store_true", help="skip the trend plot")
    p.add_argument("--format", choices=("table", "markdown", "github", "csv"), default="table")
    p.add_argument("--html", metavar="DIR", help="also write a static site into DIR: a page per point with its "
                                                 "trend, flagged runs marked, each run linked to its report")


def command(args: Any) -> int:
    """`hpcbench history`: the table on stdout, the plot written; 1 when a reference fails in a latest run."""
    from hpcbench.report import history
    from hpcbench.report import references as refs_mod
    from hpcbench.report.html import history_runs, write_history_site

    if args.last < 2:
        raise ConfigError(f"--last: {args.last} runs give no spread", hint=f"give 2 or more (default {LAST_N})")
    refs = refs_mod.load(args.references) if args.references else None
    since = parse_since(args.since)
    path = Path(args.history) if args.history else history.default_path()
    db = history.connect(path, create=False)
    try:
        trends = query(db, args.cluster, args.model, since)
        runs = history_runs(db) if args.html else {}
    finally:
        db.close()
    for t in trends:
        judge(t, args.last)
    failures, notes = check_references(trends, refs) if refs is not None else (0, [])
    print(table(trends, args.last, refs is not None).render(args.format))
    side = sys.stderr if args.format == "csv" else sys.stdout
    print(summary_line(trends, args.last) + f" (history: {path})", file=side)
    for note in notes:
        print(note, file=side)
    if failures:
        print(f"{failures} reference check(s) failed in the latest runs", file=side)
    if not args.no_plot and trends:
        png = Path(args.plot) if args.plot else Path(args.out or path.parent) / PLOT_NAME
        try:
            print(f"trend plot: {plot(trends, png)}", file=side)
        except OSError as e:
            raise ConfigError(f"trend plot {png}: {e.strerror or e}",
                              hint="give a writable folder with --out DIR, or --no-plot") from None
    if args.html:
        site = write_history_site(trends, runs, args.last, Path(args.html), summary_line(trends, args.last))
        print(f"history site: {site} (open it in a browser; no server needed)", file=side)
    return 1 if failures else 0
