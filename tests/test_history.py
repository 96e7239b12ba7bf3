"""The history database: what summarize records, the trend and its flag, references, the plot, the schema
migration from version 1, and two summarize processes writing at once."""
from __future__ import annotations

import json
import math
import re
import sqlite3
import statistics
import subprocess
import sys

import pytest
from conftest import REPO, write
from report_helpers import make_run, point, provenance, record

from hpcbench.errors import HistoryError
from hpcbench.files import atomic_write_json
from hpcbench.report import history
from hpcbench.stats import t975

P1, P2 = point(nodes=2, rpn=1), point(nodes=1, rpn=1)
# Throughput of the 2x1 point in each run, oldest first; the last one falls far below the others.
SERIES = [100.0, 104.0, 98.0, 102.0, 101.0, 60.0]


def dated_run(tmp_path, name, day, thr, versions=None):
    """A run of the two points measured on 2026-11-<day>; P2 only from the fifth run on (little history)."""
    results = [(P1, record(P1, thr))] + ([(P2, record(P2, 50.0))] if day >= 5 else [])
    rd = make_run(tmp_path / name, results)
    for p, _ in results:
        doc = provenance(0, "node1", "550", finished_at=f"2026-11-{day:02d}T10:00:00+00:00",
                         git_commit="abc123" if day < 6 else "def456")
        if versions:
            doc["software"] = {**doc["software"], **versions}
        atomic_write_json(rd.point(p).provenance(0), doc)
    return rd


def summarize(cli, run, db, *extra):
    proc = cli("summarize", str(run), "--out", str(run / "report"), "--no-plots", "--history", str(db), *extra)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc


@pytest.fixture
def six_runs(cli, tmp_path):
    db = tmp_path / "h.sqlite"
    for day, thr in enumerate(SERIES, 1):
        rd = dated_run(tmp_path, f"run{day}", day, thr, {"torch": "2.15.0"} if day == 6 else None)
        summarize(cli, rd.root, db)
    return db


def test_summarize_records_every_point_with_cluster_versions_commit_and_date(six_runs):
    db = sqlite3.connect(six_runs)
    rows = db.execute("SELECT run, cluster, model, nodes, ranks_per_node, throughput, versions, hpcbench_commit, date "
                      "FROM records ORDER BY date, nodes").fetchall()
    assert len(rows) == 6 + 2  # six runs of P1, two of P2
    _, cluster, model, nodes, rpn, thr, versions, commit, date = rows[0]
    assert (cluster, model, nodes, rpn, commit, date) == ("alps", "mlp", 2, 1, "abc123", "2026-11-01T10:00:00+00:00")
    assert math.isclose(thr, 100.0) and json.loads(versions)["torch"] == "2.14.1"
    assert db.execute("PRAGMA user_version").fetchone()[0] == history.SCHEMA_VERSION
    assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    # every declared parameter is a column
    cols = {r[1] for r in db.execute("PRAGMA table_info(records)")}
    from hpcbench.plan.fields import NAMES
    assert set(NAMES) <= cols


def test_summarizing_a_run_again_replaces_its_rows(cli, tmp_path):
    db = tmp_path / "h.sqlite"
    rd = dated_run(tmp_path, "run", 5, 100.0)
    summarize(cli, rd.root, db)
    summarize(cli, rd.root, db)
    assert sqlite3.connect(db).execute("SELECT COUNT(*) FROM records").fetchone()[0] == 2


def test_history_flags_the_run_outside_the_prediction_interval(cli, six_runs, tmp_path):
    png = tmp_path / "trend.png"
    proc = cli("history", "--history", str(six_runs), "--last", "5", "--plot", str(png))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    earlier = SERIES[:-1]
    m, sd, n = statistics.fmean(earlier), statistics.stdev(earlier), len(earlier)
    half = t975(n - 1) * sd * math.sqrt(1 + 1 / n)
    lines = {re.split(r"\s{2,}", ln)[1]: ln for ln in proc.stdout.splitlines() if ln.startswith("alps")}
    flagged = lines["ddp-gloo mlp b32 2x1"]
    assert f"[{m - half:.2f}, {m + half:.2f}]" in flagged, flagged
    assert f"OUTSIDE: below ({(60.0 / m - 1) * 100:+.1f}% vs mean of 5)" in flagged, flagged
    assert "torch 2.14.1→2.15.0" in flagged and "hpcbench abc123→def456" in flagged
    assert "not enough history (1 earlier run(s) with a result; need 3)" in lines["ddp-gloo mlp b32 1x1"]
    assert "2 points over 6 runs: 1 outside" in proc.stdout
    assert png.stat().st_size > 10_000 and png.read_bytes()[:4] == b"\x89PNG"


def test_history_filters_and_a_run_within_the_spread_is_not_flagged(cli, six_runs, tmp_path):
    proc = cli("history", "--history", str(six_runs), "--since", "2026-11-02", "--model", "mlp", "--no-plot",
               "--format", "csv")
    assert proc.returncode == 0, proc.stderr
    rows = proc.stdout.strip().splitlines()
    assert len(rows) == 3  # header + two points
    assert ",5," in rows[1] or ",5," in rows[2]  # runs 2-6 of the 2x1 point
    assert "0 outside" not in proc.stderr
    none = cli("history", "--history", str(six_runs), "--model", "resnet50", "--no-plot")
    assert none.returncode == 0 and "no recorded run matches" in none.stdout
    for day, thr in ((7, 101.5),):
        summarize(cli, dated_run(tmp_path, f"run{day}", day, thr).root, six_runs)
    proc = cli("history", "--history", str(six_runs), "--last", "3", "--no-plot")
    # the last 3 earlier runs are 102, 101 and 60: wide, and 101.5 is within
    assert "within" in proc.stdout and "0 outside" in proc.stdout, proc.stdout


REFS = """
[[reference]]
cluster = "alps"
model = "mlp"
backend = "gloo"
nodes = 2
gpus_per_node = 1
throughput = [100.0, -0.1, inf]
"""


def test_history_checks_references_on_the_latest_run(cli, six_runs, tmp_path):
    refs = write(tmp_path / "refs.toml", REFS)
    proc = cli("history", "--history", str(six_runs), "--references", str(refs), "--no-plot")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "throughput FAIL (-40.0%); 1 of 6 runs fail" in proc.stdout
    assert "1 reference check(s) failed in the latest runs" in proc.stdout
    other = write(tmp_path / "other.toml", REFS.replace("nodes = 2", "nodes = 4"))
    proc = cli("history", "--history", str(six_runs), "--references", str(other), "--no-plot")
    assert proc.returncode == 0 and "matches no recorded point (not measured)" in proc.stdout


def test_no_history_records_nothing_and_bad_input_is_one_line(cli, tmp_path):
    db = tmp_path / "h.sqlite"
    rd = dated_run(tmp_path, "run", 5, 100.0)
    summarize(cli, rd.root, db, "--no-history")
    assert not db.exists()
    missing = cli("history", "--history", str(db))
    assert missing.returncode == 2 and missing.stderr.count("\n") == 1 and "no history there yet" in missing.stderr
    summarize(cli, rd.root, db)
    bad = cli("history", "--history", str(db), "--since", "last tuesday")
    assert bad.returncode == 2 and "--since: 'last tuesday' is not a date" in bad.stderr
    junk = write(tmp_path / "junk.sqlite", "not a database at all " * 100)
    proc = cli("history", "--history", str(junk))
    assert proc.returncode == 2 and "file is not a database" in proc.stderr and proc.stderr.count("\n") == 1


def test_default_path_follows_xdg_and_the_environment(monkeypatch, tmp_path):
    monkeypatch.delenv("HPCBENCH_HISTORY", raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    assert history.default_path() == tmp_path / "xdg" / "hpcbench" / "history.sqlite"
    monkeypatch.setenv("HPCBENCH_HISTORY", str(tmp_path / "mine.sqlite"))
    assert history.default_path() == tmp_path / "mine.sqlite"


# The first schema exactly as version 1 made it; frozen here, so a change to history._v1 cannot hide a
# broken migration.
V1 = """
CREATE TABLE runs (run TEXT PRIMARY KEY, source TEXT NOT NULL, recorded_at TEXT NOT NULL);
CREATE TABLE records (
    run TEXT NOT NULL REFERENCES runs(run), point_key TEXT NOT NULL, repeat INTEGER NOT NULL,
    point_id TEXT, cluster TEXT, date TEXT NOT NULL, state TEXT, ok INTEGER, throughput REAL,
    step_time_ms REAL, reason TEXT, params TEXT NOT NULL,
    PRIMARY KEY (run, point_key, repeat));
PRAGMA user_version = 1;
"""


def test_migration_from_version_1_keeps_every_row(cli, tmp_path):
    db_path = tmp_path / "v1.sqlite"
    old = sqlite3.connect(db_path)
    old.executescript(V1)
    params = P1.params()
    key = history.point_key("alps", params)
    for n, thr in enumerate((100.0, 104.0, 98.0)):
        old.execute("INSERT INTO runs VALUES (?, ?, ?)", (f"r{n}", f"/runs/r{n}", "2026-10-01"))
        old.execute("INSERT INTO records VALUES (?, ?, 0, ?, 'alps', ?, 'COMPLETED', 1, ?, ?, '', ?)",
                    (f"r{n}", key, P1.id, f"2026-10-0{n + 1}T00:00:00+00:00", thr, 32 * 2 / thr * 1e3,
                     json.dumps(params)))
    old.commit()
    old.close()

    db = history.connect(db_path)
    assert db.execute("PRAGMA user_version").fetchone()[0] == history.SCHEMA_VERSION  # every migration ran
    rows = db.execute("SELECT run, model, nodes, ranks_per_node, backend, versions FROM records ORDER BY run").fetchall()
    assert rows == [(f"r{n}", "mlp", 2, 1, "gloo", "{}") for n in range(3)]
    db.close()
    # a version-2 run on top of the migrated ones: the trend spans both
    summarize(cli, dated_run(tmp_path, "new", 5, 101.0).root, db_path)
    proc = cli("history", "--history", str(db_path), "--no-plot")
    assert proc.returncode == 0, proc.stderr
    assert "within" in proc.stdout and "4  " in proc.stdout, proc.stdout  # 4 runs of the 2x1 point


def test_rows_of_the_kinds_first_name_join_the_trend_of_the_collective_kind(tmp_path):
    """Version 3: rows recorded as kind "allreduce" (model "allreduce", as expand.py set it then) take the kind's
    name today and the point key a new row of the same point gets, so that the trend runs on across the rename."""
    ar = point(kind="collective", model=None, nodes=1, rpn=2)
    new = history.point_key("alps", ar.params())
    db_path = tmp_path / "v2.sqlite"
    history.connect(db_path).close()
    old = sqlite3.connect(db_path)
    old.execute("PRAGMA user_version = 2")
    params = {**ar.params(), "kind": "allreduce", "model": "allreduce"}
    assert history.point_key("alps", params) != new
    old.execute("INSERT INTO runs VALUES ('r0', '/runs/r0', '2026-10-01')")
    old.execute("INSERT INTO records (run, point_key, repeat, point_id, cluster, date, params, kind, model) VALUES "
                "('r0', ?, 0, ?, 'alps', '2026-10-01', ?, 'allreduce', 'allreduce')",
                (history.point_key("alps", params), ar.id, json.dumps(params)))
    old.commit()
    old.close()
    db = history.connect(db_path)
    row = db.execute("SELECT point_key, kind, model, params FROM records").fetchone()
    assert row[:3] == (new, "collective", None) and json.loads(row[3])["kind"] == "collective"


def test_a_database_from_a_newer_hpcbench_is_refused(tmp_path):
    db_path = tmp_path / "future.sqlite"
    sqlite3.connect(db_path).execute("PRAGMA user_version = 99")
    with pytest.raises(HistoryError, match="schema version 99 is newer"):
        history.connect(db_path)


def test_two_summarize_processes_at_once_lose_nothing(tmp_path):
    db = tmp_path / "shared.sqlite"
    runs = []
    for name, rpn_count in (("a", 400), ("b", 400)):
        pts = [point(batch=b, backend=name == "a" and "gloo" or "mpi") for b in range(1, rpn_count + 1)]
        runs.append(make_run(tmp_path / name, [(p, record(p, 10.0 + p.batch_size)) for p in pts]))
    procs = [subprocess.Popen([sys.executable, "-m", "hpcbench", "summarize", str(rd.root), "--out",
                               str(rd.root / "report"), "--no-plots", "--history", str(db)], cwd=REPO,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for rd in runs]
    outs = [p.communicate(timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    con = sqlite3.connect(db)
    assert con.execute("SELECT COUNT(*) FROM records").fetchone()[0] == 800
    assert con.execute("SELECT COUNT(DISTINCT run) FROM records").fetchone()[0] == 2
    assert con.execute("SELECT COUNT(*) FROM runs").fetchone()[0] == 2


def test_history_of_real_logs_names_points_by_their_fields_and_keeps_only_measured_ones(cli, tmp_path):
    """Corpus logs: a Horovod benchmark (no layout, no backend shown), an NCCL-only log (no measurement) and an
    nccl-tests run. The NCCL-only log is not a point; no name says None; the plot goes beside the database."""
    from conftest import DATA

    logs = DATA / "logs"
    db = tmp_path / "hist" / "h.sqlite"
    proc = cli("summarize", str(logs / "horovod_1.log"), str(logs / "nccl_gdrdma-mpiprefix_04.log"),
               str(logs / "nccltests_1.log"), "--no-plots", "--out", str(tmp_path / "rep"), "--history", str(db),
               cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "history: " + str(db) + " (2 records)" in proc.stdout
    rows = sqlite3.connect(db).execute("SELECT framework, state FROM records ORDER BY framework").fetchall()
    assert rows == [("horovod", "parsed"), ("nccl-tests", "parsed")]
    proc = cli("history", "--history", str(db), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "None" not in proc.stdout, proc.stdout
    names = {re.split(r"\s{2,}", ln)[1] for ln in proc.stdout.splitlines()[2:4]}
    assert names == {"horovod resnet50 b32 8 ranks", "nccl-tests all_reduce 2x1"}, proc.stdout
    assert f"trend plot: {db.parent / 'history.png'}" in proc.stdout
    assert sorted(p.name for p in tmp_path.iterdir()) == ["hist", "rep"]  # nothing in the current folder
    out = cli("history", "--history", str(db), "--out", str(tmp_path / "plots"), cwd=tmp_path)
    assert out.returncode == 0 and (tmp_path / "plots" / "history.png").read_bytes()[:4] == b"\x89PNG", out.stderr


def test_a_run_is_recorded_under_its_cluster_profiles_name_not_slurms(cli, tmp_path):
    """Real provenance from the minicluster says SLURM_CLUSTER_NAME; the profile the sweep named wins."""
    import shutil

    from conftest import DATA

    from hpcbench.rundir import RunDir

    p = P2
    rd = RunDir.create(tmp_path / "run", "", "constructed", [p], cluster="minicluster")
    rd.record("submitted", p.id, job_id="7", backend="local")
    rd.record("finished", p.id, job_id="7", backend="local", exit_code="0")
    atomic_write_json(rd.point(p).result, record(p, 50.0).to_dict())
    shutil.copy(DATA / "provenance" / "provenance-rank0.json", rd.point(p).provenance(0))
    assert json.loads(rd.point(p).provenance(0).read_text())["env"]["SLURM_CLUSTER_NAME"] == "mini"
    db = tmp_path / "h.sqlite"
    summarize(cli, rd.root, db)
    assert sqlite3.connect(db).execute("SELECT cluster FROM records").fetchall() == [("minicluster",)]
