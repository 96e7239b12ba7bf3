"""The axes of a sweep: [matrix] (crossed), [[zip]] (moving together) and [[exclude]], checked into a Matrix.

Which key may be an axis is declared in plan/fields.py, with the reason when it may not: every
measurement parameter that is not refused (fields.AXES), the [slurm] settings that change what is
measured (fields.POINT_SETTINGS), and environment variables ([matrix.env] NAME = [...], written
env.NAME in [[zip]] and [[exclude]]). Scheduler settings that only the job sees (fields.JOB_SETTINGS:
time, partition, ...) move in a [[zip]] with measured keys and never enter a point's id.

Every error names ``file: dotted.key`` and what is allowed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hpcbench.plan.checks import env_name, env_value, fail, typename, unknown_key
from hpcbench.plan.fields import AXES, BY_NAME, ENV_AXIS, JOB_SETTINGS, POINT_SETTINGS, SLURM_BY_NAME, STANDING, refusal
from hpcbench.vocab import ENV_AXES_VAR

Rows = tuple[tuple[Any, ...], ...]
ENV = f"{ENV_AXIS}."  # the prefix of an environment variable's axis key: env.NCCL_ALGO
# Variables a rank's environment gets from hpcbench or Slurm: an axis of them would be overwritten, or lie.
_RESERVED = {"OMP_NUM_THREADS": "set from cpus_per_task: make cpus_per_task the axis",
             "NCCL_DEBUG": "always INFO: the report reads the transports from its lines"}
_RESERVED_PREFIXES = ("SLURM_", "SLURMD_", "HPCBENCH_")
_ORDER = {k: i for i, k in enumerate((*STANDING, *(a for a in AXES if a not in STANDING), *POINT_SETTINGS,
                                      *JOB_SETTINGS))}


@dataclass(frozen=True)
class Matrix:
    """Every axis with the values it takes (standing axes first), the [[zip]] groups and the excludes.

    The points are the product of the factors: each axis no [[zip]] holds, and each [[zip]] (its rows),
    minus those an exclude entry matches in every key it names.
    """

    axes: tuple[tuple[str, tuple[Any, ...]], ...]
    excludes: tuple[dict[str, tuple[Any, ...]], ...] = ()
    zips: tuple[tuple[tuple[str, ...], Rows], ...] = ()
    written: tuple[tuple[str, str], ...] = ()  # (key, where the file gives it: "matrix.nodes", "zip[0].time")

    def where(self, key: str) -> str | None:
        return dict(self.written).get(key)

    def factors(self) -> list[tuple[tuple[str, ...], Rows]]:
        """The product's factors in axis order; a [[zip]] stands where its first key would."""
        zipped = {k: i for i, (keys, _) in enumerate(self.zips) for k in keys}
        out: list[tuple[tuple[str, ...], Rows]] = []
        done = set()
        for name, values in self.axes:
            i = zipped.get(name)
            if i is None:
                out.append(((name,), tuple((v,) for v in values)))
            elif i not in done:
                done.add(i)
                out.append(self.zips[i])
        return out


def is_env(key: str) -> bool:
    return key.startswith(ENV)


def _check_value(key: str, v: Any, where: str) -> Any:
    if is_env(key):
        return env_value(v, where)
    return (BY_NAME[key] if key in BY_NAME else SLURM_BY_NAME[key]).check(v, where)


def _env_name(name: str, where: str, slurm_env: tuple[tuple[str, str], ...]) -> str:
    env_name(name, where)
    why = _RESERVED.get(name) or ("set for each rank by Slurm or hpcbench" if name.startswith(_RESERVED_PREFIXES)
                                  else None)
    if why:
        raise fail(where, f"{name} cannot be an axis: {why}")
    if name in dict(slurm_env):
        raise fail(where, f"{name} is also set in [slurm.env]; give it in one place ([slurm.env] for one value, "
                          "here for several)")
    return ENV + name


def _accept(key: str, where: str, zipped: bool) -> None:
    """Raise unless ``key`` may be an axis here (scheduler-only settings only in a [[zip]] or an exclude)."""
    if key in AXES or key in POINT_SETTINGS or (zipped and key in JOB_SETTINGS):
        return
    why = refusal(key)
    if why:
        raise fail(where, f"{key} cannot be an axis: {why}")
    raise unknown_key(where, key, (*AXES, *POINT_SETTINGS, ENV_AXIS, *(JOB_SETTINGS if zipped else ())))


def _keys(entry: dict[str, Any], rel: str, p: str, zipped: bool, slurm_env: tuple[tuple[str, str], ...]
          ) -> list[tuple[str, str, Any]]:
    """(axis key, its dotted place in the file, raw value) of one table, its env subtable opened."""
    out = []
    for key, value in entry.items():
        place = f"{rel}.{key}"
        if key == ENV_AXIS:
            if not isinstance(value, dict):
                raise fail(f"{p}{place}", f"expected a table of NAME = [\"value\", ...], got {typename(value)}")
            out += [(_env_name(n, f"{p}{place}.{n}", slurm_env), f"{place}.{n}", v) for n, v in value.items()]
        else:
            _accept(key, f"{p}{place}", zipped)
            out.append((key, place, value))
    return out


def axis_values(key: str, raw: Any, where: str) -> tuple[Any, ...]:
    """A [matrix] or [[exclude]] value: one value or a list of distinct ones, each checked."""
    values = raw if isinstance(raw, list) else [raw]
    if not values:
        raise fail(where, "expected at least one value")
    out: dict[Any, None] = {}  # a dict, not a list: a 10,000-value axis is checked for duplicates in linear time
    for i, v in enumerate(values):
        v = _check_value(key, v, f"{where}[{i}]" if isinstance(raw, list) else where)
        if v in out:
            raise fail(f"{where}[{i}]", f"duplicate value {v!r}")
        out[v] = None
    return tuple(out)


def _zip(entry: Any, rel: str, p: str, written: dict[str, str], slurm_env: tuple[tuple[str, str], ...]
         ) -> tuple[tuple[str, ...], Rows]:
    if not isinstance(entry, dict) or not entry:
        raise fail(f"{p}{rel}", "expected a non-empty table of keys with one list each, e.g. nodes = [1, 2] and "
                                "time = [\"00:10:00\", \"00:20:00\"]")
    columns: dict[str, list[Any]] = {}
    first: tuple[str, str] | None = None
    for key, place, value in _keys(entry, rel, p, True, slurm_env):
        if not isinstance(value, list) or not value:
            raise fail(f"{p}{place}", f"expected a non-empty array, got {typename(value)} {value!r}: the keys of a "
                                      "[[zip]] move together, one value each per point")
        if key in written:
            raise fail(f"{p}{place}", f"also in {written[key]}; a key is crossed ([matrix]) or zipped (in one "
                                      "[[zip]]), never both")
        if first is not None and len(value) != len(columns[first[0]]):
            raise fail(f"{p}{place}", f"{_count(len(value))}, but {first[1]} has {_count(len(columns[first[0]]))}: "
                                      "the keys of a [[zip]] move together, so each needs as many values")
        first = first or (key, place)
        columns[key] = [_check_value(key, v, f"{p}{place}[{i}]") for i, v in enumerate(value)]
        written[key] = place
    keys = tuple(columns)
    rows = tuple(zip(*columns.values()))
    _distinct_rows(keys, rows, f"{p}{rel}")
    return keys, rows


def _count(n: int) -> str:
    return f"{n} value" if n == 1 else f"{n} values"


def _distinct_rows(keys: tuple[str, ...], rows: Rows, where: str) -> None:
    """Rows must differ in a measured key: scheduler settings alone never tell two points apart."""
    measured = [i for i, k in enumerate(keys) if k not in JOB_SETTINGS]
    if not measured and len(rows) > 1:
        raise fail(where, f"moves only scheduler settings ({', '.join(keys)}), which never enter a point's id, so "
                          "its points would repeat; zip them with a measured key, e.g. nodes")
    seen: dict[tuple[Any, ...], int] = {}
    for j, row in enumerate(rows):
        point = tuple(row[i] for i in measured)
        if point in seen:
            shown = ", ".join(f"{keys[i]} = {row[i]!r}" for i in measured)
            raise fail(where, f"rows {seen[point]} and {j} (counting from 0) are the same point ({shown}); "
                              "each row of a [[zip]] must differ in a measured key")
        seen[point] = j


def zips(raw: Any, p: str, written: dict[str, str], slurm_env: tuple[tuple[str, str], ...]
         ) -> tuple[tuple[tuple[str, ...], Rows], ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise fail(f"{p}zip", "expected an array of tables: write each entry as [[zip]]")
    return tuple(_zip(entry, f"zip[{i}]", p, written, slurm_env) for i, entry in enumerate(raw))


def excludes(raw: Any, p: str, axes: dict[str, tuple[Any, ...]], slurm_env: tuple[tuple[str, str], ...]
             ) -> tuple[dict[str, tuple[Any, ...]], ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise fail(f"{p}exclude", "expected an array of tables: write each entry as [[exclude]]")
    out = []
    for i, entry in enumerate(raw):
        if not isinstance(entry, dict) or not entry:
            raise fail(f"{p}exclude[{i}]", "expected a non-empty table of matrix keys, e.g. "
                                           "{ backend = \"mpi\", nodes = 4 }")
        rule = {}
        for key, place, value in _keys(entry, f"exclude[{i}]", p, True, ()):
            if is_env(key) and key not in axes:
                varied = ", ".join(k for k in axes if is_env(k)) or "none"
                raise fail(f"{p}{place}", f"not an environment variable this sweep varies (its env axes: {varied})")
            rule[key] = axis_values(key, value, f"{p}{place}")
        out.append(rule)
    return tuple(out)


def matrix(raw: Any, raw_zip: Any, raw_excludes: Any, workload: dict[str, Any], slurm_env: tuple[tuple[str, str], ...],
           p: str) -> Matrix:
    """[matrix], [[zip]] and [[exclude]] of one sweep file; ``workload`` gives the values of standing axes it
    does not vary."""
    raw = {} if raw is None else raw
    if not isinstance(raw, dict):
        raise fail(f"{p}matrix", f"expected a table [matrix], got {typename(raw)}")
    written: dict[str, str] = {}
    crossed: dict[str, tuple[Any, ...]] = {}
    for key, place, value in _keys(raw, "matrix", p, False, slurm_env):
        crossed[key] = axis_values(key, value, f"{p}{place}")
        written[key] = place
    groups = zips(raw_zip, p, written, slurm_env)
    _layout_rules(written, workload, p)
    values = dict(crossed)
    for keys, rows in groups:
        values.update((k, tuple(dict.fromkeys(row[i] for row in rows))) for i, k in enumerate(keys))
    # A standing axis the sweep does not vary takes one value: its [workload] key, or its default. Of the two
    # ways to say ranks per node, only the one written (else ranks_per_node) is an axis.
    layout = "gpus_per_node" if "gpus_per_node" in written else "ranks_per_node"
    for name in STANDING:
        if name not in values and (name not in ("gpus_per_node", "ranks_per_node") or name == layout):
            values[name] = (workload.get(name, BY_NAME[name].default),)
    ordered = sorted(values, key=lambda k: (_ORDER.get(k, len(_ORDER)), list(values).index(k) if is_env(k) else 0))
    axes = tuple((k, values[k]) for k in ordered)
    return Matrix(axes, excludes(raw_excludes, p, dict(axes), slurm_env), groups, tuple(written.items()))


def _layout_rules(written: dict[str, str], workload: dict[str, Any], p: str) -> None:
    if "ranks_per_node" in written and "gpus_per_node" in written:
        raise fail(f"{p}{written['gpus_per_node']}", "give ranks_per_node or gpus_per_node, not both "
                                                     "(one rank runs per GPU)")
    if "gpus_per_node" in written and workload["device"] != "cuda":
        raise fail(f"{p}{written['gpus_per_node']}", 'needs workload.device = "cuda"; use ranks_per_node on CPU')
    kind = workload["kind"]
    for key, where in written.items():
        param = BY_NAME.get(key)
        if param is not None and not param.standing and not param.applies(kind):
            raise fail(f"{p}{where}", f"does not apply to workload.kind = {kind!r} (only to: "
                                      f"{', '.join(sorted(param.kinds))}), so its points would repeat")


def env_axes_var(env: tuple[tuple[str, str], ...]) -> tuple[str, str]:
    """The variable that tells the ranks which of their variables are axes (their records keep those)."""
    return ENV_AXES_VAR, " ".join(name for name, _ in env)
