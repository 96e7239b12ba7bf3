"""Where a rank's CPUs are: the CPU topology from sysfs (socket, NUMA node, core of every CPU), and
whether the affinity in effect is the binding the launcher was asked for.

Slurm's task/affinity plugin turns ``--cpu-bind=sockets|cores`` into per-task CPU masks
(``SLURM_CPU_BIND_TYPE=mask_cpu:``, ``SLURM_CPU_BIND_LIST``); the mask of this task is compared with
``sched_getaffinity``. Under ``mpirun`` (``OMPI_MCA_hwloc_base_binding_policy``) the affinity must be
exactly one core / socket / NUMA node / hardware thread, as OpenMPI binds.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any


def read_sys(path: Path) -> str | None:
    """A sysfs (or any small text) file, stripped; None when it cannot be read."""
    try:
        return path.read_text().strip()
    except OSError:
        return None


def parse_cpulist(text: str) -> set[int]:
    """``0-3,8,10-11`` -> {0, 1, 2, 3, 8, 10, 11} (the /sys and Slurm cpu list format)."""
    cpus: set[int] = set()
    for part in text.strip().split(","):
        if part:
            lo, _, hi = part.partition("-")
            cpus.update(range(int(lo), int(hi or lo) + 1))
    return cpus


def format_cpulist(cpus: set[int] | frozenset[int]) -> str:
    """{0, 1, 2, 3, 8, 10, 11} -> ``0-3,8,10-11``: parse_cpulist's inverse, the way sysfs writes it."""
    runs: list[list[int]] = []
    for c in sorted(cpus):
        if runs and c == runs[-1][1] + 1:
            runs[-1][1] = c
        else:
            runs.append([c, c])
    return ",".join(f"{a}-{b}" if b > a else str(a) for a, b in runs)


@dataclass(frozen=True)
class CpuTopology:
    socket: dict[int, int]  # cpu -> physical package id
    numa: dict[int, int]  # cpu -> NUMA node
    core: dict[int, frozenset[int]]  # cpu -> the hardware threads of its core

    @classmethod
    def read(cls, sys_root: Path = Path("/sys")) -> CpuTopology:
        socket_of, core_of, numa_of = {}, {}, {}
        for d in (sys_root / "devices/system/cpu").glob("cpu[0-9]*"):
            cpu = int(d.name[3:])
            pkg = read_sys(d / "topology/physical_package_id")
            if pkg is not None:
                socket_of[cpu] = int(pkg)
            sib = read_sys(d / "topology/core_cpus_list") or read_sys(d / "topology/thread_siblings_list")
            core_of[cpu] = frozenset(parse_cpulist(sib)) if sib else frozenset({cpu})
        for d in (sys_root / "devices/system/node").glob("node[0-9]*"):
            for cpu in parse_cpulist(read_sys(d / "cpulist") or ""):
                numa_of[cpu] = int(d.name[4:])
        return cls(socket_of, numa_of, core_of)

    def whole(self, cpus: set[int], unit: str) -> set[int]:
        """The union of the whole units (socket, numa, core) that ``cpus`` touch."""
        if unit == "core":
            return set().union(*(self.core.get(c, {c}) for c in cpus))
        of = self.socket if unit == "socket" else self.numa
        touched = {of.get(c) for c in cpus}
        return {c for c, u in of.items() if u in touched}

    def count(self, cpus: set[int], unit: str) -> int:
        if unit == "core":
            return len({self.core.get(c, frozenset({c})) for c in cpus})
        of = self.socket if unit == "socket" else self.numa
        return len({of.get(c) for c in cpus})


# Binding names -> the topology unit they bind to. Slurm writes plurals, OpenMPI singulars.
_UNITS = {"socket": "socket", "sockets": "socket", "core": "core", "cores": "core", "numa": "numa",
          "ldom": "numa", "ldoms": "numa", "l3cache": None, "hwthread": "thread", "thread": "thread",
          "threads": "thread"}


def requested_binding(environ: Mapping[str, str]) -> tuple[str, str, list[str]] | None:
    """(source, type, list) of the binding the launcher was asked for, or None when nothing was asked."""
    if "OMPI_COMM_WORLD_RANK" in environ:
        # mpirun starts its daemons with srun --cpu-bind=none, so Slurm's variables say nothing here.
        policy = environ.get("OMPI_MCA_hwloc_base_binding_policy")
        return ("openmpi", policy.split(":")[0], []) if policy else None
    kind = environ.get("SLURM_CPU_BIND_TYPE")
    if not kind:
        return None
    kind = kind.strip(",:").split(",")[-1]
    lst = [x for x in environ.get("SLURM_CPU_BIND_LIST", "").split(",") if x]
    return "slurm", kind, lst


def check_affinity(cpus: set[int], local_rank: int, environ: Mapping[str, str], topo: CpuTopology) -> dict[str, Any]:
    """Does the affinity in effect match what the launcher was asked for? Returns the affinity block."""
    req = requested_binding(environ)
    out: dict[str, Any] = {"cpus": sorted(cpus), "sockets": sorted({topo.socket[c] for c in cpus if c in topo.socket}),
                           "numa_nodes": sorted({topo.numa[c] for c in cpus if c in topo.numa}),
                           "requested": None, "expected_cpus": None, "matches": None, "detail": "no binding requested"}
    if req is None:
        return out
    source, kind, lst = req
    out["requested"] = f"{source} {kind}" + (f":{','.join(lst)}" if lst else "")
    expected: set[int] | None = None
    if kind == "none":
        out["matches"], out["detail"] = True, "binding 'none' requested: any affinity is right"
        return out
    if kind in ("mask_cpu", "map_cpu") and lst:
        # srun reuses the list cyclically when there are more tasks than entries.
        item = lst[local_rank % len(lst)]
        expected = ({i for i in range(int(item, 16).bit_length()) if int(item, 16) >> i & 1}
                    if kind == "mask_cpu" else {int(item, 0)})
    elif unit := _UNITS.get(kind):
        if unit == "thread":
            ok = len(cpus) == 1 if source == "openmpi" else bool(cpus)
            out["matches"] = ok
            out["detail"] = f"{len(cpus)} hardware thread(s) in effect for a {kind} binding"
            return out
        expected = topo.whole(cpus, unit)
        # OpenMPI's --bind-to core|socket|numa gives each rank exactly one unit.
        if source == "openmpi" and topo.count(cpus, unit) != 1:
            out["matches"] = False
            out["detail"] = f"{kind} binding, but the affinity spans {topo.count(cpus, unit)} {unit}s"
            return out
    else:
        out["detail"] = f"cannot check a {kind!r} binding"
        return out
    out["expected_cpus"] = sorted(expected)
    out["matches"] = cpus == expected
    out["detail"] = ("affinity matches the requested binding" if out["matches"] else
                     f"requested {out['requested']} means cpus {cpu_list(expected)}, but cpus {cpu_list(cpus)} are in effect")
    return out


def cpu_list(cpus: set[int]) -> str:
    return "[" + ",".join(map(str, sorted(cpus))) + "]"


def affinity_summary(docs: list[dict[str, Any]]) -> tuple[bool | None, str]:
    """``(affinity_ok, affinity_detail)`` for a result record, from every rank's provenance."""
    if not docs:
        return None, "no provenance collected"
    checked = [d for d in docs if (d.get("affinity") or {}).get("matches") is not None]
    if not checked:
        return None, "no binding requested"
    bad = [d for d in checked if not d["affinity"]["matches"]]
    if bad:
        return False, "; ".join(f"rank {d['rank']} ({d.get('slurm_node') or d.get('hostname')}): "
                                f"{d['affinity']['detail']}" for d in bad)
    kinds = sorted({d["affinity"]["requested"].split(":")[0] for d in checked})
    return True, f"{len(checked)}/{len(docs)} ranks match the requested binding ({', '.join(kinds)})"
