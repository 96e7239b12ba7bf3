"""The history of summarized runs: one embedded SQLite database that outlives the run directories.

    default: $XDG_DATA_HOME/hpcbench/history.sqlite (~/.local/share/... without XDG_DATA_HOME)
    $HPCBENCH_HISTORY or --history PATH: another file

Every ``hpcbench summarize`` records one row per measured point x repeat: the tidy row summarize already built
(every declared measurement parameter is a column), the cluster (its profile's name), the versions and the
hpcbench commit the ranks ran with (from their provenance files), the run it came from and the date it was
measured. A point that was run is measured, whether it gave a result or failed (the trend says its latest run
failed); a log with no measurement (NCCL lines only), a point never submitted or one still in the queue is not.
A run summarized again replaces its own rows (a point that finished since is updated, never doubled).

Concurrency: WAL journal and a busy timeout, and each summarize writes its rows in one IMMEDIATE
transaction, so two summarize processes at once both land whole. SQLite's locking needs a local
file system: on NFS, keep the database on a local disk (or one per user with --history).

The schema is versioned with ``PRAGMA user_version``; MIGRATIONS are applied in order, so a database
of any earlier version is brought up to date when it is opened.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hpcbench import __version__
from hpcbench.errors import HistoryError
from hpcbench.files import utcnow
from hpcbench.plan.fields import NAMES, POINT_KEY
from hpcbench.vocab import LIVE_STATES, NOT_MEASURED, NOT_SUBMITTED, RENAMED

if TYPE_CHECKING:  # the figures load when a report is made, not when history is queried
    from hpcbench.figures.samples import Sample

ENV = "HPCBENCH_HISTORY"
BUSY_TIMEOUT_S = 60.0  # a writer waits this long for another one before giving up
FILE_NAME = "history.sqlite"
# Value columns kept from the tidy row (the parameters are columns too, added from plan/fields.py).
VALUES = ("label", "job_id", "state", "ok", "reason", "world_size", "throughput", "throughput_ci95",
          "step_time_ms", "step_time_ci95_ms", "comm_fraction", "speedup", "efficiency")
NFS_HINT = ("put the history on a local disk (--history /local/path or $HPCBENCH_HISTORY): SQLite's locking "
            "is unreliable on NFS")


def default_path() -> Path:
    """$HPCBENCH_HISTORY, else $XDG_DATA_HOME/hpcbench/history.sqlite."""
    env = os.environ.get(ENV)
    if env:
        return Path(env).expanduser()
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "hpcbench" / FILE_NAME


# --- schema ---------------------------------------------------------------------------------------------------
def _v1(db: sqlite3.Connection) -> None:
    """The first schema: runs, and one row per point x repeat with its parameters as JSON."""
    db.execute("CREATE TABLE runs (run TEXT PRIMARY KEY, source TEXT NOT NULL, recorded_at TEXT NOT NULL)")
    db.execute("""CREATE TABLE records (
        run TEXT NOT NULL REFERENCES runs(run), point_key TEXT NOT NULL, repeat INTEGER NOT NULL,
        point_id TEXT, cluster TEXT, date TEXT NOT NULL, state TEXT, ok INTEGER, throughput REAL,
        step_time_ms REAL, reason TEXT, params TEXT NOT NULL,
        PRIMARY KEY (run, point_key, repeat))""")


def _v2(db: sqlite3.Connection) -> None:
    """Versions and hpcbench commit per row, more measured values, every parameter a column; trend indexes."""
    for col, kind in (("versions", "TEXT"), ("hpcbench_commit", "TEXT"), ("hpcbench_version", "TEXT"),
                      ("label", "TEXT"), ("job_id", "TEXT"), ("world_size", "INTEGER"), ("throughput_ci95", "REAL"),
                      ("step_time_ci95_ms", "REAL"), ("comm_fraction", "REAL"), ("speedup", "REAL"),
                      ("efficiency", "REAL")):
        db.execute(f'ALTER TABLE records ADD COLUMN "{col}" {kind}')
    _param_columns(db)
    db.execute("UPDATE records SET versions = '{}' WHERE versions IS NULL")
    db.execute("CREATE INDEX records_trend ON records(point_key, date)")
    db.execute("CREATE INDEX records_date ON records(date)")
    db.execute("CREATE INDEX records_model ON records(model, date)")


def _v3(db: sqlite3.Connection) -> None:
    """The kind renamed (vocab.RENAMED: allreduce -> collective), and `model` no longer set to it: old rows take
    the new words, and the point keys they give, so that a trend runs on across the rename."""
    for old, new in RENAMED.items():
        rows = db.execute("SELECT rowid, cluster, params FROM records WHERE kind = ?", (old,)).fetchall()
        for rowid, cluster, text in rows:
            params = {**json.loads(text), "kind": new, "model": None}
            db.execute("UPDATE records SET kind = ?, model = NULL, params = ?, point_key = ? WHERE rowid = ?",
                       (new, json.dumps(params, default=str), point_key(cluster, params), rowid))


MIGRATIONS: tuple[Callable[[sqlite3.Connection], None], ...] = (_v1, _v2, _v3)
SCHEMA_VERSION = len(MIGRATIONS)


def _param_columns(db: sqlite3.Connection) -> None:
    """One column per declared parameter (plan/fields.py), filled from the params JSON where it is new.

    Run after the migrations too: a parameter declared after a database was made gets its column then.
    """
    have = {r[1] for r in db.execute("PRAGMA table_info(records)")}
    for name in NAMES:
        if name not in have:
            db.execute(f'ALTER TABLE records ADD COLUMN "{name}"')
            db.execute(f"UPDATE records SET \"{name}\" = json_extract(params, '$.{name}')")


def _migrate(db: sqlite3.Connection, path: Path) -> None:
    version = db.execute("PRAGMA user_version").fetchone()[0]
    if version > SCHEMA_VERSION:
        raise HistoryError(f"{path}: history schema version {version} is newer than this hpcbench's "
                           f"({SCHEMA_VERSION})", hint="upgrade hpcbench, or use another --history file")
    have = {r[1] for r in db.execute("PRAGMA table_info(records)")}
    if version == SCHEMA_VERSION and set(NAMES) <= have:
        return
    db.execute("BEGIN IMMEDIATE")  # one migrator at a time; the others wait, then find it done
    try:
        version = db.execute("PRAGMA user_version").fetchone()[0]
        for n in range(version, SCHEMA_VERSION):
            MIGRATIONS[n](db)
            db.execute(f"PRAGMA user_version = {n + 1}")
        _param_columns(db)
        db.execute("COMMIT")
    except BaseException:
        db.execute("ROLLBACK")
        raise


def _fail(path: Path, e: sqlite3.Error) -> HistoryError:
    text = str(e)
    hint = "check that the file is an hpcbench history database, or choose another with --history"
    if "locked" in text or "busy" in text:
        hint = f"another hpcbench held it for {BUSY_TIMEOUT_S:.0f} s; try again, and {NFS_HINT}"
    elif "disk" in text or "full" in text or "I/O" in text:
        hint = f"free space where it lives, or {NFS_HINT}"
    return HistoryError(f"history {path}: {text}", hint=hint)


def connect(path: Path | None = None, create: bool = True) -> sqlite3.Connection:
    """Open (and create, or migrate) the history database: WAL, busy timeout, autocommit outside BEGIN."""
    path = Path(path) if path else default_path()
    if not create and not path.is_file():
        raise HistoryError(f"{path}: no history there yet",
                           hint="'hpcbench summarize RUN' records runs there; or give --history PATH")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        db = sqlite3.connect(path, timeout=BUSY_TIMEOUT_S, isolation_level=None)
        db.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
        db.execute("PRAGMA journal_mode = WAL")
        _migrate(db, path)
    except sqlite3.Error as e:
        raise _fail(path, e) from None
    except OSError as e:
        raise HistoryError(f"history {path}: {e.strerror or e}", hint=f"choose a writable place; {NFS_HINT}") from None
    return db


# --- recording ------------------------------------------------------------------------------------------------
def point_key(cluster: str | None, params: dict[str, Any]) -> str:
    """One point of a study on one cluster, over its runs: the report's point key (series and layout)."""
    doc = json.dumps([cluster, *(params.get(n) for n in POINT_KEY)], default=str)
    return hashlib.sha1(doc.encode()).hexdigest()[:16]


def _provenance_facts(sample: Sample) -> tuple[dict[str, Any], str | None, str | None]:
    """(versions, hpcbench commit, date measured) from the ranks' provenance files; empty where there are none."""
    for doc in sample.provenance or []:
        soft = doc.get("software") or {}
        versions = {k: soft.get(k) for k in ("torch", "torchvision", "horovod", "mpi", "python")}
        versions.update(nccl=doc.get("nccl"), cuda=doc.get("cuda"), driver=doc.get("driver"))
        date = doc.get("finished_at") or doc.get("started_at")
        return {k: v for k, v in versions.items() if v}, doc.get("git_commit"), date
    return {}, None, None


def measured(s: Sample) -> bool:
    """A run of the point was made and is over: it has a result, or the reason it has none."""
    return s.state not in (NOT_MEASURED, NOT_SUBMITTED, *LIVE_STATES)


def rows_of(samples: Iterable[Sample], tidy: Iterable[dict[str, Any]], runs: dict[str, str],
            now: str) -> list[dict[str, Any]]:
    """The history rows of summarize's measured samples and their tidy rows. ``runs``: source -> run id."""
    out = []
    for s, t in zip(samples, tidy):
        if not measured(s):
            continue
        versions, commit, date = _provenance_facts(s)
        params = {n: t.get(n) for n in NAMES}
        row = {"run": runs.get(s.source, s.source), "source": s.source, "point_key": point_key(s.cluster, params),
               "repeat": params.get("repeat") or 0, "point_id": s.point_id, "cluster": s.cluster,
               "date": date or now, "params": json.dumps(params, default=str),
               "versions": json.dumps(versions, sort_keys=True), "hpcbench_commit": commit,
               "hpcbench_version": __version__, **{v: t.get(v) for v in VALUES}, **params}
        row["ok"] = int(bool(row["ok"]))
        out.append(row)
    return out


def record(rows: list[dict[str, Any]], path: Path | None = None) -> Path:
    """Write rows in one transaction (a run summarized again replaces its own rows). Returns the file."""
    path = Path(path) if path else default_path()
    if not rows:
        return path
    db = connect(path)
    cols = ("run", "point_key", "repeat", "point_id", "cluster", "date", "params", "versions", "hpcbench_commit",
            "hpcbench_version", *VALUES, *NAMES)
    cols = tuple(dict.fromkeys(cols))
    names = ", ".join(f'"{c}"' for c in cols)
    sql = f"INSERT OR REPLACE INTO records ({names}) VALUES ({', '.join('?' * len(cols))})"
    now = utcnow("microseconds")
    runs = {r["run"]: r["source"] for r in rows}
    try:
        db.execute("BEGIN IMMEDIATE")
        db.executemany("INSERT OR REPLACE INTO runs (run, source, recorded_at) VALUES (?, ?, ?)",
                       [(run, src, now) for run, src in runs.items()])
        # the run's rows replaced whole: a point recorded earlier that is no longer measured leaves none behind
        db.executemany("DELETE FROM records WHERE run = ?", [(run,) for run in runs])
        db.executemany(sql, [tuple(_plain(r.get(c)) for c in cols) for r in rows])
        db.execute("COMMIT")
    except sqlite3.Error as e:
        if db.in_transaction:
            db.execute("ROLLBACK")
        raise _fail(path, e) from None
    finally:
        db.close()
    return path


def _plain(v: Any) -> Any:
    """SQLite stores None, numbers and text; anything else as its text."""
    return v if v is None or isinstance(v, (int, float, str)) else str(v)


def record_report(report: Any, path: Path | None = None) -> tuple[Path, int]:
    """Record a summarize Report: every sample with its tidy row; a run directory's run id names its run."""
    runs = {str(rd.root): rd.run_id() or str(rd.root) for rd in report.inputs.run_dirs}
    rows = rows_of(report.inputs.samples, report.tidy(), runs, utcnow("microseconds"))
    return record(rows, path), len(rows)
