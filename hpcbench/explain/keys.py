"""The exact key a fix changes, named as the user writes it: ``[slurm] cpus_per_task``, ``[workload] steps``,
``[matrix] ranks_per_node``, ``[sweep] repeats``, ``[slurm.env] NCCL_IB_HCA``; or the cluster profile's key
where the run's profile sets it (``clusters/minicluster.toml: cpu_bind``), since that is where the value came
from. Derived from plan/fields.py and the profile's keys (plan/cluster.py), never listed here; ``named(text)``
reads the keys a fix names back (the tests check that each one exists).
"""

from __future__ import annotations

import re

from hpcbench.plan.cluster import PROFILE_KEYS
from hpcbench.plan.cluster import Used as Profile
from hpcbench.plan.fields import BY_NAME, SLURM_BY_NAME, SWEEP

_SWEEP_KEYS = {s.name for s in SWEEP}


def section(name: str) -> str:
    """The sweep section a key is written in."""
    if name in BY_NAME:
        return "matrix" if BY_NAME[name].where == "matrix" else "workload"
    if name in SLURM_BY_NAME:
        return "slurm"
    if name in _SWEEP_KEYS:
        return "sweep"
    raise KeyError(f"{name!r} is no sweep key (plan/fields.py declares them)")


def key(name: str, profile: Profile | None = None, var: str | None = None) -> str:
    """The key ``name`` (with ``var``: the environment variable ``var``) as a fix names it: the profile's where it
    sets it, else the sweep's."""
    if name == "env" and var:
        if profile is not None and var in profile.env:
            return f"{profile.path}: [env] {var}"
        return f"[slurm.env] {var}"
    where = section(name)
    if profile is not None and name in profile.keys and name in PROFILE_KEYS:
        return f"{profile.path}: {name}"  # where the value came from (a sweep's own [slurm] key overrides it)
    return f"[{where}] {name}"


_NAMED = re.compile(r"\[(?:sweep|slurm|workload|matrix)\] ([a-z_]+)|\[(?:slurm\.|matrix\.)?env\] [A-Z][A-Z0-9_]*"
                    r"|\S+\.toml: ([a-z_]+)")


def named(text: str | None) -> list[str]:
    """The keys a fix names: sweep and profile keys by name, an environment variable as ``env``."""
    return [m.group(1) or m.group(2) or "env" for m in _NAMED.finditer(text or "")]
