"""Rules over a parsed log (``hpcbench check``, and summarize's checks column).

Each rule gives a Finding with a severity and a hint. ``hpcbench check`` exits 1 when any finding is
an error. NCCL WARN lines are grouped by their text with numbers masked, and reported once with the
first rank and host that printed them: the root cause, not 64 copies of it.
"""

from __future__ import annotations

from typing import Any

from hpcbench.findings import Finding
from hpcbench.vocab import ERROR, INFO, LINK_LAYERS, NET_SOCKET, WARNING

HINT_SOCKET = "check NCCL_IB_HCA, NCCL_SOCKET_IFNAME and NCCL_IB_DISABLE (and that the IB plugin/rdma-core load)"
HINT_SHM = "P2P was not used inside the node: NCCL_P2P_DISABLE or NCCL_P2P_LEVEL set? ACS or IOMMU on (check nvidia-smi topo -m)?"
HINT_GDR = "GPUDirect RDMA is off: load nvidia_peermem (or nv_peer_mem), check NCCL_NET_GDR_LEVEL and the GPU-NIC distance"
HINT_NO_NCCL = "set NCCL_DEBUG=INFO in the job's environment (hpcbench's job scripts always do)"


def _ib_visible(nccl: dict[str, Any], provenance: list[dict] | None) -> str | None:
    if nccl.get("ib_devices"):
        return "in the log (" + ", ".join(nccl["ib_devices"][:4]) + ")"
    if nccl.get("ib_link_layer"):
        return "in the log"
    for doc in provenance or []:
        ib = doc.get("infiniband") if isinstance(doc, dict) else None
        devices = ib.get("devices") if isinstance(ib, dict) else None
        if devices:
            names = [d if isinstance(d, str) else str(d.get("name", d)) if isinstance(d, dict) else str(d)
                     for d in devices]
            return f"in the provenance of {doc.get('hostname') or 'a rank'} ({', '.join(names[:4])})"
    return None


def _gpu_job(provenance: list[dict] | None) -> bool:
    return any(isinstance(d, dict) and d.get("gpus") for d in provenance or [])


def check_parsed(parsed: dict[str, Any], provenance: list[dict] | None = None, *,
                 gpu: bool | None = None) -> list[Finding]:
    """Findings (hpcbench.findings.Finding) for one ``parse_file`` result. ``gpu``: the job used GPUs (default: provenance lists GPUs)."""
    name = parsed.get("file")
    out: list[Finding] = []
    nccl = parsed.get("nccl")
    if gpu is None:
        gpu = _gpu_job(provenance)
    if nccl is None:
        if gpu:
            out.append(Finding(WARNING, "no-nccl-lines", "GPU job, but the log has no NCCL lines at all",
                               HINT_NO_NCCL, subject=name))
        return out
    edges = nccl.get("edges") or []
    where_ib = _ib_visible(nccl, provenance)
    socket_inter = [e for e in edges if e["transport"] == f"NET/{NET_SOCKET}" and e.get("scope") == "inter"]
    if where_ib and socket_inter:
        e = socket_inter[0]
        out.append(Finding(ERROR, "socket-with-ib",
                           f"{len(socket_inter)} inter-node edges use NET/Socket (e.g. channel {e['channel']} "
                           f"{e['src']} -> {e['dst']}) while an InfiniBand device is visible {where_ib}",
                           HINT_SOCKET, subject=name))
    elif where_ib and not edges and nccl.get("network") == NET_SOCKET and len(nccl.get("hosts") or []) > 1:
        out.append(Finding(ERROR, "socket-with-ib",
                           f"NCCL chose the Socket network across {len(nccl['hosts'])} hosts while an InfiniBand "
                           f"device is visible {where_ib}", HINT_SOCKET, subject=name))
    shm = [e for e in edges if e["transport"] == "SHM" and e.get("scope") in ("intra", None)]
    if shm:
        e = shm[0]
        out.append(Finding(WARNING, "shm-not-p2p",
                           f"{len(shm)} intra-node edges use SHM where P2P was expected (e.g. channel "
                           f"{e['channel']} {e['src']} -> {e['dst']})", HINT_SHM, subject=name))
    ib_plain = sorted({t for t in nccl.get("transports") or [] if t.startswith("NET/IB") and not t.endswith("/GDRDMA")})
    if ib_plain:
        n = sum(1 for e in edges if e["transport"] in ib_plain)
        out.append(Finding(INFO, "ib-without-gdrdma",
                           f"{' and '.join(ib_plain)} used without GPUDirect RDMA" + (f" on {n} edges" if n else ""),
                           HINT_GDR, subject=name))
    for w in nccl.get("warn_details") or []:
        who = ", ".join(x for x in (f"rank {w['first_rank']}" if w.get("first_rank") is not None else "",
                                    f"host {w['first_host']}" if w.get("first_host") else "") if x)
        times = f" ({w['count']} times)" if w["count"] > 1 else ""
        out.append(Finding(WARNING, "nccl-warn", f"NCCL WARN {w['message']}{times}; first from {who or 'an unknown rank'}",
                           "the first WARN is usually the root cause; later ranks fail because of it", subject=name))
    return out



def check_point(parsed: list[dict[str, Any]], provenance: list[dict] | None, device: str | None) -> list[Finding]:
    """The check findings of all of one point's logs, each once: its .out and .err are one job."""
    # "a GPU job without NCCL lines" is about the job, not about each of its files
    gpu = None if device not in ("cpu", "cuda") else (device == "cuda" and not any(p.get("nccl") for p in parsed))
    seen, out = set(), []
    for p in parsed:
        for f in check_parsed(p, provenance or None, gpu=gpu):
            if (f.rule, f.claim) not in seen:
                seen.add((f.rule, f.claim))
                out.append(f)
    return out


def verdict(parsed: dict[str, Any], provenance: list[dict] | None = None) -> str:
    """One line on the network a log shows, e.g. 'inter-node: NET/IB over RoCE (mlx5_4), GPUDirect RDMA on 2/4
    edges' or 'inter-node: NET/Socket (no IB device seen)'; for a one-host job, what its GPUs used."""
    nccl = parsed.get("nccl")
    if nccl is None:
        return "no NCCL lines: nothing to say about the network"
    edges = nccl.get("edges") or []
    inter = [e for e in edges if e.get("scope") == "inter"]
    hosts = len(nccl.get("hosts") or [])
    layer, devices, network = nccl.get("ib_link_layer"), nccl.get("ib_devices") or [], nccl.get("network")
    if not inter and hosts <= 1:
        intra = sorted({e["transport"] for e in edges if e.get("transport")}) or nccl.get("transports") or []
        text = f"one host: {', '.join(intra)}" if intra else "no transport lines"
        text += " (NVLS)" if nccl.get("nvls_used") else ""
        over = f" over {layer}" if layer and layer != network else ""  # not "RoCE over RoCE"
        return text + (f"; network {network}{over} selected" if network else "")
    net = sorted({e["transport"].removesuffix("/GDRDMA") for e in inter if e.get("transport")})
    if not net:  # no edge lines: the selection line says which network
        net = [f"NET/{network}"] if network else ["network not shown"]
    text = f"inter-node: {', '.join(net)}"
    if any(t.startswith("NET/IB") for t in net) or network in LINK_LAYERS:
        over = f" over {layer}" if layer and f"NET/{layer}" not in net else ""
        text += f"{over} ({', '.join(devices[:2])}{', ...' if len(devices) > 2 else ''})" if devices else over
        gdr = sum("GDRDMA" in (e.get("transport") or "") for e in inter)
        if inter:
            text += f", GPUDirect RDMA on {gdr}/{len(inter)} edges"
    elif any(t.startswith(f"NET/{NET_SOCKET}") for t in net):
        seen = _ib_visible(nccl, provenance)
        text += f" while an IB device is visible {seen}" if seen else " (no IB device seen)"
    return text
