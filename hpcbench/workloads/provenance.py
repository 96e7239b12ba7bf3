"""Per-rank provenance: where a rank ran, how it was bound, and with which software and hardware.

``collect()`` returns one ``hpcbench.provenance/2`` document; ``start()``/``finish()`` wrap a
measurement so that InfiniBand port counters are read before and after it, and ``Recorder.wire()`` reads every
network interface's byte counters before and after the timed steps (``wire``): the bytes that crossed each link. Every probe is guarded:
a missing tool or file gives ``null`` and a reason under ``unavailable``, never an exception, so a
provenance problem can never fail a measurement.

The binding check and the CPU topology are in affinity.py; the transport of the CPU backends (added once the
point's framework and backend are known) in transport.py.
"""

from __future__ import annotations

import contextlib
import os
import platform
import re
import socket
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hpcbench import proc, records
from hpcbench.vocab import ENV_AXES_VAR
from hpcbench.workloads.affinity import CpuTopology, check_affinity, cpuset_cpus, read_sys

ENV_PREFIXES = ("NCCL_", "HOROVOD_", "SLURM_", "CCL_", "GLOO_", "OMPI_MCA_")
ENV_NAMES = ("CUDA_VISIBLE_DEVICES", "OMP_NUM_THREADS", "MASTER_ADDR", "MASTER_PORT")
NET_TYPES = {1: "ethernet", 32: "infiniband", 772: "loopback"}  # ARPHRD_* in /sys/class/net/*/type
_TIMEOUT_S = 20
LINKS_VAR = "HPCBENCH_LINKS"  # a TOML file: [node] interface, bits_per_second, source (the minicluster writes one)


def _run(argv: list[str]) -> str:
    """stdout of a tool; raises with a one-line reason when it is missing or fails (``_probe`` records it)."""
    ran = proc.run(argv, timeout=_TIMEOUT_S)
    if not ran.ok:
        raise RuntimeError(ran.why() if ran.problem else f"{' '.join(argv)} exited {ran.returncode}: {ran.why()}")
    return ran.stdout


# --- probes: each returns its value or raises; collect() turns a raise into null + reason ------------

def sysfs_bus_id(bus_id: str) -> str:
    """NVML's ``00000000:3B:00.0`` -> sysfs's ``0000:3b:00.0`` (4-digit domain, lower case)."""
    domain, _, rest = bus_id.strip().partition(":")
    return f"{int(domain, 16):04x}:{rest.lower()}"


def pcie_link(bus_id: str, sys_root: Path = Path("/sys")) -> dict[str, Any] | None:
    """The PCIe link a device trained to, and the most it could: {"speed": "16.0 GT/s PCIe", "width": 16,
    "max_speed": ..., "max_width": ...}, from sysfs; None where sysfs has no such device."""
    d = sys_root / "bus/pci/devices" / sysfs_bus_id(bus_id)
    speed, width = read_sys(d / "current_link_speed"), read_sys(d / "current_link_width")
    if speed is None or width is None or not width.isdigit():
        return None
    max_width = read_sys(d / "max_link_width")
    return {"speed": speed, "width": int(width), "max_speed": read_sys(d / "max_link_speed"),
            "max_width": int(max_width) if max_width and max_width.isdigit() else None}


def nvml_bus_id(props: Any) -> str:
    """A CUDA device's PCI bus id as NVML and nvidia-smi write it, from torch's device properties."""
    return f"{props.pci_domain_id:08x}:{props.pci_bus_id:02x}:{props.pci_device_id:02x}.0".upper()


def _gpus() -> list[dict[str, Any]]:
    import torch

    gpus = []
    for i in range(torch.cuda.device_count()):
        p = torch.cuda.get_device_properties(i)
        bus = nvml_bus_id(p)
        gpus.append({"index": i, "name": p.name, "bus_id": bus, "memory_mib": p.total_memory // 2**20,
                     "pcie": pcie_link(bus)})
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
        t = read_sys(d / "type")
        kind = NET_TYPES.get(int(t), f"type {t}") if t and t.isdigit() else None
        if kind == "ethernet" and not (d / "device").exists():
            kind = "virtual"
        driver = Path(os.readlink(d / "device/driver")).name if (d / "device/driver").is_symlink() else None
        speed = read_sys(d / "speed")  # Mb/s; reading it fails (EINVAL) on links that are down
        nics.append({"name": d.name, "kind": kind, "model": driver,
                     "speed": int(speed) if speed and speed.lstrip("-").isdigit() and int(speed) > 0 else None,
                     "state": read_sys(d / "operstate")})
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
            ports.append({"port": int(p.name) if p.name.isdigit() else p.name, "state": read_sys(p / "state"),
                          "rate": read_sys(p / "rate"), "link_layer": read_sys(p / "link_layer"),
                          "counters_before": _ib_counters(p), "counters_after": None,
                          "xmit_bytes": None, "rcv_bytes": None})
        devices.append({"name": d.name, "hca_type": read_sys(d / "hca_type"), "fw_ver": read_sys(d / "fw_ver"),
                        "node_guid": read_sys(d / "node_guid"), "ports": ports})
    return devices


def _ib_counters(port: Path) -> dict[str, int | None]:
    out: dict[str, int | None] = {}
    for name in ("port_xmit_data", "port_rcv_data"):
        v = read_sys(port / "counters" / name)
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


def net_counters(sys_root: Path = Path("/sys")) -> dict[str, dict[str, int]]:
    """Every interface's byte and packet counters now: {name: {tx_bytes, rx_bytes, tx_packets, rx_packets}}.
    Inside a network namespace these are the namespace's own interfaces (the minicluster's eth0 is its veth)."""
    root = sys_root / "class/net"
    if not root.is_dir():
        raise FileNotFoundError(f"{root} does not exist")
    out = {}
    for d in sorted(root.iterdir()):
        vals = {k: read_sys(d / "statistics" / k) for k in ("tx_bytes", "rx_bytes", "tx_packets", "rx_packets")}
        out[d.name] = {k: int(v) for k, v in vals.items() if v and v.isdigit()}
    return out


def declared_link(environ: Mapping[str, str], node: str | None) -> dict[str, Any] | None:
    """This node's entry in the links file named by HPCBENCH_LINKS (the minicluster writes one): its interface and
    the rate it is shaped or rated to, with the source of that figure. None when no file is named."""
    path = environ.get(LINKS_VAR)
    if not path:
        return None
    from hpcbench.files import toml

    table = toml(Path(path).read_text(encoding="utf-8"), path)
    entry = table.get(node or socket.gethostname())
    if not isinstance(entry, dict):
        raise KeyError(f"{path} has no entry for node {node or socket.gethostname()!r}")
    return {**entry, "file": path}


def boot_id() -> str:
    """The kernel's identity: two 'nodes' with one boot id are one host, whatever their hostnames say."""
    return Path("/proc/sys/kernel/random/boot_id").read_text().strip()


def kernel_id() -> str | None:
    """boot_id, or None where there is none (not Linux): such a node is judged alone, by its host name."""
    try:
        return boot_id() or None
    except OSError:
        return None


def _net_namespace() -> str:
    return os.readlink("/proc/self/ns/net")  # "net:[4026531840]": ranks of one namespace share its interfaces


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
        "boot_id": _probe(un, "boot_id", boot_id), "net_namespace": _probe(un, "net_namespace", _net_namespace),
        "affinity": check_affinity(cpus, local_rank, environ, topo, _probe(un, "cpuset", cpuset_cpus)),
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
        "link_declared": _probe(un, "link_declared", lambda: declared_link(environ, environ.get("SLURMD_NODENAME"))),
        "wire": None,  # filled by Recorder.wire() around the timed steps
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

    def add(self, key: str, fn: Callable[[], Any]) -> Any:
        """One more probe after start (the GPU pairing, once the device is chosen); written at finish."""
        self.doc[key] = _probe(self.doc["unavailable"], key, fn)
        return self.doc[key]

    @contextlib.contextmanager
    def wire(self, steps: int, what: str, size_bytes: int | None = None) -> Iterator[None]:
        """Every interface's byte counters before and after the block (the timed steps): ``wire`` says how many
        bytes each interface sent and received in it, in how many seconds and steps (of a collective: its size)."""
        before = _probe(self.doc["unavailable"], "wire", lambda: net_counters(self.sys_root))
        t0 = time.perf_counter()
        yield
        seconds = time.perf_counter() - t0
        after = _probe(self.doc["unavailable"], "wire", lambda: net_counters(self.sys_root))
        if before is None or after is None:
            return
        ifaces = []
        for name, a in after.items():
            b = before.get(name, {})
            moved = {k: a[k] - b[k] for k in a if k in b and a[k] >= b[k]}
            ifaces.append({"name": name, **moved})
        self.doc["wire"] = {"what": what, "steps": steps, "seconds": seconds, "size_bytes": size_bytes,
                            "interfaces": ifaces}

    def write(self) -> None:
        if self.path is not None:
            from hpcbench.files import atomic_write_json

            atomic_write_json(self.path, self.doc)

    def finish(self) -> dict[str, Any]:
        if not self.done:
            from hpcbench.files import utcnow

            self.done = True
            ib_after(self.doc["infiniband"]["devices"], self.sys_root)
            self.doc["finished_at"] = utcnow()
            self.write()
        return self.doc


def start(path: Path | None, rank: int, local_rank: int, **kw: Any) -> Recorder:
    """Collect this rank's provenance and write it to ``path`` (``PointPaths.provenance(rank)``)."""
    from hpcbench.files import utcnow

    rec = Recorder(collect(rank, local_rank, **kw), path, kw.get("sys_root", Path("/sys")))
    rec.doc["started_at"] = utcnow()
    rec.write()
    return rec
