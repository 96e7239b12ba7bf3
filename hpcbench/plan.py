"""Expand a SweepSpec into Points: the matrix product, minus excludes, each with a stable id."""

from __future__ import annotations

import hashlib
import itertools
import json
from dataclasses import asdict, dataclass, fields
from typing import Any

from hpcbench.spec import SweepSpec


@dataclass(frozen=True)
class Point:
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
    # kind = "allreduce" only (defaults elsewhere, and left out of the id, so training ids stay put)
    min_bytes: int = 8
    max_bytes: int = 1 << 30
    step_factor: int = 2
    dtype: str = "float32"
    warmup_iters: int = 5
    iters: int = 20

    @property
    def world_size(self) -> int:
        return self.nodes * self.ranks_per_node

    @property
    def dirname(self) -> str:
        return f"{self.label}-{self.id}"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Point:
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in names})


def point_id(params: dict[str, Any]) -> str:
    """Hash of the measurement parameters: the same TOML always gives the same ids.

    Scheduler settings (partition, time, modules) are left out on purpose, so that resubmitting a
    point with a longer time limit keeps its identity.
    """
    blob = json.dumps(params, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()[:10]


ALLREDUCE_PARAMS = ("min_bytes", "max_bytes", "step_factor", "dtype", "warmup_iters", "iters")


def _label(p: dict[str, Any], repeats: int) -> str:
    if p["kind"] == "allreduce":
        label = f"{p['framework']}-{p['backend']}-allreduce-n{p['nodes']}x{p['ranks_per_node']}"
    else:
        label = f"{p['backend']}-{p['model']}-b{p['batch_size']}-n{p['nodes']}x{p['ranks_per_node']}"
    return f"{label}-r{p['repeat']}" if repeats > 1 else label


def _excluded(values: dict[str, Any], excludes: tuple[dict[str, tuple[Any, ...]], ...]) -> bool:
    return any(all(values.get(k) in allowed for k, allowed in rule.items()) for rule in excludes)


def expand(spec: SweepSpec) -> list[Point]:
    """Matrix product in axis order (backend, model, batch, nodes, ranks), then repeats."""
    names = [name for name, _ in spec.matrix.axes]
    w = spec.workload
    points = []
    for combo in itertools.product(*(values for _, values in spec.matrix.axes)):
        values = dict(zip(names, combo))
        if _excluded(values, spec.matrix.excludes):
            continue
        rpn = values.get("ranks_per_node", values.get("gpus_per_node", 1))
        for repeat in range(spec.sweep.repeats):
            params = {
                "backend": values["backend"],
                "model": values["model"],
                "batch_size": values["batch_size"],
                "nodes": values["nodes"],
                "ranks_per_node": rpn,
                "gpus_per_node": rpn if w.device == "cuda" else 0,
                "framework": values.get("framework", w.framework),
                "kind": w.kind,
                "device": w.device,
                "data": w.data,
                "steps": w.steps,
                "warmup_steps": w.warmup_steps,
                "lr": w.lr,
                "repeat": repeat,
            }
            if w.kind == "allreduce":
                params.update({k: getattr(w, k) for k in ALLREDUCE_PARAMS}, model="allreduce")
            points.append(Point(id=point_id(params), label=_label(params, spec.sweep.repeats), **params))
    return points


PLAN_COLUMNS = ("id", "label", "backend", "model", "batch_size", "nodes", "ranks_per_node", "world_size")


def plan_rows(points: list[Point]) -> list[dict[str, Any]]:
    return [{c: (p.world_size if c == "world_size" else getattr(p, c)) for c in PLAN_COLUMNS} for p in points]
