"""Sweep files: the TOML read and checked into a SweepSpec, every section derived from plan/fields.py.

Every error names ``file: dotted.key`` and what is allowed, so a user can fix the file without
reading code.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hpcbench.errors import ConfigError, read_text
from hpcbench.plan import checks, cluster
from hpcbench.plan.checks import fail, typename, unknown_key
from hpcbench.plan.cluster import ClusterProfile
from hpcbench.plan.fields import AXES, BY_NAME, PARAMS, SLURM, SWEEP, Setting, settings_class
from hpcbench.vocab import DATASET_SHAPES, MODELS

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

_WORKLOAD = tuple(Setting(p.name, p.default, p.check, p.doc, p.annotation) for p in PARAMS if p.where == "workload")
SweepInfo = settings_class("SweepInfo", SWEEP, "[sweep]: the study's name, description and repeats.")
SlurmSettings = settings_class("SlurmSettings", SLURM, "[slurm]: how each job is submitted (never in a point's id).")
Workload = settings_class("Workload", _WORKLOAD, "[workload]: every rank's measurement parameters; the matrix "
                          "defaults.")
SECTIONS = ("cluster", "sweep", "slurm", "workload", "matrix", "exclude")


@dataclass(frozen=True)
class Matrix:
    """Ordered axes (name, values). ``excludes`` drop any point matching every key of one entry."""

    axes: tuple[tuple[str, tuple[Any, ...]], ...]
    excludes: tuple[dict[str, tuple[Any, ...]], ...] = ()


@dataclass(frozen=True)
class SweepSpec:
    path: str
    text: str  # the TOML as read, copied into the run directory
    sweep: Any  # SweepInfo
    slurm: Any  # SlurmSettings
    workload: Any  # Workload
    matrix: Matrix = field(default_factory=lambda: Matrix(()))
    cluster: ClusterProfile | None = None


def section(raw: Any, name: str, settings: tuple[Setting, ...], prefix: str) -> dict[str, Any]:
    """One TOML table checked against its settings, with every default filled in."""
    where = f"{prefix}{name}"
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise fail(where, f"expected a table [{name}], got {typename(raw)}")
    table = {s.name: s for s in settings}
    out = {}
    for key, value in raw.items():
        if key not in table:
            raise unknown_key(f"{where}.{key}", key, table)
        out[key] = table[key].check(value, f"{where}.{key}")
    for s in settings:
        out.setdefault(s.name, s.default)
    return out


def _axis_values(name: str, raw: Any, where: str) -> tuple[Any, ...]:
    values = raw if isinstance(raw, list) else [raw]
    if not values:
        raise fail(where, "expected at least one value")
    out: list[Any] = []
    for i, v in enumerate(values):
        v = BY_NAME[name].check(v, f"{where}[{i}]" if isinstance(raw, list) else where)
        if v in out:
            raise fail(f"{where}[{i}]", f"duplicate value {v!r}")
        out.append(v)
    return tuple(out)


def _profile(raw: Any, override: str | None, path: str, p: str, base: Path | None) -> ClusterProfile | None:
    if override:
        return cluster.load(override, path)
    if raw is None:
        return None
    if isinstance(raw, str):
        return cluster.load(raw, path)
    return cluster.from_table(raw, f"{p}cluster", f"{path}: [cluster]", base or Path(path).resolve().parent, "inline")


def _toml(text: str, path: str) -> dict[str, Any]:
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{path}: not valid TOML: {e}", hint="check the line and column named above") from None
    for key in raw:
        if key not in SECTIONS:
            raise unknown_key(f"{path}: {key}", key, SECTIONS)
    return raw


def parse(text: str, path: str = "<sweep>", cluster: str | None = None, base: Path | None = None) -> SweepSpec:
    """Validate TOML text into a SweepSpec. Raises ConfigError naming ``path: key``.

    ``cluster`` names a profile that replaces the sweep's own ``cluster`` key (``--cluster``).
    ``base`` is the folder relative paths are relative to, when not ``path``'s (a run's copy).
    """
    raw = _toml(text, path)
    p = f"{path}: "
    sweep = section(raw.get("sweep"), "sweep", SWEEP, p)
    if sweep["name"] is None:
        stem = Path(path).stem
        sweep["name"] = stem if checks.NAME_RE.fullmatch(stem) else "sweep"
    profile = _profile(raw.get("cluster"), cluster, path, p, base)
    slurm = cluster_merge(profile, raw.get("slurm"), section(raw.get("slurm"), "slurm", SLURM, p))
    workload = section(raw.get("workload"), "workload", _WORKLOAD, p)
    spec = SweepSpec(path=path, text=text, sweep=SweepInfo(**sweep), slurm=SlurmSettings(**slurm),
                     workload=Workload(**workload), matrix=_matrix(raw.get("matrix"), raw.get("exclude"), workload, p),
                     cluster=profile)
    _domain_rules(spec, raw.get("matrix"), p)
    return spec


def cluster_merge(profile: ClusterProfile | None, raw_slurm: Any, checked: dict[str, Any]) -> dict[str, Any]:
    return checked if profile is None else cluster.merge_slurm(profile, raw_slurm or {}, checked)


def _matrix(raw: Any, raw_excludes: Any, workload: dict[str, Any], p: str) -> Matrix:
    raw = {} if raw is None else raw
    if not isinstance(raw, dict):
        raise fail(f"{p}matrix", f"expected a table [matrix], got {typename(raw)}")
    for key in raw:
        if key not in AXES:
            raise unknown_key(f"{p}matrix.{key}", key, AXES)
    if "ranks_per_node" in raw and "gpus_per_node" in raw:
        raise fail(f"{p}matrix", "give ranks_per_node or gpus_per_node, not both (one rank runs per GPU)")
    if "gpus_per_node" in raw and workload["device"] != "cuda":
        raise fail(f"{p}matrix.gpus_per_node", 'needs workload.device = "cuda"; use ranks_per_node on CPU')
    # An axis the sweep does not write takes one value: its [workload] key, or its default. Of the two
    # ways to say ranks per node, only the one written (else ranks_per_node) is an axis.
    layout = "gpus_per_node" if "gpus_per_node" in raw else "ranks_per_node"
    axes = []
    for name in AXES:
        if name in raw:
            axes.append((name, _axis_values(name, raw[name], f"{p}matrix.{name}")))
        elif name not in ("gpus_per_node", "ranks_per_node") or name == layout:
            axes.append((name, (workload.get(name, BY_NAME[name].default),)))
    return Matrix(tuple(axes), _excludes(raw_excludes, p))


def _excludes(raw: Any, p: str) -> tuple[dict[str, tuple[Any, ...]], ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise fail(f"{p}exclude", "expected an array of tables: write each entry as [[exclude]]")
    out = []
    for i, entry in enumerate(raw):
        where = f"{p}exclude[{i}]"
        if not isinstance(entry, dict) or not entry:
            raise fail(where, "expected a non-empty table of matrix keys, e.g. { backend = \"mpi\", nodes = 4 }")
        rule = {}
        for key, value in entry.items():
            if key not in AXES:
                raise unknown_key(f"{where}.{key}", key, AXES)
            rule[key] = _axis_values(key, value, f"{where}.{key}")
        out.append(rule)
    return tuple(out)


def _written(raw_matrix: Any, key: str) -> bool:
    return isinstance(raw_matrix, dict) and key in raw_matrix


def _domain_rules(spec: SweepSpec, raw_matrix: Any, p: str) -> None:
    w = spec.workload
    if w.kind == "allreduce" and w.min_bytes > w.max_bytes:
        raise fail(f"{p}workload.max_bytes", f"{w.max_bytes} is smaller than workload.min_bytes = {w.min_bytes}")
    if w.kind == "allreduce" and "none" in dict(spec.matrix.axes).get("framework", (w.framework,)):
        where = "matrix.framework" if _written(raw_matrix, "framework") else "workload.framework"
        raise fail(f"{p}{where}", "framework 'none' has no communication to measure; allreduce needs ddp or horovod")
    backends = dict(spec.matrix.axes)["backend"]
    if w.device == "cpu" and "nccl" in backends:
        # Name the key the user actually wrote: the matrix list, or the workload default.
        if _written(raw_matrix, "backend"):
            where = f"{p}matrix.backend" + (f"[{backends.index('nccl')}]" if isinstance(raw_matrix["backend"], list)
                                            else "")
        else:
            where = f"{p}workload.backend"
        raise fail(where, "'nccl' needs workload.device = \"cuda\" (NCCL has no CPU path); use gloo or mpi on CPU")
    s = spec.slurm
    if w.device == "cuda" and s.gpu_bind == "closest" and s.launcher != "srun":
        # Slurm binds GPUs to the tasks srun starts; mpirun's and torchrun's ranks are not Slurm tasks.
        raise fail(f"{p}slurm.gpu_bind", f"'closest' is srun's --gpu-bind, and launcher {s.launcher!r} starts "
                   "ranks Slurm cannot bind GPUs to; use gpu_bind = \"block\" (or launcher = \"srun\")")
    _data_rules(spec, p)


def _data_rules(spec: SweepSpec, p: str) -> None:
    """Training keys that only make sense together (issue 3)."""
    w = spec.workload
    if w.data != "synthetic":
        if w.data_dir is None:
            raise fail(f"{p}workload.data_dir", f"data = {w.data!r} reads a folder: set data_dir "
                       f"(fill it with: hpcbench data fetch {w.data} --dest DIR)")
        shape = DATASET_SHAPES[w.data]
        for model in dict(spec.matrix.axes)["model"]:
            if MODELS[model].input_shape != shape:
                fits = ", ".join(m.name for m in MODELS.values() if m.input_shape == shape)
                raise fail(f"{p}workload.data", f"model {model!r} does not take {w.data} samples "
                           f"{shape} (models that do: {fits})")
    if w.scaling == "strong" and w.global_batch_size is None:
        raise fail(f"{p}workload.global_batch_size", 'scaling = "strong" needs global_batch_size '
                   "(split over the ranks of each point)")
    if w.scaling == "weak" and w.global_batch_size is not None:
        raise fail(f"{p}workload.global_batch_size", 'only applies with scaling = "strong" '
                   "(weak scaling keeps batch_size per rank)")


def load(path: str | Path, cluster: str | None = None) -> SweepSpec:
    """Read and validate a sweep file."""
    return parse(read_text(path, "sweep file"), str(path), cluster)
