"""Where a rank runs against what it uses: its GPU and that GPU's NUMA node, and its node's load.

- ``use_device``: the rank's device. The GPU is the local rank modulo the GPUs the rank can see, so
  both layouts of ``slurm.gpu_bind`` work: every GPU of the node visible (block, none: GPU = local rank)
  or Slurm's one GPU per task (closest: GPU 0 of the task's own).
- ``pairing``: the rank's CPUs and their NUMA nodes next to its GPU and the GPU's NUMA node, read from
  /sys/bus/pci/devices/<bus id>/numa_node (NVML when sysfs does not say). A GPU on another NUMA node
  than the rank's CPUs is fed across the socket link. Missing facts are null with the reason.
- ``LoadProbe``: the node's load averages and CPU count around the timed steps, read once per node.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hpcbench.records import NodeLoad
from hpcbench.workloads.affinity import CpuTopology, cpu_list, cpuset_cpus
from hpcbench.workloads.provenance import kernel_id, nvml_bus_id, sysfs_bus_id


def use_device(device: str, local_rank: int) -> tuple[Any, Callable[[], Any], int | None]:
    """(the rank's torch device, a function that waits for it, the CUDA index or None on the CPU)."""
    import torch

    if device != "cuda":
        return torch.device("cpu"), lambda: None, None  # CPU ops are already synchronous
    visible = torch.cuda.device_count()
    if visible == 0:
        raise RuntimeError("device = 'cuda', but this rank sees no GPU (CUDA_VISIBLE_DEVICES="
                           f"{os.environ.get('CUDA_VISIBLE_DEVICES')!r})")
    index = local_rank % visible
    torch.cuda.set_device(index)
    return torch.device("cuda", index), torch.cuda.synchronize, index


def record_pairing(prov: Any, rank: int, local_rank: int, device: str, index: int | None) -> Any:
    """The rank's CPUs and GPU, recorded in its provenance as "gpu_binding"; returns what was recorded."""
    return prov.add("gpu_binding", lambda: pairing(rank, local_rank, os.sched_getaffinity(0), gpu_of(index),
                                                   f"device is {device}"))


def gpu_of(index: int | None) -> dict[str, Any] | None:
    """The CUDA device ``index`` as pairing() takes it: index, name, PCI bus id (NVML's form)."""
    if index is None:
        return None
    import torch

    p = torch.cuda.get_device_properties(index)
    return {"index": index, "name": p.name, "bus_id": nvml_bus_id(p)}


def gpu_numa_node(bus_id: str, sys_root: Path = Path("/sys")) -> tuple[int | None, str]:
    """(the GPU's NUMA node, where that came from or why it is unknown)."""
    path = sys_root / "bus/pci/devices" / sysfs_bus_id(bus_id) / "numa_node"
    try:
        value = int(path.read_text().strip())
    except (OSError, ValueError) as e:
        why = f"{path}: {type(e).__name__}"
    else:
        if value >= 0:
            return value, "sysfs"
        why = f"{path} says -1 (the firmware gives this device no NUMA affinity)"
    try:
        import pynvml  # the nvidia-ml-py package, when installed

        pynvml.nvmlInit()
        node = pynvml.nvmlDeviceGetNumaNodeId(pynvml.nvmlDeviceGetHandleByPciBusId(bus_id))
        return (int(node), "nvml") if node >= 0 else (None, f"{why}; NVML says {node}")
    except Exception as e:  # noqa: BLE001 - no pynvml, no driver, an old NVML without the call: say which
        return None, f"{why}; NVML: {type(e).__name__}: {e}"


def pairing(rank: int, local_rank: int, cpus: set[int], gpu: dict[str, Any] | None, why_no_gpu: str = "",
            sys_root: Path = Path("/sys")) -> dict[str, Any]:
    """The rank, its CPUs and their NUMA nodes, its GPU and the GPU's NUMA node, and whether they meet."""
    topo = CpuTopology.read(sys_root)
    numa = sorted({topo.numa[c] for c in cpus if c in topo.numa})
    out: dict[str, Any] = {"rank": rank, "local_rank": local_rank, "cpus": sorted(cpus), "numa_nodes": numa,
                           "gpu": None, "gpu_name": None, "gpu_bus_id": None, "gpu_numa_node": None,
                           "gpu_numa_source": None, "visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
                           "local": None, "detail": why_no_gpu or "no GPU"}
    if gpu is None:
        return out
    node, source = gpu_numa_node(gpu["bus_id"], sys_root)
    out.update(gpu=gpu["index"], gpu_name=gpu.get("name"), gpu_bus_id=gpu["bus_id"], gpu_numa_node=node,
               gpu_numa_source=source if node is not None else None)
    name = f"GPU {gpu['index']} ({sysfs_bus_id(gpu['bus_id'])})"
    if node is None:
        out["detail"] = f"{name}: NUMA node unknown: {source}"
    elif not numa:
        out["detail"] = f"{name} is on NUMA node {node}; the NUMA nodes of the rank's CPUs are unknown"
    else:
        out["local"] = node in numa
        where = f"{name} is on NUMA node {node}, the rank's CPUs {cpu_list(cpus)} on NUMA node(s) {numa}"
        out["detail"] = where + ("" if out["local"] else ": its data crosses the socket link")
    return out


def pairing_summary(docs: list[dict[str, Any] | None]) -> tuple[bool | None, str | None]:
    """``(gpu_numa_ok, gpu_numa_detail)`` of a record: whether every rank's GPU is on its CPUs' NUMA node."""
    known = [d for d in docs if d and d.get("local") is not None]
    if not known:
        first = next((d["detail"] for d in docs if d), None)
        return None, first
    far = [d for d in known if not d["local"]]
    if far:
        return False, "; ".join(f"rank {d['rank']}: {d['detail']}" for d in far)
    return True, f"{len(known)}/{len(docs)} ranks use a GPU on their own NUMA node"


class LoadProbe:
    """The node's 1/5/15-minute load averages just before and just after the timed steps, with its CPU
    count, read by one rank per node (``active``: local rank 0). Linux counts runnable tasks, so the
    point's own ranks are in the figures; a 1-minute average moves little over a few seconds of steps."""

    def __init__(self, active: bool, sys_root: Path = Path("/sys")) -> None:
        self.entry: dict[str, Any] | None = None
        if active:
            # a node confined to a cpuset (a container, a minicluster node with cores of its own) has those CPUs only
            own = cpuset_cpus()
            topo = CpuTopology.read(sys_root).core
            cores = {c for cpu, c in topo.items() if not own or cpu in own}
            self.entry = {"host": socket.gethostname(), "slurm_node": os.environ.get("SLURMD_NODENAME"),
                          "cpus": len(own) if own else os.cpu_count(), "cores": len(cores) or None, "before": None,
                          "after": None, "kernel": kernel_id(), "kernel_cpus": os.cpu_count()}

    def __enter__(self) -> LoadProbe:  # noqa: PYI034
        if self.entry is not None:
            self.entry["before"] = list(os.getloadavg())
        return self

    def __exit__(self, *exc: object) -> None:
        if self.entry is not None:
            self.entry["after"] = list(os.getloadavg())


def node_loads(entries: list[dict[str, Any] | None], ranks: list[Any]) -> list[NodeLoad]:
    """Every node's entry with the ranks that ran there and their cpus_per_task, so that ranks x
    cpus_per_task against the node's cores can be judged from the record alone."""
    out = []
    for e in entries:
        if e is None:
            continue
        here = [r for r in ranks if (r.slurm_node, r.hostname) == (e["slurm_node"], e["host"])]
        per_task = {r.cpus_per_task for r in here}
        out.append(NodeLoad(**e, ranks=len(here), cpus_per_task=per_task.pop() if len(per_task) == 1 else None))
    return sorted(out, key=lambda n: (n.slurm_node or "", n.host))
