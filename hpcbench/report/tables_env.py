"""The hardware/software environment, from every rank's provenance file; values that differ between nodes are flagged."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
from typing import Any

from hpcbench.figures.samples import Sample
from hpcbench.tabular import Table

Doc = dict[str, Any]


def _counted(items: list[str]) -> str | None:
    if not items:
        return None
    return ", ".join(f"{name} ×{n}" for name, n in sorted(Counter(items).items()))


def _gpus(d: Doc) -> str | None:
    return _counted([str(g.get("name") or "?") for g in d.get("gpus") or []])


_NOT_NICS = ("loopback", "virtual")  # lo, bridges, veths: not network hardware


def _speed(v: Any) -> str | None:
    if isinstance(v, (int, float)):  # Mb/s, as /sys/class/net reports it
        return f"{v / 1000:g} Gb/s"
    return str(v) if v else None


def _nics(d: Doc) -> str | None:
    items = []
    for n in d.get("nics") or []:
        if n.get("kind") in _NOT_NICS:
            continue
        model = n.get("model") or n.get("name") or "?"
        extra = ", ".join(v for v in (n.get("kind"), _speed(n.get("speed"))) if v)
        items.append(f"{model} ({extra})" if extra else str(model))
    return _counted(items)


def _hcas(d: Doc) -> str | None:
    devs = (d.get("infiniband") or {}).get("devices") or []
    return _counted([str(x.get("hca_type") or x.get("name") or "?") for x in devs])


_NVLINK = re.compile(r"\bNV(\d+)\b")


def _interconnect(d: Doc) -> str | None:
    topo = d.get("topology")
    if not topo:
        return None
    text = topo if isinstance(topo, str) else str(topo)
    links = sorted({int(n) for n in _NVLINK.findall(text)})
    if links:
        return f"NVLink (NV{'/NV'.join(map(str, links))} between GPUs)"
    for word, what in (("NODE", "PCIe within a NUMA node"), ("SYS", "PCIe across sockets (SMP interconnect)"),
                       ("PHB", "PCIe through the host bridge"), ("PXB", "PCIe switches"), ("PIX", "one PCIe switch")):
        if re.search(rf"\b{word}\b", text):
            return what
    return "unrecognised topology (see provenance)"


def _built_with(d: Doc, key: str) -> str | None:
    """torch's CUDA and NCCL versions are what it was built with; on a node without GPUs nothing runs them."""
    v = d.get(key)
    return f"{v} (torch's build; no GPU on this node, so not in use)" if v and not d.get("gpus") else v


def _sw(key: str) -> Callable[[Doc], Any]:
    return lambda d: (d.get("software") or {}).get(key)


# (row name, how to read it from one rank's provenance, key in `unavailable` that explains a null)
ITEMS: list[tuple[str, Callable[[Doc], Any], str]] = [
    ("NIC model × count", _nics, "nics"),
    ("InfiniBand HCA × count", _hcas, "infiniband"),
    ("GPU model × count", _gpus, "gpus"),
    ("GPU interconnect", _interconnect, "topology"),
    ("OS", _sw("os"), "os"),
    ("kernel", _sw("kernel"), "kernel"),
    ("GPU driver", lambda d: d.get("driver"), "driver"),
    ("CUDA", lambda d: _built_with(d, "cuda"), "cuda"),
    ("NCCL", lambda d: _built_with(d, "nccl"), "nccl"),
    ("torch", _sw("torch"), "torch"),
    ("torchvision", _sw("torchvision"), "torchvision"),
    ("horovod", _sw("horovod"), "horovod"),
    ("MPI", _sw("mpi"), "mpi"),
    ("python", _sw("python"), "python"),
    ("hpcbench commit", lambda d: d.get("git_commit"), "git_commit"),
]


def _node(d: Doc) -> str:
    return str(d.get("slurm_node") or d.get("hostname") or "?")


def _listed(names: list[str]) -> str:
    return f"{len(names)}: {', '.join(names[:8])}{' …' if len(names) > 8 else ''}"


def _servers(docs: list[Doc]) -> list[list[Any]]:
    """Servers are distinct hosts; Slurm node names are shown apart when several share one host."""
    hosts = sorted({str(d.get("hostname") or "?") for d in docs})
    slurm = sorted({str(d["slurm_node"]) for d in docs if d.get("slurm_node")})
    rows: list[list[Any]] = [["servers (hosts)", _listed(hosts), ""]]
    if slurm and len(slurm) != len(hosts):
        rows.append(["Slurm nodes", _listed(slurm), (f"FLAG: {len(slurm)} Slurm nodes on {len(hosts)} host(s): "
                     "not separate servers, so no inter-node measurement")])
    return rows


def environment(samples: list[Sample]) -> tuple[Table, list[str]]:
    """The table and one line per value that differs between nodes."""
    docs = [d for s in samples for d in s.provenance]
    if not docs:
        logs = any(not s.point_id for s in samples)
        why = "logs of jobs hpcbench did not launch carry no provenance files" if logs else \
              "no provenance-rank*.json in the point folders"
        return Table("environment", "Environment", ["item", "value"], [], empty=f"not recorded: {why}"), []
    per_node: dict[str, list[Doc]] = {}
    for d in docs:
        per_node.setdefault(_node(d), []).append(d)
    nodes = sorted(per_node)
    rows: list[list[Any]] = _servers(docs)
    differs = []
    for name, read, ukey in ITEMS:
        values: dict[str, Any] = {}
        reasons: set[str] = set()
        for node, ds in per_node.items():
            got = next((v for v in map(read, ds) if v not in (None, "", [])), None)
            values[node] = got
            if got is None:
                reasons |= {str((d.get("unavailable") or {}).get(ukey)) for d in ds if (d.get("unavailable") or {}).get(ukey)}
        distinct = {str(v) for v in values.values() if v is not None}
        if not distinct:
            rows.append([name, "missing" + (f" ({'; '.join(sorted(reasons))})" if reasons else ""), ""])
        elif len(distinct) == 1 and None not in values.values():
            rows.append([name, distinct.pop(), ""])
        else:
            detail = "; ".join(f"{n}: {values[n] if values[n] is not None else 'missing'}" for n in nodes)
            rows.append([name, detail, "DIFFERS between nodes"])
            differs.append(f"{name} differs between nodes: {detail}")
    return Table("environment", "Environment (from provenance-rank*.json)", ["item", "value", "flag"], rows), differs
