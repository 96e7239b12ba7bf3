"""Expand a SweepSpec into Points: the matrix product, minus excludes, each with a stable id."""

from __future__ import annotations

import hashlib
import itertools
import json
from dataclasses import dataclass, fields
from typing import Any

from hpcbench.errors import ConfigError
from hpcbench.spec import AllreduceSizes, SweepSpec

# Keys added after the first release: hashed only when they differ from these defaults, so every
# point of an older sweep file keeps its id.
_NEW_KEY_DEFAULTS: dict[str, Any] = {"data_dir": None, "scaling": "weak", "global_batch_size": None,
                                     "lr_scaling": True, "checkpoint": False, "timeline": False,
                                     "comm_split": True, "fail_rank": -1, "fail_step": 1, "init_timeout_s": 600}


@dataclass(frozen=True)
class Point(AllreduceSizes):  # the allreduce sizes are hashed into the id of allreduce points only
    """One job: a fully resolved set of measurement parameters."""

    id: str
    label: str
    backend: str
    model: str
    batch_size: int
    nodes: int
    ranks_per_node: int
    gpus_per_node: int  # 0 on CPU; otherwise equal to ranks_per_node (one rank per GPU)
    framework: str
    kind: str
    device: str
    data: str
    steps: int
    warmup_steps: int
    lr: float
    repeat: int = 0
    fail_rank: int = -1  # fault injection (see spec.Workload)
    fail_step: int = 1
    init_timeout_s: int = 600
    # --- issue 3 (defaults keep plan.json of older runs readable) ---
    data_dir: str | None = None
    scaling: str = "weak"
    global_batch_size: int | None = None
    lr_scaling: bool = True
    checkpoint: bool = False
    timeline: bool = False
    comm_split: bool = True

    @property
    def world_size(self) -> int:
        return self.nodes * self.ranks_per_node

    @property
    def dirname(self) -> str:
        return f"{self.label}-{self.id}"

    def to_dict(self) -> dict[str, Any]:
        # Flat fields only, so a shallow copy does (asdict deep-copies: 10x slower on 10,000 points).
        return {name: getattr(self, name) for name in _POINT_FIELDS}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Point:
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in names})


_POINT_FIELDS = tuple(f.name for f in fields(Point))


def point_id(params: dict[str, Any]) -> str:
    """Hash of the measurement parameters: the same TOML always gives the same ids.

    Scheduler settings (partition, time, modules) are left out on purpose, so that resubmitting a
    point with a longer time limit keeps its identity.
    """
    params = {k: v for k, v in params.items() if k not in _NEW_KEY_DEFAULTS or v != _NEW_KEY_DEFAULTS[k]}
    blob = json.dumps(params, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()[:10]


ALLREDUCE_PARAMS = tuple(f.name for f in fields(AllreduceSizes))


def _label(p: dict[str, Any], repeats: int) -> str:
    label = f"{p['backend']}-{p['model']}-b{p['batch_size']}-n{p['nodes']}x{p['ranks_per_node']}"
    if p["kind"] == "allreduce":
        label = f"{p['framework']}-{p['backend']}-allreduce-n{p['nodes']}x{p['ranks_per_node']}"
    elif p["framework"] == "horovod":
        label = f"hvd-{label}"
    elif p["framework"] == "none":  # the backend is "none" too
        label = label.removeprefix("none-")
        label = f"none-{label}"
    return f"{label}-r{p['repeat']}" if repeats > 1 else label


def _excluded(values: dict[str, Any], excludes: tuple[dict[str, tuple[Any, ...]], ...]) -> bool:
    return any(all(values.get(k) in allowed for k, allowed in rule.items()) for rule in excludes)


def expand(spec: SweepSpec) -> list[Point]:
    """Matrix product in axis order (backend, model, batch, nodes, ranks), then repeats."""
    names = [name for name, _ in spec.matrix.axes]
    w = spec.workload
    points = []
    seen: set[str] = set()
    for combo in itertools.product(*(values for _, values in spec.matrix.axes)):
        values = dict(zip(names, combo))
        if _excluded(values, spec.matrix.excludes):
            continue
        rpn = values.get("ranks_per_node", values.get("gpus_per_node", 1))
        framework = values.get("framework", w.framework)
        batch = _rank_batch(spec, values, rpn)
        _check_point(spec, values, framework, rpn)
        for repeat in range(spec.sweep.repeats):
            params = {
                # framework none has no communication: the backend axis means nothing for it.
                "backend": "none" if framework == "none" else values["backend"],
                "model": values["model"],
                "batch_size": batch,
                "nodes": values["nodes"],
                "ranks_per_node": rpn,
                "gpus_per_node": rpn if w.device == "cuda" else 0,
                "framework": framework,
                "kind": w.kind,
                "device": w.device,
                "data": w.data,
                "steps": w.steps,
                "warmup_steps": w.warmup_steps,
                "lr": w.lr,
                "repeat": repeat,
                "data_dir": w.data_dir,
                "scaling": w.scaling,
                "global_batch_size": w.global_batch_size,
                "lr_scaling": w.lr_scaling,
                "checkpoint": w.checkpoint,
                "timeline": w.timeline,
                "comm_split": w.comm_split,
                "fail_rank": w.fail_rank,
                "fail_step": w.fail_step,
                "init_timeout_s": w.init_timeout_s,
            }
            if w.kind == "allreduce":
                params.update({k: getattr(w, k) for k in ALLREDUCE_PARAMS}, model="allreduce")
            pid = point_id(params)
            if pid not in seen:  # framework none: one point whatever the backend axis says
                seen.add(pid)
                points.append(Point(id=pid, label=_label(params, spec.sweep.repeats), **params))
    return points


def _where(spec: SweepSpec, values: dict[str, Any]) -> str:
    shown = ", ".join(f"{k}={v}" for k, v in values.items())
    return f"{spec.path}: point ({shown})"


def _rank_batch(spec: SweepSpec, values: dict[str, Any], rpn: int) -> int:
    """Per-rank batch: fixed (weak scaling), or the global batch split over the ranks (strong)."""
    w = spec.workload
    if w.scaling == "weak":
        return int(values["batch_size"])
    assert w.global_batch_size is not None  # spec validation guarantees it
    world = values["nodes"] * rpn
    if w.global_batch_size % world:
        raise ConfigError(f"{_where(spec, values)}: global_batch_size {w.global_batch_size} does not split "
                          f"evenly over {world} ranks",
                          hint="choose a global batch divisible by every world size, or exclude the point")
    return w.global_batch_size // world


def _check_point(spec: SweepSpec, values: dict[str, Any], framework: str, rpn: int) -> None:
    world = values["nodes"] * rpn
    if framework == "none" and world > 1:
        raise ConfigError(f"{_where(spec, values)}: framework 'none' is one process with no communication, "
                          f"but this point has {world} ranks",
                          hint='add [[exclude]] framework = "none" with the larger nodes/ranks_per_node values')


PLAN_COLUMNS = ("id", "label", "backend", "model", "batch_size", "nodes", "ranks_per_node", "world_size")


def plan_rows(points: list[Point]) -> list[dict[str, Any]]:
    return [{c: (p.world_size if c == "world_size" else getattr(p, c)) for c in PLAN_COLUMNS} for p in points]
