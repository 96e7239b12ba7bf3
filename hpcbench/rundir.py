"""RunDir: the ONLY place that knows the paths under a run directory.

    runs/<sweep>-<UTC>/
      sweep.toml          the sweep file as it was read
      sweep_path.txt      where that file was (relative paths in it are relative to its folder)
      cluster.txt         the path of the cluster profile file the sweep used, if any
      plan.json           the expanded points (hpcbench.plan/2; /1 is read too), the cluster profile's name,
                          and dry_run = true when `hpcbench plan` (sweep --dry-run) made it
      excluded.json       nodes kept out of its jobs (--exclude-nodes) and why (hpcbench.excluded/1)
      ledger.jsonl        one line per event (hpcbench.ledger/1): submitting (the intent, written before
                          sbatch), submitted, submit_failed, submit_lost, finished (a point run before
                          submit returned), ended (the scheduler's word on a job it says is over, kept by
                          status), attempt_ended, cancelled; each names the backend by its registered name
      .lock               flock'ed by the one hpcbench that submits to this run; holds its pid
      summary.csv         written by summarize (one row per point x repeat)
      report/             summarize's report.md, plots, records.csv / records.json
      packs/pack-<n>.sh   with pack = true: one allocation running many points as job steps
      points/<label>-<id>/
        point.json        the point's parameters
        job.sh            the rendered job script (runnable with sbatch by hand)
        job-<jobid>.out   stdout / stderr of the job (.err)
        exitcode          the launcher's exit status, written by the job script / local backend
        attempts/<jobid>/ what an earlier attempt left (result, exitcode, error records), moved
                          aside when the point is resubmitted
        result.json       hpcbench.result/4 (readers take /1 to /3 too), from rank 0
        error-rank<N>.json  hpcbench.error/1, from each failing rank
        timeline.json     Horovod timeline (workload.timeline = true)
        checkpoint.pt     model + optimizer state from rank 0 (workload.checkpoint = true)
        provenance-rank<N>.json  hpcbench.provenance/2, from each rank (host, binding, versions, counters)
        submitit/         submitit's own folder, when that backend is used
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import re
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from functools import cached_property
from pathlib import Path
from typing import Any

from hpcbench import records
from hpcbench.errors import ConfigError, NoSpace, RunDirBusy
from hpcbench.files import FULL, atomic_write_text, utcnow, write_new
from hpcbench.plan.expand import Point

_SAFE_NAME = re.compile(r"[A-Za-z0-9_.-]+")


@dataclass(frozen=True)
class PointPaths:
    dir: Path

    # The names of the files a job script refers to; rendering 10,000 scripts joins them as text.
    JOB_SCRIPT = "job.sh"
    EXITCODE = "exitcode"

    @staticmethod
    def stdout_name(job_id: str = "%j") -> str:  # Slurm substitutes %j; the local backend passes its own id
        return f"job-{job_id}.out"

    @staticmethod
    def stderr_name(job_id: str = "%j") -> str:
        return f"job-{job_id}.err"

    @property
    def point_json(self) -> Path:
        return self.dir / "point.json"

    @property
    def job_script(self) -> Path:
        return self.dir / self.JOB_SCRIPT

    @property
    def result(self) -> Path:
        return self.dir / "result.json"

    @property
    def exitcode(self) -> Path:
        return self.dir / self.EXITCODE

    @property
    def submitit_dir(self) -> Path:
        return self.dir / "submitit"

    def stdout(self, job_id: str = "%j") -> Path:
        return self.dir / self.stdout_name(job_id)

    def stderr(self, job_id: str = "%j") -> Path:
        return self.dir / self.stderr_name(job_id)

    def error(self, rank: int) -> Path:
        return self.dir / f"error-rank{rank}.json"

    @property
    def timeline(self) -> Path:  # Horovod's timeline (HOROVOD_TIMELINE), Chrome trace JSON
        return self.dir / "timeline.json"

    @property
    def checkpoint(self) -> Path:  # written by rank 0 at the end when the sweep asks for it
        return self.dir / "checkpoint.pt"

    # Listing the folder once and matching names is ~10x faster than pathlib's glob, which
    # matters when summarize reads a run of 10,000 points.
    # `names` (from listing()) lets a caller that asks several questions list the folder once.
    def listing(self, folder: Path | None = None) -> list[str]:
        try:
            return sorted(os.listdir(folder or self.dir))
        except OSError:
            return []

    def _matching(self, prefix: str, suffixes: tuple[str, ...], names: list[str] | None,
                  folder: Path | None = None) -> list[Path]:
        folder = folder or self.dir
        names = self.listing(folder) if names is None else names
        return [folder / n for n in names if n.startswith(prefix) and n.endswith(suffixes)]

    def errors(self, names: list[str] | None = None) -> list[Path]:
        return self._matching("error-rank", (".json",), names)

    def provenance(self, rank: int) -> Path:
        return self.dir / f"provenance-rank{rank}.json"

    def provenances(self, names: list[str] | None = None) -> list[Path]:
        """Every rank's provenance file, in rank order."""
        return sorted(self._matching("provenance-rank", (".json",), names),
                      key=lambda p: int(p.stem.rpartition("rank")[2] or 0))

    def logs(self, names: list[str] | None = None, job_id: str | None = None) -> list[Path]:
        """The stdout/stderr files of one job of the point (every job when None), whichever backend wrote them."""
        names = self.listing() if names is None else names
        own = self._matching(f"job-{job_id}." if job_id else "job-", (".out", ".err"), names)
        if self.submitit_dir.name not in names:
            return own
        return sorted(own + self._matching(f"{job_id}_" if job_id else "", ("_log.out", "_log.err"), None,
                                           self.submitit_dir))

    def logged_job_ids(self) -> set[str]:
        """Job ids that left an output file here: proof that a job of this point started."""
        return {m.group(1) for n in self.listing() if (m := re.fullmatch(r"job-(\d+)\.out", n))}

    def archive(self, job_id: str) -> None:
        """Move an earlier attempt's outcome aside, so a resubmitted point starts from a clean folder."""
        dest = self.dir / "attempts" / (job_id if _SAFE_NAME.fullmatch(job_id or "") and job_id[0] != "." else "unknown")
        for f in [self.result, self.exitcode, *self.errors()]:
            if f.exists():
                dest.mkdir(parents=True, exist_ok=True)
                os.replace(f, dest / f.name)


class RunDir:
    def __init__(self, root: Path):
        self.root = Path(root).resolve()
        # The ledger is append-only, so (inode, size, mtime) says whether the last parse still holds;
        # one status poll asks for it several times (queued ids, then every point's state).
        self._events_key: tuple[int, int, int] | None = None
        self._events: list[dict[str, Any]] = []

    sweep_copy = property(lambda self: self.root / "sweep.toml")
    # The original sweep file's absolute path: resubmit parses the copy, but an inline [cluster]'s
    # relative module_use means the folder beside the original, not the run directory.
    sweep_ref = property(lambda self: self.root / "sweep_path.txt")
    # The cluster profile file the sweep used (its absolute path), so resubmit renders with it again.
    cluster_ref = property(lambda self: self.root / "cluster.txt")
    plan_json = property(lambda self: self.root / "plan.json")
    excluded_json = property(lambda self: self.root / "excluded.json")  # nodes kept out (--exclude-nodes), and why
    ledger = property(lambda self: self.root / "ledger.jsonl")
    summary_csv = property(lambda self: self.root / "summary.csv")
    report_dir = property(lambda self: self.root / "report")  # summarize's default --out
    points_root = property(lambda self: self.root / "points")
    lock_file = property(lambda self: self.root / ".lock")
    packs_root = property(lambda self: self.root / "packs")

    def pack_script(self, n: int) -> Path:
        return self.packs_root / f"pack-{n}.sh"

    def pack_stdout(self, n: int, job_id: str = "%j") -> Path:
        return self.packs_root / f"pack-{n}-{job_id}.out"

    @contextmanager
    def lock(self) -> Iterator[None]:
        """Hold the run's submit lock. A second hpcbench on the same run is refused, not queued behind.

        flock dies with its process, so a submitter killed with -9 leaves no stale lock behind.
        """
        self.root.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.lock_file, os.O_RDWR | os.O_CREAT, 0o666)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = os.pread(fd, 64, 0).decode(errors="replace").strip() or "?"
                raise RunDirBusy(
                    f"{self.root}: another hpcbench (pid {holder}) is submitting to this run directory",
                    hint="wait for it to finish (hpcbench status RUN_DIR --wait), or use another --run-dir",
                ) from None
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
            yield
        finally:
            os.close(fd)  # releases the flock

    def point(self, p: Point) -> PointPaths:
        # A plan.json edited by hand must not send a point's files outside the run directory.
        if not _SAFE_NAME.fullmatch(p.dirname) or p.dirname.startswith("."):
            raise ConfigError(f"{self.plan_json}: point folder {p.dirname!r} would leave the run directory")
        return PointPaths(self.points_root / p.dirname)

    @staticmethod
    def default_path(runs_root: Path, sweep_name: str) -> Path:
        stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
        path = Path(runs_root) / f"{sweep_name}-{stamp}"
        n = 2
        while path.exists():
            path = Path(runs_root) / f"{sweep_name}-{stamp}-{n}"
            n += 1
        return path

    @classmethod
    def create(cls, root: Path, sweep_text: str, sweep_name: str, points: list[Point], cluster: str | None = None,
               dry_run: bool = False, order: dict[str, Any] | None = None) -> RunDir:
        """A new run directory; ``points`` in the order they are submitted, ``order`` says how that was drawn.
        ``cluster``: the profile's name (history and references name the cluster by it); ``dry_run``: made by
        `hpcbench plan`, to be read but not summarized until a sweep submits it."""
        rd = cls(root)
        if rd.plan_json.exists():
            raise ConfigError(
                f"{rd.root}: already holds a run (plan.json exists)",
                hint="choose another --run-dir, or leave it out to get a fresh timestamped one",
            )
        rd.root.mkdir(parents=True, exist_ok=True)
        atomic_write_text(rd.sweep_copy, sweep_text)
        rd.points_root.mkdir(exist_ok=True)
        dicts = [p.to_dict() for p in points]
        for p, d in zip(points, dicts):
            # New files in new folders: no reader can see them half-written before plan.json exists.
            rd.point(p).dir.mkdir(exist_ok=True)
            write_new(rd.point(p).point_json, json.dumps(d, indent=None) + "\n")
        doc = {"schema": records.tag(records.PLAN), "sweep": sweep_name, "created_at": utcnow(),
               "run_id": uuid.uuid4().hex[:12], **({"cluster": cluster} if cluster else {}),
               **({"dry_run": True} if dry_run else {}), **({"order": order} if order else {}), "points": dicts}
        # One point per line: readable, and json's C encoder (indent= falls back to pure Python).
        head = json.dumps({k: v for k, v in doc.items() if k != "points"})[:-1]
        body = ",\n  ".join(json.dumps(d) for d in dicts)
        atomic_write_text(rd.plan_json, f'{head}, "points": [\n  {body}\n]}}\n')
        rd.__dict__["plan_doc"] = doc
        return rd

    @classmethod
    def open(cls, root: Path) -> RunDir:
        rd = cls(root)
        if not rd.plan_json.is_file():
            raise ConfigError(
                f"{root}: not an hpcbench run directory (no plan.json)",
                hint="give a folder made by 'hpcbench sweep', e.g. runs/<sweep>-<timestamp>",
            )
        return rd

    @cached_property
    def plan_doc(self) -> dict[str, Any]:
        # plan.json never changes once written (a re-run must have the same points), so read it once.
        return records.read_json(self.plan_json, records.PLAN)

    def sweep_base(self) -> Path:
        """The folder the sweep's relative paths are relative to (the run's own, for runs that predate sweep_path.txt)."""
        try:
            return Path(self.sweep_ref.read_text(encoding="utf-8").strip()).parent
        except OSError:
            return self.root

    def sweep_name(self) -> str:
        return str(self.plan_doc.get("sweep", self.root.name))

    def cluster_name(self) -> str | None:
        """The name of the cluster profile the sweep used; for a run older than plan.json's key, its file's stem
        (cluster.txt); None without a named profile."""
        name = self.plan_doc.get("cluster")
        if name:
            return str(name)
        try:
            return Path(self.cluster_ref.read_text(encoding="utf-8").strip()).stem or None
        except OSError:
            return None

    def dry_run(self) -> bool:
        """Made by `hpcbench plan` and never submitted since (a sweep given its --run-dir makes it a run)."""
        return bool(self.plan_doc.get("dry_run")) and not self.submissions()

    def run_id(self) -> str:
        """Random id of this run, put in every job's --comment so a re-run can find jobs it never recorded."""
        return str(self.plan_doc.get("run_id", ""))

    def job_comment(self, point_id: str) -> str:
        return f"hpcbench:{self.run_id()}:{point_id}"

    def comment_point(self, comment: str) -> str | None:
        """The point id in a job comment made by job_comment for this run, else None."""
        prefix = f"hpcbench:{self.run_id()}:"
        return comment[len(prefix):] if comment.startswith(prefix) else None

    def points(self) -> list[Point]:
        return list(self._points)

    @cached_property
    def _points(self) -> tuple[Point, ...]:
        # Points are frozen and plan.json never changes: one poll asks twice (the jobs to ask about, the states).
        return tuple(Point.from_dict(d) for d in self.plan_doc["points"])

    def record(self, event: str, point_id: str, **fields: Any) -> None:
        """Append one ledger line. Lines are small and written under a lock, so concurrent writers are safe."""
        line = json.dumps({"schema": records.tag(records.LEDGER), "time": utcnow(), "event": event,
                           "point_id": point_id, **fields})
        data = (line + "\n").encode("utf-8")
        fd = os.open(self.ledger, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            size = os.fstat(fd).st_size
            try:  # one write of the whole line; a short one (a full disk) is taken back, never left torn
                if os.write(fd, data) != len(data):
                    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            except OSError as e:
                os.ftruncate(fd, size)
                if e.errno in FULL:
                    raise NoSpace(self.ledger, e.strerror) from None
                raise
        finally:
            os.close(fd)  # releases the flock

    def events(self) -> Iterator[dict[str, Any]]:
        try:
            st = self.ledger.stat()
        except FileNotFoundError:
            return iter(())
        key = (st.st_ino, st.st_size, st.st_mtime_ns)
        if key != self._events_key:
            text = self.ledger.read_text(encoding="utf-8")
            # Lines are written whole (record); a last line without its newline is one still being written.
            whole = text if text.endswith("\n") else text[: text.rfind("\n") + 1]
            self._events = [records.check(json.loads(line), records.LEDGER, f"{self.ledger}:{n}")
                            for n, line in enumerate(whole.splitlines(), 1) if line.strip()]
            self._events_key = key
        return iter(self._events)

    def submissions(self) -> dict[str, dict[str, Any]]:
        """Latest submission attempt per point id.

        Its event is 'submitted', 'submit_failed', or 'submitting' when the submitter died between
        its intent and sbatch's answer (the re-run settles those). A 'submit_lost' intent (no job was
        found for it) counts as never submitted.
        """
        latest: dict[str, dict[str, Any]] = {}
        for e in self.events():
            if e["event"] in SUBMIT_EVENTS:
                latest[e["point_id"]] = e
        return {k: e for k, e in latest.items() if e["event"] != "submit_lost"}

    def recorded_job_ids(self) -> set[str]:
        """Every job id the ledger ever named for this run (older attempts included)."""
        return {str(e["job_id"]) for e in self.events() if e.get("job_id")}


SUBMIT_EVENTS = ("submitting", "submitted", "submit_failed", "submit_lost")
