"""Rule gdr-topology: GPUDirect RDMA off because a GPU's nearest NIC is across a host bridge (PHB) or the CPU
sockets (SYS), beyond NCCL_NET_GDR_LEVEL, read from NCCL's topology dump (topology.py) or NCCL's own 'GPU Direct
RDMA Disabled for GPU' line. A rule of `hpcbench check` (checks.py), and so of explain's log checks."""

from __future__ import annotations

import re

from hpcbench.findings import Finding
from hpcbench.parse.evidence import Clue, Evidence
from hpcbench.parse.topology import FAR, GDR_DEFAULT, WHO, Dump, GpuNet, gdr_level, local_id, rank_of
from hpcbench.vocab import INFO, WARNING


def host_of(text: str) -> str | None:
    m = WHO.search(text)
    return m.group("who").split(":", 1)[0] if m else None


def _gdr_seen(ev: Evidence) -> tuple[set[tuple[str | None, str]], dict[tuple[str | None, str], Clue]]:
    """The GPUs (host, bus id or rank) the log shows with GPUDirect RDMA on: a GDRDMA network edge or NCCL's
    'Enabled for GPU' line; and those whose network edges show none (the first such edge)."""
    on: set[tuple[str | None, str]] = set()
    plain: dict[tuple[str | None, str], Clue] = {}
    for c in ev.all("gdr_on"):
        on.add((host_of(c.line.text), local_id(c.groups[0] or "")))
    for c in ev.all("net_edge"):
        src, sbus, dst, dbus, way, via = c.groups
        rank, bus = (dst, dbus) if way == "receive" else (src, sbus)
        host = host_of(c.line.text)
        keys = [(host, f"rank {rank}")] + ([(host, local_id(bus))] if bus else [])
        if "GDRDMA" in (via or ""):
            on.update(keys)
        else:
            for k in keys:
                plain.setdefault(k, c)
    return on, plain


def _rdma(network: str) -> bool:
    """A network whose NICs can do GPUDirect RDMA: not NCCL's Socket transport, a socket plugin (FastSocket) or
    aws-ofi-nccl over a TCP provider."""
    return "Socket" not in network and "over TCP" not in network


def gdr_topology(ev: Evidence, multi: bool, network: str | None) -> list[Finding]:
    """GPUDirect RDMA off because a GPU's nearest NIC is across a host bridge (PHB) or the CPU sockets (SYS), beyond
    NCCL_NET_GDR_LEVEL (default PXB: topo.cc ncclTopoCheckGdr), in a job whose data crosses the network: from
    NCCL's topology dump (topology.py), else from NCCL's own 'GPU Direct RDMA Disabled' line. A GPU the log shows
    with GDRDMA, a level raised to the distance, a Socket network (no GDR at all) or a one-host job: silent."""
    if not ev.topology or not (multi and network and _rdma(network)):
        return _gdr_said(ev, network)
    value = ev.env.get("NCCL_NET_GDR_LEVEL")
    limit = gdr_level(value[0] if value else None) or GDR_DEFAULT
    on, plain = _gdr_seen(ev)
    far: dict[tuple[str | None, str], tuple[Dump, GpuNet, str | None]] = {}
    for dump in ev.topology:
        for gpu, path in dump.nearest().items():
            keys = [(dump.host, gpu)] + ([(dump.host, f"rank {dump.ranks[gpu]}")] if gpu in dump.ranks else [])
            # NCCL prints a GPU-NET path after deciding GDR: one it will not use GDR on goes through the GPU's CPU
            # (paths.cc: 'divert all traffic through the CPU'), so PHB there may be a GPU and NIC under one switch
            # without GDR support (no nvidia_peermem): the tree tells the distance, the path line only the route
            physical = dump.tree_path(gpu, path.net)
            beyond = rank_of(physical or path.type) > rank_of(limit)
            if path.type in FAR and beyond and not any(k in on for k in keys):
                far.setdefault((dump.host, gpu), (dump, path, physical))
    if not far:
        return []  # every GPU is near a NIC, or shown with GDRDMA: NCCL's 'Disabled' lines are about NICs it does not use
    dump, path, physical = next(iter(far.values()))
    kind = physical or path.type
    where = "across the CPU sockets (SYS)" if kind == "SYS" else "only through the CPU's host bridge (PHB)"
    names = dict(re.findall(r"\[(\d+)\]\s?([\w.-]+):\d+", ev.first["ib_device"].text)) if "ib_device" in ev.first else {}
    nic = f"NET/{path.net}" + (f" ({names[path.net]})" if path.net in names else "")
    how = ("the tree" if path.derived else f"the tree, and NCCL's path {path.type}") if physical else \
        f"NCCL's path {path.type}; the tree is not in the excerpt to tell a GPU-NIC distance from GDR being unavailable"
    edge = next((plain[k] for k in [(dump.host, path.gpu)] if k in plain), None)
    shown = f"; its network edges show no GDRDMA (line {edge.line.number})" if edge else ""
    level = f"NCCL_NET_GDR_LEVEL={value[0]}" if value else f"NCCL_NET_GDR_LEVEL's default {GDR_DEFAULT}"
    more = f" (and {len(far) - 1} more GPU(s))" if len(far) > 1 else ""
    return [Finding(WARNING, "gdr-topology", f"GPU {path.gpu}{' on ' + dump.host if dump.host else ''} reaches its "
                    f"nearest NIC, {nic}, {where}{more}: beyond {level}, NCCL sends and receives its network data "
                    f"without GPUDirect RDMA, staged through host memory ({how}, line {path.line}){shown}",
                    f"set NCCL_NET_GDR_LEVEL={kind} on every host if a measurement shows it helps (crossing "
                    f"{'the sockets' if kind == 'SYS' else 'the CPU'} can be slower than staging); better, give "
                    "each rank a NIC under its GPU's PCIe switch or socket (NCCL_IB_HCA) and bind the rank to that "
                    "socket", f"{dump.file}:{path.line}: {path.text[:160]}")]


def _gdr_said(ev: Evidence, network: str | None) -> list[Finding]:
    """NCCL's own line that it turned GPUDirect RDMA off for a GPU-NIC distance (without a topology dump)."""
    gdr = next(iter(ev.all("gdr_off")), None)
    # NCCL weighs the distance only for a NIC and GPU that both support GDR (ncclTopoCheckGdr): an RDMA NIC, even
    # where no network line is in the excerpt; a Socket network has none
    if not gdr or not _rdma(network or "IB"):
        return []
    far = f"{gdr.groups[2]} apart" if gdr.groups[2] else \
        f"too far apart (NCCL's distance {gdr.groups[0]} > its limit {gdr.groups[1]})"
    return [Finding(INFO, "gdr-topology", f"GPUDirect RDMA is off because the GPU and its NIC are {far}: "
                    "across a host bridge or CPU sockets, beyond NCCL's default NCCL_NET_GDR_LEVEL (PXB)",
                    "put the GPU and NIC under one PCIe switch, or raise NCCL_NET_GDR_LEVEL (e.g. PHB) after "
                    "measuring that it helps", str(gdr.line))]
