"""report.html and the history site in a real browser: Debian's headless Chromium, driven by Selenium through
Debian's chromedriver. Each page loads from a file URL with no console error, every image is displayed, the
tables hold the figures of records.csv, and the links between the history and the reports resolve."""
from __future__ import annotations

import csv
import shutil
import sys

import pytest
from conftest import DATA, REPO
from report_helpers import make_run, point, provenance, record

from hpcbench.files import atomic_write_json
from hpcbench.report.fmt import num

# Throughput of one point in six daily runs: the last falls far below the others, so it is flagged.
SERIES = [100.0, 104.0, 98.0, 102.0, 101.0, 60.0]


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    """Chromium as scripts/test.sh installs it (apt: chromium, chromium-driver); a missing one fails, never skips."""
    sys.path.insert(0, str(REPO / "scripts"))
    try:
        from tutorial import chromium
    finally:
        sys.path.pop(0)
    b = chromium(tmp_path_factory.mktemp("chromium-profile"))
    yield b
    b.quit()


def load(browser, path):
    """Open a page by its file URL; returns the console's errors and the images not displayed."""
    browser.get(path.as_uri())
    assert browser.execute_script("return document.readyState") == "complete"
    errors = [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]
    broken = browser.execute_script("return Array.from(document.images).filter(i => !(i.complete && "
                                    "i.naturalWidth > 0)).map(i => i.alt)")
    return errors, broken


def shows(cell, value):
    """Whether a table cell starts with a records.csv figure as the report's tables print it (1 or 2 decimals)."""
    return any(cell.startswith(num(float(value), d)) for d in (1, 2))


def cells(browser):
    return browser.execute_script("return Array.from(document.querySelectorAll('td')).map(c => c.textContent)")


def test_report_html_shows_every_figure_of_records_csv(cli, browser, tmp_path):
    """A run of four measured points and one failed one: the page's tables hold each point's throughput and step
    time as records.csv has them, every plot is displayed, and nothing is fetched."""
    results = [(point(nodes=n, rpn=r), record(point(nodes=n, rpn=r), thr)) for n, r, thr in
               ((1, 1, 100.0), (1, 2, 190.0), (2, 1, 180.0), (2, 2, 330.0))]
    results.append((point(backend="mpi", nodes=2, rpn=2), "RuntimeError: connection refused"))
    rd = make_run(tmp_path / "run", results)
    out = tmp_path / "report"
    proc = cli("summarize", str(rd.root), "--out", str(out), "--html", "--no-history")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "web page: " in proc.stdout
    page = out / "report.html"
    errors, broken = load(browser, page)
    assert not errors and not broken, (errors, broken)
    images = browser.execute_script("return Array.from(document.images).map(i => i.src.slice(0, 22))")
    assert len(images) >= 3 and set(images) == {"data:image/png;base64,"}  # inline: the file stands alone
    text, shown = browser.find_element("tag name", "body").text, cells(browser)
    for h in ("What explains this run", "Why, point by point", "Findings", "Intra-node scaling (one server)", "Environment", "Plots"):
        assert browser.find_elements("xpath", f"//h2[normalize-space()='{h}']"), h
    rows = list(csv.DictReader((out / "records.csv").open()))
    assert len(rows) == 5
    for r in rows:
        if r["ok"] == "True":
            assert any(shows(c, r["throughput"]) for c in shown), r["throughput"]
            assert any(shows(c, r["step_time_ms"]) for c in shown), r["step_time_ms"]
        else:
            assert "connection refused" in text and r["state"] in text
    browser.save_screenshot(str(tmp_path / "report.png"))
    assert "<script" not in page.read_text() and "http" not in page.read_text().split("<body>")[0]


def test_report_html_of_real_logs_offline(cli, browser, tmp_path):
    """An nccl-tests log from a public thread: the busbw table holds its figures, the plot is displayed."""
    out = tmp_path / "r"
    log = DATA / "logs" / "nccltests_h100-tree-2nodes_54.log"
    proc = cli("summarize", str(log), "--out", str(out), "--html", "--no-history")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    errors, broken = load(browser, out / "report.html")
    assert not errors and not broken
    assert any("41.31" in c for c in cells(browser))  # the largest size's busbw in the log


def dated_run(tmp_path, day, thr):
    p = point(nodes=2, rpn=1)
    rd = make_run(tmp_path / f"run{day}", [(p, record(p, thr))])
    atomic_write_json(rd.point(p).provenance(0),
                      provenance(0, "node1", "550", finished_at=f"2026-11-{day:02d}T10:00:00+00:00"))
    return rd


def test_history_site_links_every_point_to_its_runs_reports(cli, browser, tmp_path):
    db = tmp_path / "h.sqlite"
    for day, thr in enumerate(SERIES, 1):
        rd = dated_run(tmp_path, day, thr)
        proc = cli("summarize", str(rd.root), "--out", str(rd.root / "report"), "--no-plots", "--history", str(db))
        assert proc.returncode == 0, proc.stderr
    shutil.rmtree(tmp_path / "run2")  # a run directory that is gone keeps its row, which says so
    site = tmp_path / "site"
    def run_files():
        return {f: f.stat().st_mtime_ns for d in tmp_path.glob("run[0-9]") for f in d.rglob("*")}

    runs_before = run_files()
    proc = cli("history", "--history", str(db), "--html", str(site), "--no-plot")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert run_files() == runs_before  # the run directories are only read
    assert sorted(p.name for p in (site / "runs").rglob("*") if p.is_file()) == ["report.html"] * 5
    errors, broken = load(browser, site / "index.html")
    assert not errors and not broken
    links = browser.execute_script(
        "return Array.from(document.querySelectorAll('td a')).map(a => [a.textContent, a.href])")
    assert [t for t, _ in links] == ["OUTSIDE"]  # the one point, flagged
    browser.get(links[0][1])
    errors, broken = load(browser, site / links[0][1].split("/site/")[1])
    assert not errors and not broken
    browser.save_screenshot(str(tmp_path / "point.png"))
    rows = browser.execute_script("return Array.from(document.querySelectorAll('tbody tr')).map(r => "
                                  "[r.className, Array.from(r.cells).map(c => c.textContent)])")
    assert len(rows) == 6
    assert [cls for cls, _ in rows] == [""] * 5 + ["flagged"] and rows[-1][1][6] == "OUTSIDE"
    assert all(shows(c[2], v) for (_, c), v in zip(rows, SERIES))
    assert "is gone" in rows[1][1][7]
    reports = browser.execute_script("return Array.from(document.querySelectorAll('td a')).map(a => a.href)")
    assert len(reports) == 5
    for href in reports:
        assert href.startswith("file://") and href.endswith("/report.html")
        errors, broken = load(browser, site / href.split("/site/")[1])
        assert not errors and not broken, href
        assert browser.find_element("tag name", "h1").text == "hpcbench scaling report"
    # the flagged run's report holds its figure
    assert any(shows(c, SERIES[-1]) for c in cells(browser))
