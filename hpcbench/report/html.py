"""report.html and the history site: the report and the trends as web pages that need no server and fetch nothing.

report.html is report.md (report/markdown.py, the one owner of the report's sections and tables) rendered to
HTML, with every plot inline as base64 and one inline style sheet: a file that can be mailed, opened from disk
(file://) or served by any web server, and shows the same thing offline. The history site is one index page
and one page per point, each with its trend plot inline, its runs listed (a flagged run marked), and each run
linked to that run's report.html, written into the site beside it.
"""

from __future__ import annotations

import base64
import html
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hpcbench.errors import ConfigError
from hpcbench.files import atomic_write_text, utcnow

if TYPE_CHECKING:
    from hpcbench.report.summarize import Report
    from hpcbench.report.trend import Trend

STYLE = """
body { font: 15px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; margin: 2em auto; max-width: 1500px;
       padding: 0 1em; color: #1d2125; }
h1 { font-size: 1.7em; } h2 { border-bottom: 1px solid #d0d7de; padding-bottom: .2em; margin-top: 1.8em; }
table { border-collapse: collapse; margin: .8em 0; font-size: 13px; display: block; overflow-x: auto; }
th, td { border: 1px solid #d0d7de; padding: 3px 8px; vertical-align: top; }
td:last-child { min-width: 16em; }  /* the reason or flag column: prose, not a sliver */
th { background: #f3f5f7; text-align: left; white-space: nowrap; }  /* a column is as wide as its heading */ tr:nth-child(even) td { background: #fafbfc; }
code { font-size: 90%; background: #f3f5f7; padding: 0 3px; border-radius: 3px; }
pre { background: #f6f8fa; padding: .7em; overflow-x: auto; }
img { max-width: 100%; border: 1px solid #e1e4e8; }
blockquote { border-left: 4px solid #d73a49; margin: 0; padding: .2em 1em; background: #fff5f5; }
.flagged td { background: #ffe3e3 !important; } .muted { color: #6a737d; }
nav a { margin-right: 1em; }
"""

IMG = re.compile(r'<img alt="([^"]*)" src="([^":/]+\.png)"\s*/?>')


def _page(title: str, body: str) -> str:
    return (f'<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">\n'
            f"<title>{html.escape(title)}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n{body}\n</body>\n</html>\n")


def _data_uri(png: Path) -> str:
    return "data:image/png;base64," + base64.b64encode(png.read_bytes()).decode("ascii")


def markdown_html(text: str) -> str:
    """Markdown (GitHub tables, fenced code) to HTML, with the library mkdocs uses too."""
    try:
        import markdown
    except ImportError:
        raise ConfigError("--html needs the Python package 'markdown'",
                          hint="pip install markdown (it comes with hpcbench's install requirements)") from None
    return markdown.markdown(text, extensions=["tables", "fenced_code", "sane_lists", "toc"], output_format="html",
                             tab_length=2)  # report.md nests its lists by two spaces, as GitHub reads them


def inline_images(body: str, folder: Path) -> str:
    """Each <img> of a PNG beside the page, as a data URI: the page stands alone."""
    def one(m: re.Match[str]) -> str:
        png = folder / m.group(2)
        src = _data_uri(png) if png.is_file() else m.group(2)
        return f'<img alt="{m.group(1)}" src="{src}">'

    return IMG.sub(one, body)


def report_html(report: Report, folder: Path) -> str:
    """report.md's sections as one self-contained page; the plots are read from ``folder`` (where write() drew them)."""
    from hpcbench.report.markdown import report_md

    return _page("hpcbench scaling report", inline_images(markdown_html(report_md(report)), folder))


def write_report(report: Report, out: Path) -> Path:
    path = out / "report.html"
    atomic_write_text(path, report_html(report, out))
    return path


# --- the history site ---------------------------------------------------------------------------------------
def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_")[:80] or "x"


def _run_reports(trends: list[Trend], runs: dict[str, str], site: Path) -> dict[str, tuple[str | None, str]]:
    """run id -> (its report.html relative to the site, or None, and why not): each run's report is made from its
    run directory into site/runs/<run>/ (the run directory is only read), so the site stands alone once written."""
    import tempfile

    from hpcbench.errors import HpcbenchError
    from hpcbench.report import summarize as sm
    from hpcbench.report.plots import write_all

    out: dict[str, tuple[str | None, str]] = {}
    for run in sorted({r.run for t in trends for r in t.runs}):
        source = Path(runs.get(run, run))
        if not source.exists():
            out[run] = (None, f"its run directory {source} is gone")
            continue
        try:
            report = sm.make_report([source])
            with tempfile.TemporaryDirectory() as tmp:  # the plots go inside the page
                report.plots = write_all(report.aggs, Path(tmp), report.baseline.mode, report.peaks())
                page = report_html(report, Path(tmp))
        except HpcbenchError as e:
            out[run] = (None, f"its report could not be made: {e}")
            continue
        link = f"runs/{_slug(run)}/report.html"
        atomic_write_text(site / link, page)
        out[run] = (link, "")
    return out


def _num(v: float | None) -> str:
    from hpcbench.report.fmt import num

    return num(v)


def _point_page(t: Trend, last_n: int, reports: dict[str, tuple[str | None, str]], plot: Path) -> str:
    from hpcbench.report.trend import changed

    rows = []
    for i, r in enumerate(t.runs):
        link, why = reports.get(r.run, (None, "not recorded"))
        ref = (f'<a href="../{html.escape(link)}">report</a>' if link
               else f'<span class="muted">{html.escape(why)}</span>')
        latest_flagged = t.flagged and i == len(t.runs) - 1
        mark = "OUTSIDE" if latest_flagged else ""
        cls = ' class="flagged"' if latest_flagged else ""
        rows.append(f'<tr{cls}><td>{html.escape(r.date[:16].replace("T", " "))}'
                    f"</td><td><code>{html.escape(r.run)}</code></td><td>{_num(r.throughput)}</td>"
                    f"<td>{_num(r.step_time_ms)}</td><td>{r.n_ok}/{r.n}</td><td>{html.escape(r.states)}"
                    f"{(': ' + html.escape(r.reason)) if r.reason else ''}</td><td>{mark}</td><td>{ref}</td></tr>")
    interval = f"[{_num(t.interval[0])}, {_num(t.interval[1])}]" if t.interval else "—"
    body = (f'<nav><a href="../index.html">all points</a></nav>\n<h1>{html.escape(t.cluster or "?")} · '
            f"{html.escape(t.name)}</h1>\n<p><b>Verdict:</b> {html.escape(t.verdict)} (95% prediction interval "
            f"from the last {last_n} earlier runs: {interval}). <b>Changed since the run before:</b> "
            f"{html.escape(changed(t) or 'nothing recorded')}.</p>\n"
            f'<img alt="trend of {html.escape(t.name)}" src="{_data_uri(plot)}">\n'
            "<h2>Runs</h2>\n<table><thead><tr><th>date (UTC)</th><th>run</th><th>samples/s</th><th>step ms</th>"
            "<th>repeats ok</th><th>states</th><th>flag</th><th>report</th></tr></thead><tbody>\n"
            + "\n".join(rows) + "\n</tbody></table>\n")
    return _page(f"hpcbench history: {t.name}", body)


def write_history_site(trends: list[Trend], runs: dict[str, str], last_n: int, site: Path, summary: str) -> Path:
    """index.html (every point, its verdict, a link to its page) and points/<point>.html; returns index.html."""
    import tempfile

    from hpcbench.report.trend import plot, table

    if site.exists() and not site.is_dir():
        raise ConfigError(f"--html {site}: not a folder", hint="give a folder for the site (it is made when missing)")
    site.mkdir(parents=True, exist_ok=True)
    (site / "points").mkdir(exist_ok=True)
    reports = _run_reports(trends, runs, site)
    names = {}
    with tempfile.TemporaryDirectory() as tmp:
        for t in trends:
            name = f"{_slug(f'{t.cluster}-{t.name}')}-{t.key[:8]}.html"
            names[t.key] = name
            png = plot([t], Path(tmp) / f"{t.key}.png")
            atomic_write_text(site / "points" / name, _point_page(t, last_n, reports, png))
        overview = plot(trends, Path(tmp) / "all.png") if trends else None
        tab = table(trends, last_n, refs=False)
        tab.headers = ["page", *tab.headers]
        for t, row in zip(trends, tab.rows, strict=True):
            row.insert(0, f"[{'OUTSIDE' if t.flagged else 'trend'}](points/{names[t.key]})")
        body = (f"<h1>hpcbench history</h1>\n<p>{html.escape(summary)}. Written {utcnow()}.</p>\n"
                + (f'<img alt="throughput per run" src="{_data_uri(overview)}">\n' if overview else "")
                + markdown_html(f"## {tab.title}\n\n" + tab.render("github")))
    index = site / "index.html"
    atomic_write_text(index, _page("hpcbench history", body))
    return index


def history_runs(db: Any) -> dict[str, str]:
    """run id -> the source it was summarized from (the history's runs table)."""
    return {run: source for run, source in db.execute("SELECT run, source FROM runs")}
