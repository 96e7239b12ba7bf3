"""Sweep files: the TOML read and checked into a SweepSpec, every section derived from plan/fields.py.

Every error names ``file: dotted.key`` and what is allowed, so a user can fix the file without
reading code.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hpcbench.errors import read_text
from hpcbench.files import toml
from hpcbench.plan import axes, checks, cluster
from hpcbench.plan.axes import Matrix
from hpcbench.plan.checks import fail, typename, unknown_key
from hpcbench.plan.cluster import ClusterProfile
from hpcbench.plan._generated import SlurmSettings, SweepInfo, Workload
from hpcbench.plan.fields import PARAMS, SLURM, SWEEP, Setting
from hpcbench.vocab import DATASET_SHAPES, MODELS

# The classes of [sweep], [slurm] and [workload] are written from fields.py (python -m hpcbench.plan.codegen).
_WORKLOAD = tuple(Setting(p.name, p.default, p.check, p.doc, p.annotation) for p in PARAMS if p.where == "workload")
SECTIONS = ("cluster", "sweep", "slurm", "workload", "matrix", "zip", "exclude")
__all__ = ["Matrix", "SlurmSettings", "SweepInfo", "SweepSpec", "Workload", "load", "parse"]


@dataclass(frozen=True)
class SweepSpec:
    path: str
    text: str  # the TOML as read, copied into the run directory
    sweep: SweepInfo
    slurm: SlurmSettings
    workload: Workload
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


def _profile(raw: Any, override: str | None, path: str, p: str, base: Path | None) -> ClusterProfile | None:
    if override:
        return cluster.load(override, path)
    if raw is None:
        return None
    if isinstance(raw, str):
        return cluster.load(raw, path)
    return cluster.from_table(raw, f"{p}cluster", f"{path}: [cluster]", base or Path(path).resolve().parent,
                              cluster.INLINE)


def _toml(text: str, path: str) -> dict[str, Any]:
    raw = toml(text, path)
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
    if not sweep["name"]:
        stem = Path(path).stem
        sweep["name"] = stem if checks.NAME_RE.fullmatch(stem) else "sweep"
    profile = _profile(raw.get("cluster"), cluster, path, p, base)
    slurm = cluster_merge(profile, raw.get("slurm"), section(raw.get("slurm"), "slurm", SLURM, p))
    workload = section(raw.get("workload"), "workload", _WORKLOAD, p)
    matrix = axes.matrix(raw.get("matrix"), raw.get("zip"), raw.get("exclude"), workload, slurm["env"], p)
    spec = SweepSpec(path=path, text=text, sweep=SweepInfo(**sweep), slurm=SlurmSettings(**slurm),
                     workload=Workload(**workload), matrix=matrix, cluster=profile)
    _domain_rules(spec, p)
    return spec


def cluster_merge(profile: ClusterProfile | None, raw_slurm: Any, checked: dict[str, Any]) -> dict[str, Any]:
    return checked if profile is None else cluster.merge_slurm(profile, raw_slurm or {}, checked)


def _where(spec: SweepSpec, key: str, value: Any = None) -> str:
    """Where the file gives ``key``: its axis (and the index of ``value`` in its list), else its [workload] key."""
    where = spec.matrix.where(key)
    if where is None:
        return f"workload.{key}"
    raw = _raw_at(spec, where)
    return f"{where}[{raw.index(value)}]" if isinstance(raw, list) and value in raw else where


def _raw_at(spec: SweepSpec, where: str) -> Any:
    """The raw TOML value at a dotted place such as matrix.backend or zip[0].backend."""
    node: Any = _toml(spec.text, spec.path)
    for part in where.split("."):
        name, _, index = part.partition("[")
        node = node.get(name) if isinstance(node, dict) else None
        if index and isinstance(node, list):
            node = node[int(index.rstrip("]"))]
    return node


def _domain_rules(spec: SweepSpec, p: str) -> None:
    w = spec.workload
    values = dict(spec.matrix.axes)
    if w.kind == "collective" and w.min_bytes > w.max_bytes:
        raise fail(f"{p}workload.max_bytes", f"{w.max_bytes} is smaller than workload.min_bytes = {w.min_bytes}")
    if w.kind == "collective" and "none" in values["framework"]:
        raise fail(f"{p}{_where(spec, 'framework', 'none')}", "framework 'none' has no communication to measure; "
                   "a collective needs ddp or horovod")
    if w.device == "cpu" and "nccl" in values["backend"]:
        # Name the key the user actually wrote: the axis (and the value's index), or the workload default.
        raise fail(f"{p}{_where(spec, 'backend', 'nccl')}", "'nccl' needs workload.device = \"cuda\" (NCCL has no "
                   "CPU path); use gloo or mpi on CPU")
    s = spec.slurm
    if w.device == "cpu" and len(values.get("gpu_bind", ())) > 1:
        raise fail(f"{p}{spec.matrix.where('gpu_bind')}", "places each rank on its GPU's socket; with "
                   "workload.device = 'cpu' its points would repeat")
    launchers = values.get("launcher", (s.launcher,))
    if w.device == "cuda" and "closest" in values.get("gpu_bind", (s.gpu_bind,)) and set(launchers) - {"srun"}:
        # Slurm binds GPUs to the tasks srun starts; mpirun's and torchrun's ranks are not Slurm tasks.
        other = next(x for x in launchers if x != "srun")
        raise fail(f"{p}{spec.matrix.where('gpu_bind') or 'slurm.gpu_bind'}", f"'closest' is srun's --gpu-bind, and "
                   f"launcher {other!r} starts ranks Slurm cannot bind GPUs to; use gpu_bind = \"block\" (or "
                   "launcher = \"srun\")")
    _data_rules(spec, p)


def _data_rules(spec: SweepSpec, p: str) -> None:
    """Training keys that only make sense together (issue 3)."""
    w = spec.workload
    for data in dict(spec.matrix.axes).get("data", (w.data,)):
        if data != "synthetic" and w.data_dir is None:
            raise fail(f"{p}workload.data_dir", f"data = {data!r} reads a folder: set data_dir "
                       f"(fill it with: hpcbench data fetch {data} --dest DIR)")
    if w.data != "synthetic" and spec.matrix.where("data") is None:  # an axis of data: each point is checked
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
