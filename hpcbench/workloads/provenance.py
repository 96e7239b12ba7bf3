"""Per-rank provenance: where a rank ran, how it was bound, and with which software and hardware.

``collect()`` returns one ``hpcbench.provenance/1`` document; ``start()``/``finish()`` wrap a
measurement so that InfiniBand port counters are read before and after it. Every probe is guarded:
a missing tool or file gives ``null`` and a reason under ``unavailable``, never an exception, so a
provenance problem can never fail a measurement.

Binding check: Slurm's task/affinity plugin turns ``--cpu-bind=sockets|cores`` into per-task CPU
masks (``SLURM_CPU_BIND_TYPE=mask_cpu:``, ``SLURM_CPU_BIND_LIST``); the mask of this task is
compared with ``sched_getaffinity``. Under ``mpirun`` (``OMPI_MCA_hwloc_base_binding_policy``) the
affinity must be exactly one core / socket / NUMA node / hardware thread, as OpenMPI binds.
"""

from __future__ import annotations

import os
import platform
import re
import socket
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hpcbench import proc, records
from hpcbench.vocab import ENV_AXES_VAR

ENV_PREFIXES = ("NCCL_", "HOROVOD_", "SLURM_", "CCL_", "OMPI_MCA_hwloc", "OMPI_MCA_rmaps")
ENV_NAMES = ("CUDA_VISIBLE_DEVICES", "OMP_NUM_THREADS", "MASTER_ADDR", "MASTER_PORT")
NET_TYPES = {1: "ethernet", 32: "infiniband", 772: "loopback"}  # ARPHRD_* in /sys/class/net/*/type
_TIMEOUT_S = 20


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def _run(argv: list[str]) -> str:
    """stdout of a tool; raises with a one-line reason when it is missing or fails (``_probe`` records it)."""
    ran = proc.run(argv, timeout=_TIMEOUT_S)
    if not ran.ok:
        raise RuntimeError(ran.why() if ran.problem else f"{' '.join(argv)} exited {ran.returncode}: {ran.why()}")
    return ran.stdout


def parse_cpulist(text: str) -> set[int]:
    """``0-3,8,10-11`` -> {0, 1, 2, 3, 8, 10, 11} (the /sys and Slurm cpu list format)."""
    cpus: set[int] = set()
    for part in text.strip().split(","):
        if part:
            lo, _, hi = part.partition("-")
            cpus.update(range(int(lo), int(hi or lo) + 1))
    return cpus


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
            pkg = _read(d / "topology/physical_package_id")
            if pkg is not None:
                socket_of[cpu] = int(pkg)
            sib = _read(d / "topology/core_cpus_list") or _read(d / "topology/thread_siblings_list")
            core_of[cpu] = frozenset(parse_cpulist(sib)) if sib else frozenset({cpu})
        for d in (sys_root / "devices/system/node").glob("node[0-9]*"):
            for cpu in parse_cpulist(_read(d / "cpulist") or ""):
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
    elif _UNITS.get(kind):
        unit = _UNITS[kind]
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
                     f"requested {out['requested']} means cpus {_fmt(expected)}, but cpus {_fmt(cpus)} are in effect")
    return out


def _fmt(cpus: set[int]) -> str:
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


# --- probes: each returns its value or raises; collect() turns a raise into null + reason ------------

def _gpus() -> list[dict[str, Any]]:
    import torch

    gpus = []
    for i in range(torch.cuda.device_count()):
        p = torch.cuda.get_device_properties(i)
        bus = f"{p.pci_domain_id:08x}:{p.pci_bus_id:02x}:{p.pci_device_id:02x}.0".upper()
        gpus.append({"index": i, "name": p.name, "bus_id": bus, "memory_mib": p.total_memory // 2**20})
    if not gpus:
        raise LookupError("torch sees no CUDA device on this node")
    return gpus


def _driver() -> str:
    try:
        import pynvml  # the nvidia-ml-py package, when installed

        pynvml.nvmlInit()
        v = pynvml.nvmlSystemGetDriverVersion()
        return v.decode() if isinstance(v, bytes) else str(v)
    except ImportError:
        pass
    return _run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"]).splitlines()[0].strip()


def _nccl() -> str:
    import torch

    v = torch.cuda.nccl.version()
    return ".".join(map(str, v)) if isinstance(v, tuple) else str(v)


def mpi_version() -> str:
    """The MPI library version, without initialising MPI (mpi4py with rc.initialize off, else the tools)."""
    try:
        import mpi4py

        mpi4py.rc.initialize = False
        from mpi4py import MPI

        return MPI.Get_library_version().strip().splitlines()[0]
    except ImportError:
        pass
    reasons = []
    for argv in (["ompi_info", "--version"], ["mpirun", "--version"]):
        try:
            first = next(line.strip() for line in _run(argv).splitlines() if line.strip())
        except (OSError, RuntimeError, StopIteration) as e:
            reasons.append(str(e) or type(e).__name__)
            continue
        m = re.match(r"^(?:mpirun|mpiexec) \((.+)\) (\S+)$", first)  # "mpirun (Open MPI) 4.1.4"
        return f"{m.group(1)} v{m.group(2)}" if m else first
    raise FileNotFoundError("mpi4py is not installed; " + "; ".join(reasons))


def _os_release() -> str:
    text = Path("/etc/os-release").read_text()
    m = re.search(r'^PRETTY_NAME="?([^"\n]*)"?', text, re.MULTILINE)
    if not m:
        raise ValueError("/etc/os-release has no PRETTY_NAME")
    return m.group(1)


def _nics(sys_root: Path) -> list[dict[str, Any]]:
    root = sys_root / "class/net"
    if not root.is_dir():
        raise FileNotFoundError(f"{root} does not exist")
    nics = []
    for d in sorted(root.iterdir()):
        t = _read(d / "type")
        kind = NET_TYPES.get(int(t), f"type {t}") if t and t.isdigit() else None
        if kind == "ethernet" and not (d / "device").exists():
            kind = "virtual"
        driver = Path(os.readlink(d / "device/driver")).name if (d / "device/driver").is_symlink() else None
        speed = _read(d / "speed")  # Mb/s; reading it fails (EINVAL) on links that are down
        nics.append({"name": d.name, "kind": kind, "model": driver,
                     "speed": int(speed) if speed and speed.lstrip("-").isdigit() and int(speed) > 0 else None,
                     "state": _read(d / "operstate")})
    return nics


def ib_devices(sys_root: Path = Path("/sys")) -> list[dict[str, Any]]:
    """InfiniBand HCAs and their ports, with the data counters as they are now."""
    root = sys_root / "class/infiniband"
    if not root.is_dir():
        raise FileNotFoundError(f"{root} does not exist (no InfiniBand/RDMA devices on this node)")
    devices = []
    for d in sorted(root.iterdir()):
        ports = []
        for p in sorted((d / "ports").glob("*"), key=lambda p: int(p.name) if p.name.isdigit() else 0):
            ports.append({"port": int(p.name) if p.name.isdigit() else p.name, "state": _read(p / "state"),
                          "rate": _read(p / "rate"), "link_layer": _read(p / "link_layer"),
                          "counters_before": _ib_counters(p), "counters_after": None,
                          "xmit_bytes": None, "rcv_bytes": None})
        devices.append({"name": d.name, "hca_type": _read(d / "hca_type"), "fw_ver": _read(d / "fw_ver"),
                        "node_guid": _read(d / "node_guid"), "ports": ports})
    return devices


def _ib_counters(port: Path) -> dict[str, int | None]:
    out: dict[str, int | None] = {}
    for name in ("port_xmit_data", "port_rcv_data"):
        v = _read(port / "counters" / name)
        out[name] = int(v) if v and v.isdigit() else None
    return out


def ib_after(devices: list[dict[str, Any]], sys_root: Path = Path("/sys")) -> None:
    """Read the counters again and fill the bytes moved: the data counters count 4-byte words."""
    for d in devices:
        for p in d["ports"]:
            after = _ib_counters(sys_root / "class/infiniband" / d["name"] / "ports" / str(p["port"]))
            p["counters_after"] = after
            for key, name in (("xmit_bytes", "port_xmit_data"), ("rcv_bytes", "port_rcv_data")):
                a, b = after.get(name), p["counters_before"].get(name)
                p[key] = (a - b) * 4 if a is not None and b is not None and a >= b else None


def _git_commit() -> str:
    repo = Path(__file__).resolve().parents[2]  # hpcbench/workloads/provenance.py -> the checkout
    if not (repo / ".git").exists():
        raise FileNotFoundError(f"{repo} is not a git checkout (hpcbench is installed, not run from source)")
    return _run(["git", "-C", str(repo), "rev-parse", "HEAD"]).strip()


def _env(environ: Mapping[str, str]) -> dict[str, str]:
    """The variables that shape communication, and those the point varies ([matrix.env], named in ENV_AXES_VAR)."""
    axes = {ENV_AXES_VAR, *environ.get(ENV_AXES_VAR, "").split()}
    return {k: v for k, v in sorted(environ.items()) if k.startswith(ENV_PREFIXES) or k in ENV_NAMES or k in axes}


def _probe(unavailable: dict[str, str], key: str, fn: Callable[[], Any]) -> Any:
    try:
        return fn()
    except Exception as e:  # noqa: BLE001 - provenance must never fail the measurement it describes
        first = str(e).strip().splitlines()
        unavailable[key] = f"{type(e).__name__}: {first[0]}" if first else type(e).__name__
        return None


def collect(rank: int = 0, local_rank: int = 0, *, environ: Mapping[str, str] | None = None,
            sys_root: Path = Path("/sys"), topology: bool | None = None) -> dict[str, Any]:
    """The provenance of this process. ``topology`` (default: local rank 0) runs ``nvidia-smi topo -m``."""
    from hpcbench.workloads.capabilities import detect

    environ = os.environ if environ is None else environ
    un: dict[str, str] = {}
    caps = detect()
    cpus = set(os.sched_getaffinity(0))
    topo = _probe(un, "cpu_topology", lambda: CpuTopology.read(sys_root)) or CpuTopology({}, {}, {})
    want_topo = local_rank == 0 if topology is None else topology
    doc: dict[str, Any] = {
        "schema": records.tag(records.PROVENANCE),
        "rank": rank, "local_rank": local_rank, "hostname": socket.gethostname(),
        "slurm_node": environ.get("SLURMD_NODENAME"), "pid": os.getpid(),
        "affinity": check_affinity(cpus, local_rank, environ, topo),
        "gpus": _probe(un, "gpus", _gpus) or [],
        "driver": _probe(un, "driver", _driver),
        "cuda": caps.cuda_version,
        "nccl": _probe(un, "nccl", _nccl) if caps.torch else None,
        "software": {
            "torch": caps.torch, "torchvision": caps.torchvision, "horovod": caps.horovod,
            "horovod_build": caps.horovod_build or None, "mpi": _probe(un, "mpi", mpi_version),
            "python": platform.python_version(), "os": _probe(un, "os", _os_release), "kernel": platform.release(),
        },
        "nics": _probe(un, "nics", lambda: _nics(sys_root)) or [],
        "infiniband": {"devices": _probe(un, "infiniband", lambda: ib_devices(sys_root)) or []},
        "topology": _probe(un, "topology", lambda: _run(["nvidia-smi", "topo", "-m"])) if want_topo else None,
        "env": _env(environ),
        "git_commit": _probe(un, "git_commit", _git_commit),
        "unavailable": un,
    }
    if not want_topo:
        un["topology"] = "collected once per node, by local rank 0"
    for key in ("torch", "torchvision", "horovod"):
        if caps.reasons.get(key) and caps.reasons[key] != "not probed":
            un[f"software.{key}"] = caps.reasons[key]
    if caps.cuda_version is None and caps.torch:
        un["cuda"] = "torch is built without CUDA"
    return doc


@dataclass
class Recorder:
    """A rank's provenance around one measurement: written at start (a crash still leaves it), completed at finish."""

    doc: dict[str, Any]
    path: Path | None
    sys_root: Path = Path("/sys")
    done: bool = field(default=False)

    def write(self) -> None:
        if self.path is not None:
            from hpcbench.rundir import atomic_write_json

            atomic_write_json(self.path, self.doc)

    def finish(self) -> dict[str, Any]:
        if not self.done:
            from hpcbench.rundir import utcnow

            self.done = True
            ib_after(self.doc["infiniband"]["devices"], self.sys_root)
            self.doc["finished_at"] = utcnow()
            self.write()
        return self.doc


def start(path: Path | None, rank: int, local_rank: int, **kw: Any) -> Recorder:
    """Collect this rank's provenance and write it to ``path`` (``PointPaths.provenance(rank)``)."""
    from hpcbench.rundir import utcnow

    rec = Recorder(collect(rank, local_rank, **kw), path, kw.get("sys_root", Path("/sys")))
    rec.doc["started_at"] = utcnow()
    rec.write()
    return rec
