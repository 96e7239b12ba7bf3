"""Read what summarize is given: hpcbench run directories, or logs of jobs hpcbench did not launch.

A run directory gives one Sample per planned point (failed, missing and running ones included).
A foreign log gives the points it shows, with what had to be inferred said in ``Sample.inferred``.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hpcbench import records
from hpcbench.errors import ConfigError, HpcbenchError, NoSuchFile, SchemaError
from hpcbench.figures.foreign import log_samples
from hpcbench.figures.samples import Sample, from_record
from hpcbench.figures.wire import host_names
from hpcbench.plan.cluster import Used, used
from hpcbench.rundir import PointPaths, RunDir

if TYPE_CHECKING:
    from hpcbench.states import PointState

LOG_SUFFIXES = (".log", ".out", ".err", ".txt")


@dataclass
class Inputs:
    samples: list[Sample] = field(default_factory=list)
    run_dirs: list[RunDir] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # what was inferred or could not be read
    dry_runs: list[RunDir] = field(default_factory=list)  # made by `hpcbench plan`, never submitted: left out

    @property
    def partial(self) -> bool:
        return any(not s.final for s in self.samples)

    def dry_run_note(self) -> str:
        """One line for the dry runs left out (their points were never submitted: not failures), or ''."""
        if not self.dry_runs:
            return ""
        n, last = sum(len(rd.points()) for rd in self.dry_runs), self.dry_runs[-1]
        shown = ", ".join(str(rd.root) for rd in self.dry_runs[:3]) + (" ..." if len(self.dry_runs) > 3 else "")
        return (f"left out {len(self.dry_runs)} dry run(s) ('hpcbench plan': {n} points planned, nothing submitted): "
                f"{shown}; to run one: hpcbench sweep {_sweep_file(last)} --run-dir {last.root}")


#: a run's point states, read for summarize: from the disk (states.collect), or `summarize --refresh`'s, which
#: asks the schedulers first and keeps their word in the ledger (report/ itself never asks them)
StatesOf = Callable[[RunDir], "list[PointState]"]


def load(paths: list[str | Path], cluster: str | None = None, states: StatesOf | None = None) -> Inputs:
    """Every path is a run directory, a log file, or a folder of runs and log files; ``states`` reads each run's
    point states (default: from the disk)."""
    out = Inputs()
    if not paths:
        raise ConfigError("summarize: no PATH given", hint="give a run directory or log files")
    for raw in paths:
        path = Path(raw)
        if (path / "plan.json").is_file():
            _add_run(out, path, states)
        elif path.is_dir():
            # A folder of runs (runs/) and loose logs alike: each run is read as a run, and the files
            # inside it (job logs, sweep_path.txt, cluster.txt) only through it, never as foreign logs.
            runs, files = _walk(path)
            if not runs and not files:
                raise ConfigError(f"{path}: not an hpcbench run directory (no plan.json), nor a folder of runs or "
                                  f"logs ({', '.join(LOG_SUFFIXES)})", hint="give a run directory or log files")
            for r in runs:
                _add_run(out, r, states)
            for f in files:
                out.samples += log_samples(f, out.notes)
        elif path.is_file() and path.suffix == ".toml":
            raise _not_a_log(path)
        elif path.is_file():
            out.samples += log_samples(path, out.notes)
        else:
            raise NoSuchFile(path, "file or directory", hint="give a run directory or log files")
    if out.dry_runs and not out.samples:
        first = out.dry_runs[0]
        raise ConfigError(f"{first.root}: a dry run ('hpcbench plan'): its {len(first.points())} job scripts were "
                          f"written, nothing was submitted, so there is nothing to read yet"
                          + (f" (nor in {len(out.dry_runs) - 1} more)" if len(out.dry_runs) > 1 else ""),
                          hint=f"read the scripts under {first.points_root}; submit them with: hpcbench sweep "
                               f"{_sweep_file(first)} --run-dir {first.root}")
    if cluster:
        for s in out.samples:
            s.cluster = cluster
    return out


def _sweep_file(rd: RunDir) -> str:
    """The sweep file a run was made from (its copy when the original's path was not kept)."""
    try:
        return rd.sweep_ref.read_text(encoding="utf-8").strip() or str(rd.sweep_copy)
    except OSError:
        return str(rd.sweep_copy)


def _add_run(out: Inputs, path: Path, states: StatesOf | None) -> None:
    rd = RunDir.open(path)
    if rd.dry_run():  # planned only: its points are not failures, and no run of them was made
        out.dry_runs.append(rd)
        return
    out.run_dirs.append(rd)
    out.samples += run_samples(rd, None if states is None else states(rd))


def _not_a_log(path: Path) -> ConfigError:
    """A TOML file given to summarize: a sweep names its runs; anything else is said to be no log."""
    from hpcbench.plan.spec import parse

    try:
        name = parse(path.read_text(encoding="utf-8"), str(path)).sweep.name
    except (HpcbenchError, OSError, UnicodeDecodeError):
        return ConfigError(f"{path}: a TOML file, not a run directory or a log",
                           hint="give a run directory made by 'hpcbench sweep', or log files")
    runs = sorted(p.parent for p in Path("runs").glob(f"{name}-*/plan.json"))
    if runs:
        listed = ", ".join(str(r) for r in runs[-3:]) + (f" (and {len(runs) - 3} older)" if len(runs) > 3 else "")
        return ConfigError(f"{path}: this is a sweep file; its runs are {listed}",
                           hint=f"summarize a run: hpcbench summarize {runs[-1]}")
    return ConfigError(f"{path}: this is a sweep file, and ./runs holds no run of it",
                       hint=f"run it first: hpcbench sweep {path}, then hpcbench summarize runs/{name}-<time>")


def _walk(folder: Path) -> tuple[list[Path], list[Path]]:
    """(run directories, loose log files) under ``folder``; a run directory is not descended into."""
    runs, files = [], []
    for root, dirs, names in os.walk(folder):
        if "plan.json" in names:
            runs.append(Path(root))
            dirs[:] = []
            continue
        files += [f for n in names if (f := Path(root) / n).suffix in LOG_SUFFIXES and f.is_file()]
    return sorted(runs), sorted(files)


def _provenance(paths: PointPaths, names: list[str]) -> list[dict[str, Any]]:
    docs = []
    for f in paths.provenances(names):
        try:
            docs.append(records.read_json(f, records.PROVENANCE))
        except (SchemaError, OSError):
            continue  # the environment table shows the value as missing; the point itself is still valid
    return docs


def _cluster(prov: list[dict[str, Any]]) -> str | None:
    for d in prov:
        name = (d.get("env") or {}).get("SLURM_CLUSTER_NAME")
        if name:
            return str(name)
    return None


def run_samples(rd: RunDir, states: list[PointState] | None = None) -> list[Sample]:
    """One Sample per planned point of a run, whatever its state; its parameters are the plan's.

    The states are what the disk says (records, exit statuses, the ledger) unless given: a summary never asks
    the scheduler. `hpcbench status`, `--wait` and `summarize --refresh` ask it and keep its word in the ledger.
    """
    from hpcbench.states import collect

    samples = []
    root = str(rd.root)
    cluster = rd.cluster_name()  # the profile's name; Slurm's ClusterName (often a default) where there is none
    for st in collect(rd) if states is None else states:
        p, paths = st.point, rd.point(st.point)
        names = paths.listing()
        prov = _provenance(paths, names)
        # the machines by their kernels' boot ids: two namespaced "nodes" of one host are one host
        machines = {"hosts": host_names(prov)} if host_names(prov) else {}
        common: dict[str, Any] = {**machines, **p.params(), "env": p.env, "slurm": p.slurm, "state": st.state, "final": st.final,
                                  "logs": paths.logs(names),
                                  "provenance": prov, "cluster": cluster or _cluster(prov), "job_id": st.job_id,
                                  "reason": st.explained}
        if st.ok and st.result is not None:
            samples.append(from_record(st.result, root, **common))
        else:
            samples.append(Sample(source=root, label=p.label, ok=False, point_id=p.id, world_size=p.world_size,
                                  **common))
    return samples


@cache
def hunts_near(source: str) -> tuple[HuntSeen, ...]:
    """The hunts beside the run directory ``source`` (``hpcbench hunt`` writes RUNS_ROOT/hunt-<time>/hunt.json),
    newest first: explain cites one that covered a node it finds slow. None for a log."""
    root = Path(source)
    if not root.is_dir():
        return ()
    from hpcbench.hunt.record import read

    found = []
    for path in sorted(root.parent.glob("hunt*/hunt.json"), reverse=True):
        try:
            doc = read(path)
        except HpcbenchError:
            continue  # a broken hunt record is no evidence; `hpcbench hunt` rewrites it
        found.append(HuntSeen(str(path), tuple(doc.get("nodes", [])), tuple(
            (s["node"], s["kind"], s["evidence"]) for s in doc.get("suspects", []))))
    return tuple(found)


@dataclass(frozen=True)
class HuntSeen:
    path: str
    nodes: tuple[str, ...]
    suspects: tuple[tuple[str, str, str], ...]  # (node, kind, evidence)


def hunt_said(hunts: tuple[HuntSeen, ...], node: str | None) -> str:
    """What the newest hunt that covered ``node`` found there, as a clause (it is the evidence to act on)."""
    for h in hunts:
        if node in h.nodes:
            mine = [f"{kind}: {evidence}" for n, kind, evidence in h.suspects if n == node]
            return (f"; the hunt {h.path} named {node} ({mine[0]})" if mine else
                    f"; the hunt {h.path} found {node} healthy, so look at what ran beside this job")
    return ""


@cache
def profile_of(source: str) -> Used | None:
    """The cluster profile the run directory ``source`` used (its cluster.txt), with the keys it set that the run's
    sweep did not; None for a log, a run without a profile, or a profile that cannot be read."""
    rd = RunDir(Path(source))
    try:
        return used(Path(rd.cluster_ref.read_text().strip()), rd.sweep_copy)
    except OSError:
        return None
