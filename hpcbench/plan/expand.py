"""Expand a SweepSpec into Points: the matrix product, minus excludes, each with a stable id.

A Point has one field per declared parameter (plan/fields.py), plus its id and label.
"""

from __future__ import annotations

import hashlib
import itertools
import json
from dataclasses import field, fields, make_dataclass
from typing import Any

from hpcbench.errors import ConfigError
from hpcbench.plan.fields import PARAMS, id_params
from hpcbench.plan.spec import SweepSpec
from hpcbench.vocab import NO_FRAMEWORK


class _PointMethods:
    id: str
    label: str
    nodes: int
    ranks_per_node: int

    @property
    def world_size(self) -> int:
        return self.nodes * self.ranks_per_node

    @property
    def dirname(self) -> str:
        return f"{self.label}-{self.id}"

    def params(self) -> dict[str, Any]:
        """Every declared parameter's value."""
        return {p.name: getattr(self, p.name) for p in PARAMS}

    def to_dict(self) -> dict[str, Any]:
        # Flat fields only, so a shallow copy does (asdict deep-copies: 10x slower on 10,000 points).
        return {name: getattr(self, name) for name in _POINT_FIELDS}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Any:
        """A point from plan.json; parameters that a run of an older hpcbench did not write take their default."""
        return cls(**{k: v for k, v in d.items() if k in _POINT_NAMES})


Point: Any = make_dataclass(
    "Point", [("id", str), ("label", str), *((p.name, p.annotation, field(default=p.default)) for p in PARAMS)],
    bases=(_PointMethods,), frozen=True)
Point.__module__ = __name__
Point.__doc__ = "One job: a fully resolved set of measurement parameters (one field per declared parameter)."
_POINT_FIELDS = tuple(f.name for f in fields(Point))
_POINT_NAMES = frozenset(_POINT_FIELDS)


def point_id(params: dict[str, Any]) -> str:
    """Hash of the parameters that reach the point's ranks: the same TOML always gives the same ids.

    Scheduler settings (partition, time, modules) are left out on purpose, so that resubmitting a
    point with a longer time limit keeps its identity.
    """
    blob = json.dumps(id_params(params), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()[:10]


def label(p: dict[str, Any], repeats: int) -> str:
    layout = f"n{p['nodes']}x{p['ranks_per_node']}"
    if p["kind"] == "allreduce":  # named by its collective; all_reduce keeps the name labels always had
        what = p.get("collective") if p.get("collective") not in (None, "all_reduce") else "allreduce"
        text = f"{p['framework']}-{p['backend']}-{what}-{layout}"
    elif p["framework"] == NO_FRAMEWORK:  # its backend is "none" too
        text = f"none-{p['model']}-b{p['batch_size']}-{layout}"
    else:
        text = f"{'hvd-' if p['framework'] == 'horovod' else ''}{p['backend']}-{p['model']}-b{p['batch_size']}-{layout}"
    return f"{text}-r{p['repeat']}" if repeats > 1 else text


def _excluded(values: dict[str, Any], excludes: tuple[dict[str, tuple[Any, ...]], ...]) -> bool:
    return any(all(values.get(k) in allowed for k, allowed in rule.items()) for rule in excludes)


def expand(spec: SweepSpec) -> list[Point]:
    """Matrix product in axis order (framework, backend, model, batch, nodes, ranks), then repeats."""
    names = [name for name, _ in spec.matrix.axes]
    workload = {p.name: getattr(spec.workload, p.name) for p in PARAMS if p.where == "workload"}
    points, seen = [], set()
    for combo in itertools.product(*(values for _, values in spec.matrix.axes)):
        values = dict(zip(names, combo))
        if _excluded(values, spec.matrix.excludes):
            continue
        params = _resolve(spec, {**workload, **values})
        for repeat in range(spec.sweep.repeats):
            params["repeat"] = repeat
            pid = point_id(params)
            if pid not in seen:  # framework none: one point whatever the backend axis says
                seen.add(pid)
                points.append(Point(id=pid, label=label(params, spec.sweep.repeats), **params))
    return points


def _resolve(spec: SweepSpec, values: dict[str, Any]) -> dict[str, Any]:
    """Every parameter of one matrix cell: counts completed, the per-rank batch, and the rules checked.

    A parameter that does not apply to the point's kind is None: the point shows only what it measures.
    """
    kind = values["kind"]
    out = {p.name: values.get(p.name, p.default) if p.applies(kind) else None for p in PARAMS}
    rpn = values.get("ranks_per_node", values.get("gpus_per_node", 1))
    out.update(ranks_per_node=rpn, gpus_per_node=rpn if out["device"] == "cuda" else 0)
    _check_point(spec, values, out)
    if out["framework"] == NO_FRAMEWORK:
        out["backend"] = NO_FRAMEWORK  # no communication: the backend axis means nothing for it
    if kind == "train":
        out["batch_size"] = _rank_batch(spec, values, out)
    else:
        out["model"] = kind  # a communication benchmark: `model` names what it measures
    return out


def _where(spec: SweepSpec, values: dict[str, Any]) -> str:
    shown = ", ".join(f"{k}={v}" for k, v in values.items() if any(k == name for name, _ in spec.matrix.axes))
    return f"{spec.path}: point ({shown})"


def _rank_batch(spec: SweepSpec, values: dict[str, Any], p: dict[str, Any]) -> int:
    """Per-rank batch: fixed (weak scaling), or the global batch split over the ranks (strong)."""
    world = p["nodes"] * p["ranks_per_node"]
    if p["scaling"] == "weak" or p["global_batch_size"] is None:
        return int(p["batch_size"])
    if p["global_batch_size"] % world:
        raise ConfigError(f"{_where(spec, values)}: global_batch_size {p['global_batch_size']} does not split "
                          f"evenly over {world} ranks",
                          hint="choose a global batch divisible by every world size, or exclude the point")
    return int(p["global_batch_size"] // world)


def _check_point(spec: SweepSpec, values: dict[str, Any], p: dict[str, Any]) -> None:
    world = p["nodes"] * p["ranks_per_node"]
    if p["framework"] == NO_FRAMEWORK and world > 1:
        raise ConfigError(f"{_where(spec, values)}: framework 'none' is one process with no communication, "
                          f"but this point has {world} ranks",
                          hint='add [[exclude]] framework = "none" with the larger nodes/ranks_per_node values')


PLAN_COLUMNS = ("id", "label", *(p.name for p in PARAMS if p.column), "world_size")


def plan_rows(points: list[Point]) -> list[dict[str, Any]]:
    """The plan table: id, label, the parameters that have a column, total ranks."""
    return [{c: (p.world_size if c == "world_size" else getattr(p, c)) for c in PLAN_COLUMNS} for p in points]
