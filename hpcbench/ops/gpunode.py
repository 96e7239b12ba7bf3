"""What a GPU node is, without measuring it: each GPU as NVML names it, and as sysfs places it (NUMA node,
nearest CPUs, PCIe link), and which CPUs a rank of each GPU gets under the two layouts hpcbench can launch.

NVML is asked through pynvml when it imports, else through torch; either way the answers are plain data
(GpuId), so that everything after them is tested on sysfs trees and NVML answers written down in the tests.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hpcbench.workloads.affinity import CpuTopology, format_cpulist, parse_cpulist, read_sys
from hpcbench.workloads.provenance import nvml_bus_id, pcie_link, sysfs_bus_id


@dataclass(frozen=True)
class GpuId:
    """One GPU as NVML (or torch) names it."""

    index: int  # the CUDA index in this process
    name: str
    bus_id: str  # NVML's form: 00000000:18:00.0
    nvml_numa: int | None = None  # NVML's NUMA node, where it says
    source: str = "nvml"  # nvml | torch


@dataclass(frozen=True)
class PciPlace:
    """Where sysfs puts one GPU: /sys/bus/pci/devices/<bus id>/{numa_node,local_cpulist,*_link_*}."""

    path: str
    numa_node: int | None  # None: -1 (no affinity given) or unreadable
    local_cpus: frozenset[int] | None
    link: dict[str, Any] | None  # provenance.pcie_link's {"speed", "width", "max_speed", "max_width"}
    missing: tuple[str, ...] = ()  # the files that could not be read


@dataclass(frozen=True)
class Pairing:
    """The CPUs a node's local rank i (one rank per GPU, GPU i) gets under the two GPU layouts."""

    gpu: int
    block_cpus: frozenset[int]  # gpu_bind = "block": srun --distribution=block:block, ranks in blocks per socket
    closest_cpus: frozenset[int] | None  # gpu_bind = "closest": the CPUs nearest the GPU (its local_cpulist)
    agree: bool | None  # None: the GPU's own CPUs are unknown
    detail: str = ""


def read_place(bus_id: str, sys_root: Path = Path("/sys")) -> PciPlace:
    d = sys_root / "bus/pci/devices" / sysfs_bus_id(bus_id)
    missing = tuple(n for n in ("numa_node", "local_cpulist", "current_link_speed", "current_link_width")
                    if read_sys(d / n) is None)
    numa = read_sys(d / "numa_node")
    cpus = read_sys(d / "local_cpulist")
    node = int(numa) if numa and numa.lstrip("-").isdigit() and int(numa) >= 0 else None
    return PciPlace(str(d), node, frozenset(parse_cpulist(cpus)) if cpus else None, pcie_link(bus_id, sys_root),
                    missing)


def block_cpus(gpu: int, gpus: int, topo: CpuTopology) -> frozenset[int]:
    """The CPUs local rank ``gpu`` is bound to under gpu_bind = "block" with cpu_bind = "sockets": srun
    --distribution=block:block fills the sockets in order, so with the ranks spread evenly rank i sits on
    socket i * sockets // ranks (launch.gpu_srun_args says why)."""
    sockets = sorted(set(topo.socket.values()))
    if not sockets:
        return frozenset(topo.numa) or frozenset(range(os.cpu_count() or 1))
    mine = sockets[gpu * len(sockets) // max(gpus, 1)]
    return frozenset(c for c, s in topo.socket.items() if s == mine)


def pairings(places: list[PciPlace], topo: CpuTopology) -> list[Pairing]:
    """For each GPU i, local rank i's CPUs under "block" against the GPU's own CPUs ("closest")."""
    out = []
    for i, place in enumerate(places):
        block = block_cpus(i, len(places), topo)
        near = place.local_cpus
        if near is None:
            out.append(Pairing(i, block, None, None, f"{place.path}/local_cpulist unreadable"))
            continue
        if near >= frozenset(topo.socket) and topo.socket and len(set(topo.socket.values())) > 1:
            detail = "the GPU's local_cpulist is every CPU: the firmware gives it no affinity"
            out.append(Pairing(i, block, near, None, detail))
            continue
        agree = bool(block & near)
        detail = (f"block puts local rank {i} on cpus {format_cpulist(block)}; the GPU's nearest cpus are "
                  f"{format_cpulist(near)}" + ("" if agree else ": they share none"))
        out.append(Pairing(i, block, near, agree, detail))
    return out


def nvml_gpus() -> list[GpuId]:
    """The GPUs this process sees, named by NVML through their bus ids (torch's CUDA order), else by torch.
    Raises LookupError, with the reason, when there is none."""
    try:
        import torch
    except ImportError as e:
        raise LookupError(f"torch is not importable ({e}): no GPU can be used from this Python") from None
    if not torch.cuda.is_available() or torch.cuda.device_count() == 0:
        why = "torch is built without CUDA" if torch.version.cuda is None and not getattr(torch.version, "hip", None) \
            else f"torch {torch.__version__} sees no GPU (CUDA_VISIBLE_DEVICES=" \
                 f"{os.environ.get('CUDA_VISIBLE_DEVICES')!r})"
        raise LookupError(why)
    found = []
    for i in range(torch.cuda.device_count()):
        p = torch.cuda.get_device_properties(i)
        found.append(GpuId(i, p.name, nvml_bus_id(p), None, "torch"))
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception:  # noqa: BLE001 - no nvidia-ml-py or no driver library: torch's names stand
        return found
    return [_from_nvml(pynvml, g) for g in found]


def _from_nvml(pynvml: Any, g: GpuId) -> GpuId:
    try:
        h = pynvml.nvmlDeviceGetHandleByPciBusId(g.bus_id)
        name = pynvml.nvmlDeviceGetName(h)
        name = name.decode() if isinstance(name, bytes) else str(name)
        try:
            numa = int(pynvml.nvmlDeviceGetNumaNodeId(h))
        except Exception:  # noqa: BLE001 - older NVML: no such call
            numa = -1
        return GpuId(g.index, name, g.bus_id, numa if numa >= 0 else None, "nvml")
    except Exception:  # noqa: BLE001 - NVML does not know this bus id (a container's view): torch's answer stands
        return g


@dataclass(frozen=True)
class PeerLink:
    """Two GPUs: whether NVML says they talk over NVLink (through NVSwitch too), NVML's topology level
    between them, and whether CUDA gives peer-to-peer access."""

    a: int
    b: int
    nvlink: bool | None  # NVML's P2P status over NVLink; None: NVML not asked or could not say
    level: str | None  # NVML's common ancestor: INTERNAL, SINGLE, MULTIPLE, HOSTBRIDGE, NODE, SYSTEM
    p2p: bool | None  # torch.cuda.can_device_access_peer
    notes: tuple[str, ...] = ()


_LEVELS = {0: "INTERNAL", 10: "SINGLE", 20: "MULTIPLE", 30: "HOSTBRIDGE", 40: "NODE", 50: "SYSTEM"}


def peer_links(gpus: list[GpuId]) -> list[PeerLink]:
    """Every pair of GPUs, as NVML and CUDA see the link between them."""
    import torch

    nvml: Any = None
    try:
        import pynvml

        pynvml.nvmlInit()
        handles = [pynvml.nvmlDeviceGetHandleByPciBusId(g.bus_id) for g in gpus]
        nvml = pynvml
    except Exception:  # noqa: BLE001 - no nvidia-ml-py, no driver library: CUDA's answer alone
        handles = []
    out = []
    for i, a in enumerate(gpus):
        for j in range(i + 1, len(gpus)):
            b, nvlink, level, notes = gpus[j], None, None, []
            if nvml is not None:
                try:
                    level = _LEVELS.get(int(nvml.nvmlDeviceGetTopologyCommonAncestor(handles[i], handles[j])))
                    status = nvml.nvmlDeviceGetP2PStatus(handles[i], handles[j], nvml.NVML_P2P_CAPS_INDEX_NVLINK)
                    nvlink = status == nvml.NVML_P2P_STATUS_OK
                except Exception as e:  # noqa: BLE001 - an NVML without the call, or a GPU it cannot pair
                    notes.append(f"NVML: {type(e).__name__}: {e}")
            out.append(PeerLink(a.index, b.index, nvlink, level,
                                bool(torch.cuda.can_device_access_peer(a.index, b.index)), tuple(notes)))
    return out
