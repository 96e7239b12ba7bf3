"""Expand a SweepSpec into Points: the product of its axes (each [[zip]] one factor), minus excludes, each
with a stable id.

A Point has one field per declared parameter (plan/fields.py), its id and label, and the axes that are
not parameters: ``env`` (its environment variables), ``slurm`` (its measured [slurm] settings: both in
its id) and ``job`` (scheduler settings of its job alone, such as a time limit zipped with nodes: never
in its id). A sweep without such axes gives every point the id it always had. The class is written from
fields.py into plan/_generated.py (``python -m hpcbench.plan.codegen``); its methods are plan/point.py's.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import random
import re
from dataclasses import replace
from typing import Any

from hpcbench.errors import ConfigError
from hpcbench.plan._generated import Point
from hpcbench.plan.axes import is_env
from hpcbench.plan.fields import BY_NAME, JOB_SETTINGS, PARAMS, POINT_SETTINGS, STANDING, id_params
from hpcbench.plan.spec import SweepSpec
from hpcbench.vocab import DATASET_SHAPES, MODELS, NO_FRAMEWORK

def point_id(params: dict[str, Any]) -> str:
    """Hash of the parameters that reach the point's ranks: the same TOML always gives the same ids.

    Scheduler settings (partition, time, modules) are left out on purpose, so that resubmitting a
    point with a longer time limit keeps its identity. ``params`` may hold the point's ``env`` and
    ``slurm`` pairs: they count when there are any.
    """
    blob = json.dumps(id_params(params), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()[:10]


def label(p: dict[str, Any], repeats: int, axes: str = "") -> str:
    """What the point is, readable, and safe as a folder name: ``axes`` adds the values of the sweep's other axes."""
    layout = f"n{p['nodes']}x{p['ranks_per_node']}"
    if p["kind"] == "collective":  # named by its collective; all_reduce keeps the name labels always had
        what = p.get("collective") if p.get("collective") not in (None, "all_reduce") else "allreduce"
        text = f"{p['framework']}-{p['backend']}-{what}-{layout}"
    elif p["framework"] == NO_FRAMEWORK:  # its backend is "none" too
        text = f"none-{p['model']}-b{p['batch_size']}-{layout}"
    else:
        text = f"{'hvd-' if p['framework'] == 'horovod' else ''}{p['backend']}-{p['model']}-b{p['batch_size']}-{layout}"
    return f"{text}{axes}-r{p['repeat']}" if repeats > 1 else f"{text}{axes}"


_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]")
NAMED = ("collective",)  # axes the label's own words name (a communication point is named by its collective)


def axis_token(key: str, value: Any) -> str:
    """One axis value in a label: steps20, NCCL_IB_DISABLE1, NCCL_ALGO_Ring, cpu_bind_cores (folder-name safe)."""
    name = key[4:] if is_env(key) else key
    text = _UNSAFE.sub("_", str(value))[:40]
    return f"{name}{text}" if text[:1].isdigit() else f"{name}_{text}"


def _label_tokens(spec: SweepSpec) -> list[tuple[str, dict[Any, str]]]:
    """The axes a label shows beyond its usual words: those measured axes that take more than one value."""
    return [(k, {v: f"-{axis_token(k, v)}" for v in values}) for k, values in spec.matrix.axes
            if len(values) > 1 and k not in STANDING and k not in JOB_SETTINGS and k not in NAMED]


def _excluded(values: dict[str, Any], excludes: tuple[dict[str, tuple[Any, ...]], ...]) -> bool:
    return any(all(values.get(k) in allowed for k, allowed in rule.items()) for rule in excludes)


def _kinds(keys: list[str]) -> tuple[list[tuple[str, str]], list[str], list[str]]:
    """The env keys (key, variable), the measured [slurm] keys and the job's keys among ``keys``, sorted by name."""
    env = sorted(((k, k[4:]) for k in keys if is_env(k)), key=lambda kv: kv[1])
    return env, sorted(k for k in keys if k in POINT_SETTINGS), sorted(k for k in keys if k in JOB_SETTINGS)


def expand(spec: SweepSpec) -> list[Point]:
    """The product in axis order (framework, backend, model, batch, nodes, ranks, then the other axes), then repeats."""
    factors = spec.matrix.factors()
    env_keys, slurm_keys, job_keys = _kinds([k for names, _ in factors for k in names])
    workload = {p.name: getattr(spec.workload, p.name) for p in PARAMS if p.where == "workload"}
    # An exclude may name any axis key; one the sweep does not vary matches its [workload] or [slurm] value.
    fixed = {**workload, **{k: getattr(spec.slurm, k) for k in (*POINT_SETTINGS, *JOB_SETTINGS)}}
    tokens, excludes, repeats = _label_tokens(spec), spec.matrix.excludes, spec.sweep.repeats
    points, seen = [], set()
    for combo in itertools.product(*(rows for _, rows in factors)):
        values = {k: v for (names, _), row in zip(factors, combo) for k, v in zip(names, row)}
        if excludes and _excluded({**fixed, **values}, excludes):
            continue
        params = _resolve(spec, {**workload, **values})
        extra: dict[str, Any] = {"env": tuple((name, values[k]) for k, name in env_keys),
                                 "slurm": tuple((k, values[k]) for k in slurm_keys),
                                 "job": tuple((k, values[k]) for k in job_keys)}
        axes = "".join(shown[values[k]] for k, shown in tokens)
        for repeat in range(repeats):
            params["repeat"] = repeat
            pid = point_id({**params, **extra} if env_keys or slurm_keys else params)
            if pid not in seen:  # framework none: one point whatever the backend axis says
                seen.add(pid)
                points.append(Point(id=pid, label=label(params, repeats, axes), **params, **extra))
    return points


def run_order(spec: SweepSpec, points: list[Point]) -> list[Point]:
    """The points in the order they are submitted, and so run: ``[sweep] order``.

    shuffled: repeats run in rounds, each round every point once, in an order of its own drawn from
    ``[sweep] seed`` (the same seed, the same order). A machine that slows down over the run (heat, another
    job, a filling disk) then slows every backend and layout alike, instead of the ones declared last.
    declared: the matrix's own order, every repeat of a point one after the other."""
    if spec.sweep.order == "declared":
        return list(points)
    rng = random.Random(spec.sweep.seed)
    rounds: dict[int, list[Point]] = {}
    for p in points:
        rounds.setdefault(p.repeat or 0, []).append(p)
    out: list[Point] = []
    for r in sorted(rounds):
        batch = list(rounds[r])
        rng.shuffle(batch)
        out += batch
    return out


def order_note(spec: SweepSpec) -> str:
    """How the points are ordered, for the plan's output and plan.json."""
    if spec.sweep.order == "declared":
        return "points run in the declared order ([sweep] order = \"declared\")"
    rounds = f", in {spec.sweep.repeats} rounds of every point once" if spec.sweep.repeats > 1 else ""
    return (f"points run in a shuffled order{rounds} (seed {spec.sweep.seed}: [sweep] seed; the same seed gives the "
            "same order), so drift in the machine favours no backend or layout")


def current_jobs(spec: SweepSpec, points: list[Point]) -> list[Point]:
    """``points`` (of plan.json) with the scheduler settings their sweep gives them now: a time limit zipped
    with nodes and then lengthened in a run's sweep copy applies to what is submitted next, as an edited
    [slurm] time does. Such settings never change an id, so the points are the same ones."""
    if not any(k in JOB_SETTINGS for keys, _ in spec.matrix.zips for k in keys):
        return [replace(p, job=()) if p.job else p for p in points]
    now = {p.id: p.job for p in expand(spec)}
    return [replace(p, job=now[p.id]) if now.get(p.id, p.job) != p.job else p for p in points]


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
    if p["kind"] == "collective" and p["min_bytes"] > p["max_bytes"]:
        raise ConfigError(f"{_where(spec, values)}: min_bytes {p['min_bytes']} is larger than max_bytes "
                          f"{p['max_bytes']}", hint="exclude the pair with [[exclude]], or zip the two in a [[zip]]")
    data = p["data"]
    if data not in (None, "synthetic") and MODELS[p["model"]].input_shape != DATASET_SHAPES[data]:
        raise ConfigError(f"{_where(spec, values)}: model {p['model']!r} does not take {data} samples "
                          f"{DATASET_SHAPES[data]}", hint="zip data with model in a [[zip]], or exclude the pair")


PLAN_COLUMNS = ("id", "label", *(p.name for p in PARAMS if p.column), "world_size")


def plan_columns(points: list[Point]) -> tuple[str, ...]:
    """The plan table's columns for these points: a parameter's only where it applies to one of their kinds (a
    collective sweep shows its collective, not an empty model column)."""
    kinds = {p.kind for p in points}
    return tuple(c for c in PLAN_COLUMNS if c not in BY_NAME or any(BY_NAME[c].applies(k) for k in kinds))


def plan_rows(points: list[Point]) -> list[dict[str, Any]]:
    """The plan table: id, label, the parameters that have a column, total ranks."""
    return [{c: (p.world_size if c == "world_size" else getattr(p, c)) for c in PLAN_COLUMNS} for p in points]
