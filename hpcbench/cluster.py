"""Cluster profiles: what an admin writes once about a site, and the limits every point must keep.

A profile lives in ``clusters/<name>.toml`` and is named by a sweep (``cluster = "name"``), by
``--cluster NAME`` or by ``HPCBENCH_CLUSTER``; or it is written inline as a ``[cluster]`` table in
the sweep. Its scheduler keys are defaults under the sweep's own ``[slurm]`` keys; its lists
(``modules``, ``module_use``, ``sbatch_args``) come first and the sweep's are appended; its ``env`` is
overridden name by name. Its ``max_*`` limits refuse points at plan time, before anything is
written or submitted.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hpcbench.errors import ConfigError

if TYPE_CHECKING:
    from hpcbench.plan import Point
    from hpcbench.spec import SweepSpec

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

#: Where ``cluster = "name"`` is looked for, after the folders in $HPCBENCH_CLUSTER_PATH.
SEARCH_HINT = "$HPCBENCH_CLUSTER_PATH, clusters/ beside or above the sweep file, ./clusters"

# Keys of a profile that are defaults for the sweep's [slurm] section (same names, same checks).
SLURM_DEFAULT_KEYS = ("partition", "account", "qos", "gres", "time", "cpus_per_task", "mem", "launcher", "mpi",
                      "cpu_bind", "python")
# Keys whose values are prepended to the sweep's (site stack first, then the sweep's own additions).
SLURM_LIST_KEYS = ("module_use", "modules", "sbatch_args")
LIMIT_KEYS = ("max_nodes", "max_gpus_per_node", "max_cpus_per_node", "max_time")


@dataclass(frozen=True)
class ClusterProfile:
    name: str
    source: str  # the file it came from, or "<sweep>: cluster" when inline
    description: str = ""
    slurm: tuple[tuple[str, Any], ...] = ()  # the [slurm] keys it sets, already checked
    env: tuple[tuple[str, str], ...] = ()
    max_nodes: int | None = None
    max_gpus_per_node: int | None = None
    max_cpus_per_node: int | None = None
    max_time: str | None = None

    def get(self, key: str, default: Any = None) -> Any:
        return dict(self.slurm).get(key, default)


def _fields() -> dict[str, tuple[Any, Any]]:
    from hpcbench import spec

    own = {
        "name": (spec.SWEEP_FIELDS["name"][0], None),
        "description": (spec._text, ""),
        "max_nodes": (spec._int(1), None),
        "max_gpus_per_node": (spec._int(0), None),
        "max_cpus_per_node": (spec._int(1), None),
        "max_time": (spec.SLURM_FIELDS["time"][0], None),
    }
    return {**own, **{k: spec.SLURM_FIELDS[k] for k in (*SLURM_DEFAULT_KEYS, *SLURM_LIST_KEYS, "env")}}


def from_table(raw: Any, where: str, source: str, base_dir: Path, default_name: str) -> ClusterProfile:
    """Check a profile table (a whole profile file, or a sweep's [cluster] section)."""
    from hpcbench import spec

    if not isinstance(raw, dict):
        raise ConfigError(f"{where}: expected a table of profile keys, got {spec._typename(raw)}")
    fields = _fields()
    values: dict[str, Any] = {}
    for key, value in raw.items():
        if key not in fields:
            raise spec._unknown(f"{where}.{key}" if where else key, key, fields)
        values[key] = fields[key][0](value, f"{where}.{key}" if where else key)
    # Relative module folders are relative to the file that names them, not to wherever hpcbench runs.
    if "module_use" in values:
        values["module_use"] = tuple(str((base_dir / d).resolve()) if not d.startswith(("/", "$")) else d
                                     for d in values["module_use"])
    slurm = tuple((k, values[k]) for k in (*SLURM_DEFAULT_KEYS, *SLURM_LIST_KEYS) if k in values)
    return ClusterProfile(name=values.get("name") or default_name, source=source,
                          description=values.get("description", ""), slurm=slurm, env=values.get("env", ()),
                          **{k: values.get(k) for k in LIMIT_KEYS})


def search_dirs(sweep_path: str | Path | None) -> list[Path]:
    dirs = [Path(d) for d in os.environ.get("HPCBENCH_CLUSTER_PATH", "").split(":") if d]
    if sweep_path is not None:
        here = Path(sweep_path).resolve().parent
        dirs += [here / "clusters", here.parent / "clusters"]
    dirs.append(Path.cwd() / "clusters")
    return dirs


def find(name: str, sweep_path: str | Path | None = None) -> Path:
    """The file of profile ``name``: a path (ends in .toml), or ``<dir>/<name>.toml`` on the search path."""
    if name.endswith(".toml") or "/" in name:
        base = Path(sweep_path).resolve().parent if sweep_path else Path.cwd()
        path = base / name
        if path.is_file():
            return path
        raise ConfigError(f"cluster profile {name}: no such file", hint=f"looked for {path}")
    tried = []
    for d in search_dirs(sweep_path):
        path = d / f"{name}.toml"
        if path.is_file():
            return path
        tried.append(str(d))
    known = sorted({p.stem for d in search_dirs(sweep_path) if d.is_dir() for p in d.glob("*.toml")})
    raise ConfigError(f"cluster profile {name!r} not found (known: {', '.join(known) or 'none'})",
                      hint=f"write clusters/{name}.toml; looked in {', '.join(dict.fromkeys(tried))}")


def load(name: str, sweep_path: str | Path | None = None) -> ClusterProfile:
    path = find(name, sweep_path)
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{path}: not valid TOML: {e}") from None
    return from_table(raw, f"{path}:", str(path), path.parent, path.stem)


def merge_slurm(profile: ClusterProfile | None, raw_slurm: dict[str, Any], checked: dict[str, Any]) -> dict[str, Any]:
    """The sweep's [slurm] values over the profile's: ``raw_slurm`` says which keys the sweep wrote."""
    if profile is None:
        return checked
    out = dict(checked)
    for key in SLURM_DEFAULT_KEYS:
        if key not in raw_slurm and profile.get(key) is not None:
            out[key] = profile.get(key)
    for key in SLURM_LIST_KEYS:
        out[key] = tuple(dict.fromkeys((*profile.get(key, ()), *checked[key])))
    out["env"] = tuple({**dict(profile.env), **dict(checked["env"])}.items())
    return out


def violations(spec: SweepSpec, points: list[Point]) -> list[str]:
    """Why each point (or the sweep's time limit) does not fit the cluster; empty when all fit."""
    from hpcbench.spec import time_limit_seconds

    c = spec.cluster
    if c is None:
        return []
    out = []
    if c.max_time and time_limit_seconds(spec.slurm.time) > time_limit_seconds(c.max_time):
        out.append(f"slurm.time = {spec.slurm.time} exceeds max_time = {c.max_time}")
    for p in points:
        why = []
        if c.max_nodes is not None and p.nodes > c.max_nodes:
            why.append(f"nodes = {p.nodes} exceeds max_nodes = {c.max_nodes}")
        if c.max_gpus_per_node is not None and p.gpus_per_node > c.max_gpus_per_node:
            why.append(f"gpus_per_node = {p.gpus_per_node} " + ("but the cluster has no GPUs" if c.max_gpus_per_node == 0
                       else f"exceeds max_gpus_per_node = {c.max_gpus_per_node}"))
        cpus = p.ranks_per_node * spec.slurm.cpus_per_task
        if c.max_cpus_per_node is not None and cpus > c.max_cpus_per_node:
            why.append(f"ranks_per_node x cpus_per_task = {p.ranks_per_node} x {spec.slurm.cpus_per_task} = {cpus} "
                       f"exceeds max_cpus_per_node = {c.max_cpus_per_node}")
        if why:
            out.append(f"point {p.label}: {'; '.join(why)}")
    return out


def check(spec: SweepSpec, points: list[Point]) -> None:
    """Refuse the sweep at plan time when any point does not fit its cluster profile."""
    bad = violations(spec, points)
    if bad:
        c = spec.cluster
        assert c is not None
        more = f" (and {len(bad) - 3} more)" if len(bad) > 3 else ""
        raise ConfigError(f"{spec.path}: does not fit cluster {c.name!r} ({c.source}): {'; '.join(bad[:3])}{more}",
                          hint="narrow the [matrix], add an [[exclude]], or lower slurm.time")
