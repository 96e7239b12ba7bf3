"""Which GPU each rank of a job used and the CPUs NCCL pinned its threads to for it, from NCCL's init and affinity
lines (`hpcbench doctor --gpu` compares them with the node's own view): the GPUs' identity, apart from the state of
the communicators that nccl.py keeps."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

# The GPU a rank uses, as its init line names it: "rank 0 nranks 8 cudaDev 0 nvmlDev 0 busId 1a000" (older
# releases leave out nvmlDev). busId is NCCL's int64 of the PCI address, "0000:1a:00.0" read as hex digits.
GPU_NAMED = re.compile(r"\brank (\d+) n[Rr]anks \d+ cudaDev (\d+)(?: nvmlDev (\d+))? busId ([0-9a-fA-F]+)\b")


def nccl_bus_id(value: str) -> str:
    """NCCL's busId ("1a000") as sysfs writes the address ("0000:1a:00.0"): NCCL's own int64ToBusId."""
    v = int(value, 16)
    return f"{v >> 20:04x}:{(v >> 12) & 0xff:02x}:{(v >> 4) & 0xff:02x}.{v & 0xf:x}"


def named_gpus(lines: Iterable[str]) -> list[dict[str, Any]]:
    """Each (host, rank, GPU) the init lines name, once, with the line number that first shows it."""
    from hpcbench.parse.prefixes import clean

    out: dict[tuple[str | None, int, str], dict[str, Any]] = {}
    for n, text in enumerate(lines, 1):
        if "busId" not in text:
            continue
        ln = clean(text)
        m = GPU_NAMED.search(ln.msg or ln.text)
        if m:
            rank, cuda, nvml, bus = m.groups()
            key = (ln.host, int(rank), bus.lower())
            out.setdefault(key, {"host": ln.host, "rank": int(rank), "cuda_dev": int(cuda),
                                 "nvml_dev": None if nvml is None else int(nvml), "bus_id": nccl_bus_id(bus),
                                 "line": n})
    return list(out.values())


# "Setting affinity for GPU 0 to ff,ffff0000,00ffffff": the CPUs NCCL pins its threads to for that GPU (NVML's
# CPU affinity of the GPU within the process's own), a Linux cpumask: 32-bit hex words, most significant first.
AFFINITY = re.compile(r"Setting affinity for GPU (\d+) to ([0-9a-fA-F,]+)")


def cpumask(text: str) -> set[int]:
    value = int(text.replace(",", ""), 16)
    return {i for i in range(value.bit_length()) if value >> i & 1}


def gpu_affinity(lines: Iterable[str]) -> dict[tuple[str | None, int], tuple[set[int], int]]:
    """(host, cudaDev) -> (the CPUs NCCL pinned to, the line number), from the first such line of each."""
    from hpcbench.parse.prefixes import clean

    out: dict[tuple[str | None, int], tuple[set[int], int]] = {}
    for n, text in enumerate(lines, 1):
        if "Setting affinity" in text:
            ln = clean(text)
            m = AFFINITY.search(ln.msg or ln.text)
            if m:
                out.setdefault((ln.host, int(m.group(1))), (cpumask(m.group(2)), n))
    return out
