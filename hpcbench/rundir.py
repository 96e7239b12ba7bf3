"""RunDir: the ONLY place that knows the paths under a run directory.

    runs/<sweep>-<UTC>/
      sweep.toml          the sweep file as it was read
      plan.json           the expanded points (hpcbench.plan/1)
      ledger.jsonl        one line per event: submitted, finished (hpcbench.ledger/1)
      summary.csv         written by summarize (one row per point x repeat)
      report/             summarize's report.md, plots, records.csv / records.json
      points/<label>-<id>/
        point.json        the point's parameters
        job.sh            the rendered job script (runnable with sbatch by hand)
        job-<jobid>.out   stdout / stderr of the job (.err)
        exitcode          the launcher's exit status, written by the job script / local backend
        result.json       hpcbench.result/1, from rank 0
        error-rank<N>.json  hpcbench.error/1, from each failing rank
        timeline.json     Horovod timeline (workload.timeline = true)
        checkpoint.pt     model + optimizer state from rank 0 (workload.checkpoint = true)
        provenance-rank<N>.json  hpcbench.provenance/1, from each rank (host, binding, versions, counters)
        submitit/         submitit's own folder, when that backend is used
"""

from __future__ import annotations

import fcntl
import json
import os
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from hpcbench import schema
from hpcbench.errors import ConfigError
from hpcbench.plan import Point


def utcnow(timespec: str = "seconds") -> str:
    return datetime.now(timezone.utc).isoformat(timespec=timespec)


def atomic_write_text(path: Path, text: str) -> None:
    """Write via a temporary file in the same folder and rename, so readers never see half a file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_json(path: Path, doc: Any) -> None:
    atomic_write_text(path, json.dumps(doc, indent=2, sort_keys=False) + "\n")


@dataclass(frozen=True)
class PointPaths:
    dir: Path

    @property
    def point_json(self) -> Path:
        return self.dir / "point.json"

    @property
    def job_script(self) -> Path:
        return self.dir / "job.sh"

    @property
    def result(self) -> Path:
        return self.dir / "result.json"

    @property
    def exitcode(self) -> Path:
        return self.dir / "exitcode"

    @property
    def submitit_dir(self) -> Path:
        return self.dir / "submitit"

    # Slurm substitutes %j; the local backend passes its own id.
    def stdout(self, job_id: str = "%j") -> Path:
        return self.dir / f"job-{job_id}.out"

    def stderr(self, job_id: str = "%j") -> Path:
        return self.dir / f"job-{job_id}.err"

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

    def logs(self, names: list[str] | None = None) -> list[Path]:
        """Every stdout/stderr file of the point, whichever backend wrote it."""
        names = self.listing() if names is None else names
        own = self._matching("job-", (".out", ".err"), names)
        if self.submitit_dir.name not in names:
            return own
        return sorted(own + self._matching("", ("_log.out", "_log.err"), None, self.submitit_dir))


class RunDir:
    def __init__(self, root: Path):
        self.root = Path(root).resolve()

    sweep_copy = property(lambda self: self.root / "sweep.toml")
    plan_json = property(lambda self: self.root / "plan.json")
    ledger = property(lambda self: self.root / "ledger.jsonl")
    summary_csv = property(lambda self: self.root / "summary.csv")
    report_dir = property(lambda self: self.root / "report")  # summarize's default --out
    points_root = property(lambda self: self.root / "points")

    def point(self, p: Point) -> PointPaths:
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
    def create(cls, root: Path, sweep_text: str, sweep_name: str, points: list[Point]) -> RunDir:
        rd = cls(root)
        if rd.plan_json.exists():
            raise ConfigError(
                f"{rd.root}: already holds a run (plan.json exists)",
                hint="choose another --run-dir, or leave it out to get a fresh timestamped one",
            )
        rd.root.mkdir(parents=True, exist_ok=True)
        atomic_write_text(rd.sweep_copy, sweep_text)
        atomic_write_json(
            rd.plan_json,
            {"schema": schema.tag(schema.PLAN), "sweep": sweep_name, "created_at": utcnow(),
             "points": [p.to_dict() for p in points]},
        )
        for p in points:
            atomic_write_json(rd.point(p).point_json, p.to_dict())
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

    def sweep_name(self) -> str:
        return str(schema.read_json(self.plan_json, schema.PLAN).get("sweep", self.root.name))

    def points(self) -> list[Point]:
        doc = schema.read_json(self.plan_json, schema.PLAN)
        return [Point.from_dict(d) for d in doc["points"]]

    def record(self, event: str, point_id: str, **fields: Any) -> None:
        """Append one ledger line. Lines are small and written under a lock, so concurrent writers are safe."""
        line = json.dumps({"schema": schema.tag(schema.LEDGER), "time": utcnow(), "event": event,
                           "point_id": point_id, **fields})
        with open(self.ledger, "a", encoding="utf-8") as f:
            fcntl.flock(f, fcntl.LOCK_EX)
            f.write(line + "\n")
            f.flush()
            fcntl.flock(f, fcntl.LOCK_UN)

    def events(self) -> Iterator[dict[str, Any]]:
        if not self.ledger.exists():
            return
        for n, line in enumerate(self.ledger.read_text(encoding="utf-8").splitlines(), 1):
            if line.strip():
                yield schema.check(json.loads(line), schema.LEDGER, f"{self.ledger}:{n}")

    def submissions(self) -> dict[str, dict[str, Any]]:
        """Latest submission attempt per point id ('submitted' or 'submit_failed')."""
        return {e["point_id"]: e for e in self.events() if e["event"] in ("submitted", "submit_failed")}

    def queued_job_ids(self) -> list[str]:
        """Job ids of this run that went through a scheduler queue (everything but the local backend)."""
        return [s["job_id"] for s in self.submissions().values() if s.get("backend") != "local" and s.get("job_id")]
