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
from typing import Any

from hpcbench.errors import ConfigError, NoSuchFile, read_text
from hpcbench.files import toml
from hpcbench.plan import checks
from hpcbench.plan.fields import SLURM_BY_NAME, SWEEP

#: Where ``cluster = "name"`` is looked for, after the folders in $HPCBENCH_CLUSTER_PATH.

# Keys of a profile that are defaults for the sweep's [slurm] section (same names, same checks).
SLURM_DEFAULT_KEYS = ("partition", "account", "qos", "gres", "time", "cpus_per_task", "mem", "launcher", "mpi",
                      "cpu_bind", "gpu_bind", "python")
# Keys whose values are prepended to the sweep's (site stack first, then the sweep's own additions).
SLURM_LIST_KEYS = ("module_use", "modules", "sbatch_args")
LIMIT_KEYS = ("max_nodes", "max_gpus_per_node", "max_cpus_per_node", "max_time")
INLINE = "inline"  # the name of a sweep's [cluster] table that gives none: it names no cluster
INSTALLED = Path(sys.prefix) / "share" / "hpcbench" / "clusters"


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

    @property
    def cluster_name(self) -> str | None:
        """The cluster's name, as runs record it (history, references); None for an inline table without one."""
        return None if self.name == INLINE else self.name


_OWN: dict[str, checks.Checker] = {
    "name": SWEEP[0].check,
    "description": checks.text,
    "max_nodes": checks.integer(1),
    "max_gpus_per_node": checks.integer(0),
    "max_cpus_per_node": checks.integer(1),
    "max_time": checks.slurm_time,
}
PROFILE_KEYS: dict[str, checks.Checker] = {**_OWN, **{k: SLURM_BY_NAME[k].check for k in
                                                       (*SLURM_DEFAULT_KEYS, *SLURM_LIST_KEYS, "env")}}


def from_table(raw: Any, where: str, source: str, base_dir: Path, default_name: str) -> ClusterProfile:
    """Check a profile table (a whole profile file, or a sweep's [cluster] section)."""
    if not isinstance(raw, dict):
        raise ConfigError(f"{where}: expected a table of profile keys, got {checks.typename(raw)}")
    values: dict[str, Any] = {}
    for key, value in raw.items():
        if key not in PROFILE_KEYS:
            raise checks.unknown_key(f"{where}.{key}" if where else key, key, PROFILE_KEYS)
        values[key] = PROFILE_KEYS[key](value, f"{where}.{key}" if where else key)
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
    dirs.append(INSTALLED)  # the profiles pip installed with hpcbench (setup.cfg [options.data_files])
    return dirs


def find(name: str, sweep_path: str | Path | None = None) -> Path:
    """The file of profile ``name``: a path (ends in .toml), or ``<dir>/<name>.toml`` on the search path."""
    if name.endswith(".toml") or "/" in name:
        base = Path(sweep_path).resolve().parent if sweep_path else Path.cwd()
        path = base / name
        if path.is_file():
            return path
        raise NoSuchFile(name, "cluster profile file", hint=f"looked for {path}")
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
    raw = toml(read_text(path, "cluster profile"), path)
    return from_table(raw, f"{path}:", str(path), path.parent, path.stem)


def merge_slurm(profile: ClusterProfile, raw_slurm: dict[str, Any], checked: dict[str, Any]) -> dict[str, Any]:
    """The sweep's [slurm] values over the profile's: ``raw_slurm`` says which keys the sweep wrote."""
    out = dict(checked)
    for key in SLURM_DEFAULT_KEYS:
        if key not in raw_slurm and profile.get(key) is not None:
            out[key] = profile.get(key)
    for key in SLURM_LIST_KEYS:
        out[key] = tuple(dict.fromkeys((*profile.get(key, ()), *checked[key])))
    out["env"] = tuple({**dict(profile.env), **dict(checked["env"])}.items())
    return out


@dataclass(frozen=True)
class Used:
    """The cluster profile a run used, as a fix names it: its file as shown (clusters/minicluster.toml), the keys
    it set that the run's own sweep did not (so their values came from it), and the [env] names likewise."""

    path: str
    keys: frozenset[str]
    env: frozenset[str]


def used(profile_file: Path, sweep_file: Path) -> Used | None:
    """What ``profile_file`` set for the sweep in ``sweep_file`` (a run directory's copy); None where either cannot
    be read (a profile moved since the run)."""
    try:
        prof = toml(profile_file.read_text(), profile_file)
        sweep = toml(sweep_file.read_text(), sweep_file) if sweep_file.is_file() else {}
    except (OSError, ConfigError):
        return None
    slurm = sweep.get("slurm") or {}
    env = slurm.get("env") or {}
    shown = f"{profile_file.parent.name}/{profile_file.name}" if profile_file.parent.name else profile_file.name
    return Used(shown, frozenset(k for k in prof if k not in slurm and k != "env"),
                frozenset(k for k in prof.get("env") or {} if k not in env))
