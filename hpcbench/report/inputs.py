"""Read what summarize is given: hpcbench run directories, or logs of jobs hpcbench did not launch.

A run directory gives one Sample per planned point (failed, missing and running ones included).
A foreign log gives the points it shows, with what had to be inferred said in ``Sample.inferred``.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hpcbench import records
from hpcbench.errors import ConfigError, HpcbenchError, NoSuchFile, SchemaError
from hpcbench.records import AllreduceRow, ResultRecord
from hpcbench.report.samples import Sample, from_record
from hpcbench.rundir import PointPaths, RunDir
from hpcbench.vocab import UNPARSABLE

LOG_SUFFIXES = (".log", ".out", ".err", ".txt")
_HEAD_BYTES = 256 * 1024  # benchmark banners (model, batch size) sit at the top of a log
_MODEL = re.compile(r"\bModel: (\S+)")
_BATCH = re.compile(r"\bBatch size: (\d+)")


@dataclass
class Inputs:
    samples: list[Sample] = field(default_factory=list)
    run_dirs: list[RunDir] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # what was inferred or could not be read

    @property
    def partial(self) -> bool:
        return any(not s.final for s in self.samples)


def load(paths: list[str | Path], cluster: str | None = None) -> Inputs:
    """Every path is a run directory, a log file, or a folder of runs and log files."""
    out = Inputs()
    if not paths:
        raise ConfigError("summarize: no PATH given", hint="give a run directory or log files")
    for raw in paths:
        path = Path(raw)
        if (path / "plan.json").is_file():
            rd = RunDir.open(path)
            out.run_dirs.append(rd)
            out.samples += run_samples(rd)
        elif path.is_dir():
            # A folder of runs (runs/) and loose logs alike: each run is read as a run, and the files
            # inside it (job logs, sweep_path.txt, cluster.txt) only through it, never as foreign logs.
            runs, files = _walk(path)
            if not runs and not files:
                raise ConfigError(f"{path}: not an hpcbench run directory (no plan.json), nor a folder of runs or "
                                  f"logs ({', '.join(LOG_SUFFIXES)})", hint="give a run directory or log files")
            for r in runs:
                rd = RunDir.open(r)
                out.run_dirs.append(rd)
                out.samples += run_samples(rd)
            for f in files:
                out.samples += log_samples(f, out.notes)
        elif path.is_file():
            out.samples += log_samples(path, out.notes)
        else:
            raise NoSuchFile(path, "file or directory", hint="give a run directory or log files")
    if cluster:
        for s in out.samples:
            s.cluster = cluster
    return out


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


def run_samples(rd: RunDir) -> list[Any]:
    """One Sample per planned point of a run, whatever its state; its parameters are the plan's."""
    from hpcbench.submit.status import collect, scheduler_view

    samples = []
    root = str(rd.root)
    for st in collect(rd, scheduler_view(rd)):
        p, paths = st.point, rd.point(st.point)
        names = paths.listing()
        prov = _provenance(paths, names)
        common: dict[str, Any] = {**p.params(), "state": st.state, "final": st.final, "logs": paths.logs(names),
                                  "provenance": prov, "cluster": _cluster(prov), "job_id": st.job_id,
                                  "reason": st.reason}
        if st.ok and st.result is not None:
            samples.append(from_record(st.result, root, **common))
        else:
            samples.append(Sample(source=root, label=p.label, ok=False, point_id=p.id, world_size=p.world_size,
                                  **common))
    return samples


def _head(path: Path) -> str:
    try:
        with open(path, "rb") as f:
            return f.read(_HEAD_BYTES).decode("utf-8", errors="replace")
    except OSError:
        return ""


def log_samples(path: Path, notes: list[str]) -> list[Sample]:
    from hpcbench.parse import parse_file

    parsed = parse_file(path)
    return infer(parsed, path, _head(path), notes)


def _topology(parsed: dict[str, Any]) -> tuple[int | None, int | None, list[str]]:
    """(nodes, ranks, how we know) from the NCCL lines."""
    nccl = parsed.get("nccl") or {}
    hosts, nranks, how = parsed.get("hosts") or nccl.get("hosts") or [], nccl.get("nranks"), []
    if hosts:
        how.append(f"{len(hosts)} host(s) from NCCL/nccl-tests lines ({', '.join(hosts[:4])}"
                   f"{', ...' if len(hosts) > 4 else ''})")
    if nranks:
        how.append(f"{nranks} ranks from NCCL's nranks")
    return (len(hosts) or None), nranks, how


def _layout(nodes: int | None, world: int | None) -> int | None:
    return world // nodes if nodes and world and world % nodes == 0 else None


def infer(parsed: dict[str, Any], path: Path, head: str, notes: list[str]) -> list[Sample]:
    """Samples shown by one parsed log (issue 4's parse_file shape)."""
    src = str(path)
    out: list[Sample] = []
    for n, doc in enumerate(parsed.get("records") or []):
        try:
            out.append(from_record(ResultRecord.from_dict(doc, f"{src} record {n}"), src, parsed=[parsed]))
        except (HpcbenchError, TypeError, KeyError) as e:
            out.append(Sample(source=src, label=f"{path.name}#{n}", state=UNPARSABLE, ok=False, final=True,
                              reason=str(e)))
    nodes, nranks, how = _topology(parsed)
    nccl = parsed.get("nccl") or {}
    backend = "nccl" if nccl else "?"
    hvd, tests = parsed.get("horovod"), parsed.get("nccl_tests")
    base: dict[str, Any] = {"source": src, "final": True, "nodes": nodes, "backend": backend, "parsed": [parsed],
                            "logs": [path]}
    if hvd:
        world = hvd.get("ranks") or nranks
        total = hvd.get("total_img_sec")
        m, b = _MODEL.search(head), _BATCH.search(head)
        # lower case, so "ResNet50" from one benchmark and "resnet50" from another are one model
        model, batch = (m.group(1).lower() if m else "?"), (int(b.group(1)) if b else None)
        said = list(how)
        device = (hvd.get("device") or "GPU").upper()
        if hvd.get("ranks"):
            said.append(f"{world} {_ranks_from(device, hvd['ranks_source'])}")
        if m:
            said.append(f"model {model} from 'Model:'")
        if b:
            said.append(f"batch {batch}/GPU from 'Batch size:'")
        err = hvd.get("total_img_sec_err")
        if err is not None:
            said.append("± is Horovod's '+-' (1.96 × std over its iterations)")
        s = Sample(label=path.name, state="parsed" if total else "no result", ok=bool(total),
                   framework="horovod", model=model, batch_size=batch, world_size=world,
                   ranks_per_node=_layout(nodes, world), device="cpu" if device == "CPU" else "cuda", throughput=total,
                   # Horovod's benchmark prints +-1.96 sigma of its per-iteration rates: a 95% spread
                   throughput_ci95=err, step_time_s=(batch * world / total) if (total and batch and world) else None,
                   reason="" if total else "Horovod output without a 'Total img/sec on N GPU(s)' line "
                   "(cut short, or still running?)", inferred="; ".join(said), **base)
        out.append(s)
    if tests is not None:
        rows = [_allreduce_row(r) for r in tests.get("rows") or []]
        collective = tests.get("collective") or "all_reduce"
        ranks_seen = len(set(re.findall(r"#\s+Rank\s+(\d+)\s.*\bon\s+\S+", head)))
        world = nranks or ranks_seen or None
        said = list(how) + ([f"{ranks_seen} ranks from nccl-tests 'Rank N ... on HOST' lines"] if ranks_seen else [])
        out.append(Sample(label=path.name, state="parsed" if rows else "no result", ok=bool(rows),
                          kind="allreduce", framework="nccl-tests", model=collective, device="cuda",
                          world_size=world, ranks_per_node=_layout(nodes, world), allreduce=rows,
                          reason="" if rows else "nccl-tests output without data rows",
                          inferred="; ".join(said), **base | {"backend": "nccl"}))
    if not out:
        what = "NCCL lines only: see the transport table" if nccl else "no measurement hpcbench can read"
        out.append(Sample(label=path.name, state="no result", ok=False, framework="?", world_size=nranks,
                          ranks_per_node=_layout(nodes, nranks), reason=what, inferred="; ".join(how), **base))
    for s in out:
        if s.inferred:
            notes.append(f"{path.name}: inferred {s.inferred}")
    return out


def _ranks_from(device: str, source: str) -> str:
    """What Horovod's rank count was read from (hpcbench.parse.horovod)."""
    return {"total line": f"{device}s from 'Total img/sec on N {device}(s)'",
            "number line": f"{device}s from 'Number of {device}s: N'"}.get(source, "ranks from the launcher's -np N")


def _allreduce_row(r: dict[str, Any]) -> AllreduceRow:
    side = "oop" if r.get("oop_busbw") is not None else "ip"  # rccl-tests may print in-place only
    wrong = r.get(f"{side}_wrong")
    return AllreduceRow(size_bytes=int(r["size"]), count=int(r.get("count") or 0), dtype=str(r.get("type") or "?"),
                        time_us=float(r[f"{side}_time_us"]), algbw_gbps=float(r[f"{side}_algbw"]),
                        busbw_gbps=float(r[f"{side}_busbw"]),
                        wrong=int(wrong) if isinstance(wrong, (int, float)) else -1)

