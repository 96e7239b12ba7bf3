"""Rules over a parsed log (``hpcbench check``, and summarize's checks column).

Each rule gives a Finding with a severity and a hint. ``hpcbench check`` exits 1 when any finding is
an error. NCCL WARN lines are grouped by their text with numbers masked, and reported once with the
first rank and host that printed them: the root cause, not 64 copies of it; a WARN NCCL prints on every
machine without the hardware it probes (no libibverbs) is told apart as harmless.

Where the log's lines are at hand (``evidence``, parse/evidence.py), the rules also read what NCCL and the
launcher print beside the transports: the libfabric provider, the interfaces, nNodes, the NCCL builds, the
GPU-NIC distance, failure lines, data rows parse could not read. Each finding names its line.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from hpcbench.findings import Finding
from hpcbench.parse.evidence import Clue, Evidence
from hpcbench.parse.gdr import gdr_topology
from hpcbench.parse.outcome import crash, cut_edges, no_mpi_build, rows_unread, transports_unread
from hpcbench.parse.topology import GDR_DEFAULT, gdr_level, rank_of
from hpcbench.vocab import ERROR, INFO, NET_SOCKET, WARNING

HINT_SOCKET = "check NCCL_IB_HCA, NCCL_SOCKET_IFNAME and NCCL_IB_DISABLE (and that the IB plugin/rdma-core load)"
HINT_SHM = "P2P was not used inside the node: NCCL_P2P_DISABLE or NCCL_P2P_LEVEL set? ACS or IOMMU on (check nvidia-smi topo -m)?"
HINT_GDR = "GPUDirect RDMA is off: load nvidia_peermem (or nv_peer_mem), check NCCL_NET_GDR_LEVEL and the GPU-NIC distance"
HINT_NO_NCCL = "set NCCL_DEBUG=INFO in the job's environment (hpcbench's job scripts always do)"
COLLECT = "rerun with NCCL_DEBUG=INFO to see the network and transports NCCL chose"
MAX_GPUS_PER_HOST = 8  # GPUs of an HGX/DGX node (a 16-GPU DGX-2 is the rare exception): more ranks span hosts

# NCCL variables that take a transport away, the values that do, and what that costs (NCCL's environment
# documentation: docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html). None: any value set.
DISABLES: dict[str, tuple[tuple[str, ...] | None, str]] = {
    "NCCL_P2P_DISABLE": (("1",), "GPUs inside a node talk through host memory (SHM) instead of NVLink/PCIe P2P"),
    "NCCL_P2P_LEVEL": (("LOC", "0"), "P2P is never used (LOC): GPUs inside a node go through host memory"),
    "NCCL_IB_DISABLE": (("1",), "NCCL falls back to TCP sockets between nodes"),
    "NCCL_SHM_DISABLE": (("1",), "GPUs that cannot use P2P go through the network instead of host memory"),
    "NCCL_NET_GDR_LEVEL": (None, "the GPU-NIC distance up to which GPUDirect RDMA is used is pinned (0 or LOC: never)"),
    "NCCL_NET": (("Socket",), "NCCL is told to use TCP sockets between nodes"),
}
# WARNs NCCL prints where the hardware or library it probes is absent, harmless when the job does not need
# it (maintainers, NVIDIA/nccl#... "harmless if you don't use InfiniBand"): shape -> why it is harmless
HARMLESS_WARNS: dict[str, str] = {
    r"Failed to open libibverbs": "no InfiniBand verbs library on this machine: NCCL then uses its Socket transport",
    r"lib wrapper not initialized": "the InfiniBand verbs library is not loaded: NCCL then uses its Socket transport",
    r"dlvsym|Failed to find ncclNetPlugin|Failed to find ncclCollNetPlugin|No plugin found|Could not find.*libnccl-net":
        "an optional network plugin is not installed: NCCL uses its internal transports",
}
_NOT_TCP = ("efa",)  # aws-ofi-nccl providers that are EFA; tcp, sockets, udp... are TCP/IP


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


def _harmless(message: str, ib_seen: bool) -> str | None:
    """Why a WARN is harmless, or None: a probe for IB is harmless only where no IB device is in sight."""
    for shape, why in HARMLESS_WARNS.items():
        if re.search(shape, message) and not (ib_seen and "verbs" in why):
            return why
    return None


def _where(c: Clue | None) -> str:
    return f" (line {c.line.number})" if c else ""


def hosts_seen(parsed: dict[str, Any], ev: Evidence) -> tuple[int | None, str]:
    """How many machines the ranks ran on, from every kind of evidence: host names (NCCL prefixes, nccl-tests
    Rank lines), NCCL's nNodes, the launcher's -H list, network edges between ranks that also use P2P or SHM
    (machines that share a host name), CollNet (in-network reduction is between nodes), and a rank count no
    single host holds. (count or 0 for "several, count not shown" or None for "not shown", why)."""
    nccl = parsed.get("nccl") or {}
    names = set(parsed.get("hosts") or [])
    nnodes = max((int(c.value()) for c in ev.all("nnodes")), default=0)
    launch = max((len({h.rsplit(":", 1)[0] for h in c.value().split(",") if h}) for c in ev.all("launch_hosts")),
                 default=0)
    count, why = len(names), f"host names {', '.join(sorted(names)[:3])}" if names else ""
    if nnodes > count:
        count, why = nnodes, f"nNodes {nnodes}"
    if launch > count:
        count, why = launch, "the launcher's -H list"
    if count > 1:
        return count, why
    edges = nccl.get("edges") or []
    net = [e for e in edges if (e.get("transport") or "").startswith("NET/")]
    local = [e for e in edges if (e.get("transport") or "").startswith(("P2P", "SHM"))]
    ranks = max([nccl.get("nranks") or 0] + [int(c.value()) for c in ev.all("nranks")] +
                [int(c.groups[0] or 0) + 1 for c in ev.all("rank_line")] +
                [max(e["src"], e["dst"]) + 1 for e in edges if isinstance(e.get("src"), int) and isinstance(e.get("dst"), int)])
    if any(e.get("scope") == "inter" for e in net):
        return 0, "network edges between ranks"
    if net and local:  # NCCL picks P2P, then SHM, then NET for a peer (transport.cc): NET beside them is another host
        return 0, "ranks that reach some peers by P2P/SHM reach others through the network: machines sharing a host name"
    if nccl.get("collnet_used"):
        return 0, "CollNet (in-network reduction) runs between nodes"
    if ranks > MAX_GPUS_PER_HOST:
        return 0, f"{ranks}+ ranks: more than the {MAX_GPUS_PER_HOST} GPUs of a node"
    if count == 1:
        return 1, why
    return None, ""


def network_seen(parsed: dict[str, Any], ev: Evidence, ib_seen: str | None) -> tuple[str | None, str]:
    """The network NCCL used between hosts, as a user names it, and from which evidence; (None, why not)."""
    nccl = parsed.get("nccl")
    provider = next(iter(ev.all("ofi_provider")), None)
    if provider and not any(p in provider.value() for p in _NOT_TCP):
        plugin = (nccl or {}).get("network") or "Libfabric"
        return f"{plugin} over TCP", f"aws-ofi-nccl selected provider {provider.value()}, not efa{_where(provider)}"
    if nccl and nccl.get("network"):
        net, layer = nccl["network"], nccl.get("ib_link_layer")
        over = f" over {layer}" if layer and layer != net else ""
        devices = nccl.get("ib_devices") or []
        said = f" ({', '.join(devices[:2])}{', ...' if len(devices) > 2 else ''})" if devices else ""
        efa = f"; provider {provider.value()}: EFA" if provider else ""
        how = "from the NET/ transport lines" if nccl.get("network_source") == "transport_lines" else "selected"
        return f"{net}{over}", f"{how}{said}{efa}"
    if provider:  # aws-ofi-nccl picked a libfabric provider: the plugin carries the traffic (over EFA)
        return "Libfabric", f"aws-ofi-nccl selected provider {provider.value()}{_where(provider)}: EFA"
    chosen = ev.env.get("NCCL_NET")
    if chosen:
        return chosen[0], f"NCCL_NET={chosen[0]} (line {chosen[1].number})"
    edges = sorted({e["transport"].removesuffix("/GDRDMA").removeprefix("NET/") for e in (nccl or {}).get("edges") or []
                    if (e.get("transport") or "").startswith("NET/")})
    if edges:
        return ", ".join(edges), "from the NET/ transport lines"
    disabled = ev.env.get("NCCL_IB_DISABLE")
    if disabled and disabled[0] == "1":
        return NET_SOCKET, f"NCCL_IB_DISABLE=1 (line {disabled[1].number}) leaves NCCL only its Socket transport"
    nodev = ev.first.get("no_ib_device")
    if nodev and not ib_seen:
        return NET_SOCKET, f"NET/IB found no device (line {nodev.number}): NCCL falls back to its Socket transport"
    socket = ev.first.get("socket")
    if socket and not ib_seen and "Using" in socket.text:  # NCCL sets its Socket transport up only when no
        return NET_SOCKET, f"NCCL set up its Socket transport (line {socket.number})"  # network before it has a device
    if nccl is None:
        return None, f"no NCCL lines: {COLLECT}"
    return None, "no network line in the log"


def one_rank(ev: Evidence) -> Clue | None:
    """The line that shows the job had a single rank: NCCL's nRanks 1, or nccl-tests' 'nThread 1 nGpus 1' started
    by a launcher with -np 1 (or by none)."""
    counts = ev.all("nranks")
    if counts:
        return counts[0] if max(int(c.value()) for c in counts) == 1 else None
    head = next((c for c in ev.all("run_header") if re.search(r"nThreads?:? 1 nGpus:? 1\b", c.line.text)), None)
    ranks = {c.groups[0] for c in ev.all("rank_line")}
    nps = {int(c.value()) for c in ev.all("launch_np")}
    # with no launcher line, only a single Rank line says the run had one process (srun/mpirun may be unseen)
    return head if head and len(ranks) <= 1 and (nps == {1} or (not nps and ranks)) else None


def _evidence_checks(parsed: dict[str, Any], ev: Evidence, hosts: int | None, network: str | None) -> list[Finding]:
    """The rules that read NCCL's and the launcher's lines beside the transports."""
    nccl = parsed.get("nccl") or {}
    out: list[Finding] = []
    multi = hosts is not None and hosts != 1
    for c in ev.all("lo_iface")[:1]:
        others = re.findall(r"\]([\w.-]+):", c.line.text)
        alone = not [o for o in others if not o.startswith(("lo", "docker"))]
        if multi or not alone:
            what = "a multi-host job" if multi else "a list that also holds other interfaces"
            out.append(Finding(ERROR if multi else WARNING, "lo-interface",
                               f"{c.groups[1]} is NCCL's {(c.groups[0] or 'socket').split()[0]} interface in {what}: a peer on "
                               "another host cannot be reached through it", "set NCCL_SOCKET_IFNAME to the "
                               "interface the hosts reach each other on (e.g. eth0, ib0, bond0)", str(c.line)))
    for c in ev.all("efa_missing")[:1]:
        out.append(Finding(WARNING, "efa-unavailable", "libfabric found no EFA device (provider efa: empty list): "
                           "NCCL cannot use EFA here", "pass the EFA devices into the container (/dev/infiniband, "
                           "vpc.amazonaws.com/efa resource) or use an EFA instance type", str(c.line)))
    provider = next(iter(ev.all("ofi_provider")), None)
    if provider and not any(p in provider.value() for p in _NOT_TCP):
        out.append(Finding(WARNING, "tcp-provider", f"aws-ofi-nccl selected the libfabric provider "
                           f"{provider.value()}: the traffic goes over TCP, not EFA",
                           "set FI_PROVIDER=efa and check that the EFA device is visible (fi_info -p efa)",
                           str(provider.line)))
    versions = sorted({c.value() for c in ev.all("version")})
    if len(versions) > 1:
        out.append(Finding(WARNING, "mixed-builds", f"the ranks run different NCCL builds: {', '.join(versions)}",
                           "install one NCCL (and CUDA) build on every host, or ship it in the job's container",
                           str(ev.all("version")[0].line)))
    out += gdr_topology(ev, multi, network)
    for c in ev.all("no_p2p")[:1]:
        out.append(Finding(WARNING, "no-p2p", "NCCL found no peer-to-peer path between the GPUs of this node "
                           "(intraNodeP2pSupport 0): they exchange data through host memory",
                           "check nvidia-smi topo -p2p r, ACS/IOMMU settings and the driver (consumer GPUs often "
                           "have P2P disabled)", str(c.line)))
    edges = nccl.get("edges") or []
    net_intra = [e for e in edges if (e.get("transport") or "").startswith("NET/") and e.get("scope") == "intra"]
    if net_intra and not multi:
        e = net_intra[0]
        out.append(Finding(WARNING, "net-intra", f"{len(net_intra)} edges between GPUs of one host go through the "
                           f"network ({e['transport']}, e.g. channel {e['channel']} {e['src']} -> {e['dst']}): "
                           "NCCL found neither P2P nor SHM between them", "check NCCL_P2P_DISABLE/NCCL_SHM_DISABLE "
                           "and that the ranks share /dev/shm and IPC (one container, --ipc=host)",
                           subject=parsed.get("file")))
    if nccl.get("ib_link_layer") == "IB+RoCE":
        out.append(Finding(WARNING, "ib-roce-mixed", "NCCL's IB transport lists InfiniBand and RoCE ports together: "
                           "a connection between ports of different fabrics fails or falls back",
                           "set NCCL_IB_HCA to the ports of one fabric (e.g. =mlx5_0,mlx5_1)",
                           subject=parsed.get("file")))
    return out + crash(ev) + rows_unread(parsed, ev) + transports_unread(parsed, ev) + no_mpi_build(ev)


_OMPI = re.compile(r"\b(?:mpirun|mpiexec|orterun)\b(?P<rest>.*)")
_OMPI_ONLY = (" -x ", " --mca ", " -mca ", " -N ", " --map-by ", " --bind-to ", " -npernode ")  # Open MPI's own flags
_REMOTE = re.compile(r"\s(?:-H|--host|-host|--hostfile|-hostfile|--machinefile)\s")


def _not_forwarded(name: str, where: str) -> bool:
    """A variable assigned in front of Open MPI's mpirun that launches on other hosts, and not exported with -x:
    Open MPI's rsh/ssh launcher hands the remote ranks only what -x names (mpirun(1): '-x <env> Export the
    specified environment variables to the remote nodes')."""
    m = _OMPI.search(where)
    if m is None or not re.search(rf"(?:^|[\s:$#>]){name}=\S+\s+(?:\S+=\S+\s+)*\S*(?:mpirun|mpiexec|orterun)\b", where):
        return False
    rest = f" {m.group('rest')} "
    return any(f in rest for f in _OMPI_ONLY) and bool(_REMOTE.search(rest)) and not re.search(rf"-x\s+{name}\b", rest)


def env_findings(env: dict[str, tuple[str, Any]], subject: str | None,
                 key: Callable[[str], str] = lambda name: name, axis: bool = False) -> list[Finding]:
    """The NCCL variables set that take a transport away (DISABLES), each with where it is set; ``key`` names a
    variable as the fix should (explain: the sweep key that sets it), ``axis``: a sweep can make it an axis."""
    out = []
    for name, (values, what) in DISABLES.items():
        got = env.get(name)
        if got is not None and (values is None or got[0].lower() in (v.lower() for v in values)):
            fix = f"unset {key(name)} unless this study is about it (then it is an axis" + \
                (f", [matrix.env] {name}" if axis else "") + ", and fine)"
            level = gdr_level(got[0]) if name == "NCCL_NET_GDR_LEVEL" else None
            if level and rank_of(level) > rank_of(GDR_DEFAULT):  # raised: GDR across a host bridge or the sockets
                what = (f"GPUDirect RDMA is used up to {level} apart, beyond NCCL's default {GDR_DEFAULT}: it takes "
                        "effect only on the hosts whose ranks have it")
                fix = (f"keep it where a measurement shows it helps, and set {key(name)} for every rank: a variable "
                       "in front of mpirun reaches only the local ranks (pass it with mpirun -x, or srun --export)")
            if _not_forwarded(name, str(got[1])):
                what += ("; it is set in front of Open MPI's mpirun and not passed with -x, so no rank on another "
                         "host gets it (mpirun -x exports a variable to the remote nodes)")
            out.append(Finding(WARNING, "nccl-env", f"{name}={got[0]} is set: {what}", fix, str(got[1]),
                               subject=subject))
    return out


def check_parsed(parsed: dict[str, Any], provenance: list[dict] | None = None, *,
                 gpu: bool | None = None, evidence: Evidence | None = None) -> list[Finding]:
    """Findings (hpcbench.findings.Finding) for one ``parse_file`` result. ``gpu``: the job used GPUs (default:
    provenance lists GPUs). ``evidence``: the log's lines (parse.api.read_log), for the rules that read them."""
    name = parsed.get("file")
    out: list[Finding] = []
    nccl = parsed.get("nccl")
    ev = evidence or Evidence()
    if gpu is None:
        gpu = _gpu_job(provenance)
    where_ib = _ib_visible(nccl or {}, provenance)
    hosts, _why = hosts_seen(parsed, ev)
    network, _how = network_seen(parsed, ev, where_ib)
    out += [f.about(str(name)) for f in _evidence_checks(parsed, ev, hosts, network)]
    out += env_findings(ev.env, name)
    if nccl is None:
        if gpu:
            out.append(Finding(WARNING, "no-nccl-lines", "GPU job, but the log has no NCCL lines at all",
                               HINT_NO_NCCL, subject=name))
        return out
    edges = nccl.get("edges") or []
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
    net_edges = [e for e in edges if (e.get("transport") or "").startswith(("NET/IB", "NET/RoCE"))]
    # GDR on some network edges means it works: sends without it are NCCL's default where the GPU has no NVLink
    # (GDR read, NCCL_NET_GDR_READ); only a network with no GDRDMA edge at all says GDR is off
    # a cut transport line may have been a GDRDMA one: nothing is said of GDR then (could-not-read says the lines)
    if net_edges and not any(e["transport"].endswith("/GDRDMA") for e in net_edges) and not cut_edges(parsed, ev):
        plain = sorted({e["transport"] for e in net_edges})
        out.append(Finding(INFO, "ib-without-gdrdma",
                           f"{' and '.join(plain)} used without GPUDirect RDMA on all {len(net_edges)} network edges",
                           HINT_GDR, subject=name))
    for w in nccl.get("warn_details") or []:
        who = ", ".join(x for x in (f"rank {w['first_rank']}" if w.get("first_rank") is not None else "",
                                    f"host {w['first_host']}" if w.get("first_host") else "") if x)
        times = f" ({w['count']} times)" if w["count"] > 1 else ""
        harmless = _harmless(w["message"], bool(where_ib))
        if harmless:
            out.append(Finding(INFO, "nccl-warn-harmless", f"NCCL WARN {w['message']}{times}: harmless here, "
                               f"{harmless}", None, subject=name))
        else:
            out.append(Finding(WARNING, "nccl-warn", f"NCCL WARN {w['message']}{times}; first from "
                               f"{who or 'an unknown rank'}",
                               "the first WARN is usually the root cause; later ranks fail because of it", subject=name))
    return out


def check_point(parsed: list[dict[str, Any]], provenance: list[dict] | None, device: str | None,
                evidence: Evidence | None = None) -> list[Finding]:
    """The check findings of all of one point's logs, each once: its .out and .err are one job."""
    # "a GPU job without NCCL lines" is about the job, not about each of its files
    gpu = None if device not in ("cpu", "cuda") else (device == "cuda" and not any(p.get("nccl") for p in parsed))
    seen, out = set(), []
    for p in parsed:
        for f in check_parsed(p, provenance or None, gpu=gpu, evidence=evidence):
            if (f.rule, f.claim) not in seen:
                seen.add((f.rule, f.claim))
                out.append(f)
    return out


def verdict(parsed: dict[str, Any], provenance: list[dict] | None = None, evidence: Evidence | None = None) -> str:
    """One line on where the ranks ran and the network the log shows, each with its evidence, e.g. '2 hosts
    (nNodes 2): network RoCE, selected (mlx5_0, mlx5_1); GPUDirect RDMA on 2/4 edges' or '1 host: P2P/IPC;
    network Socket, NET/IB found no device ...' or 'hosts not shown: network not shown: no NCCL lines ...'."""
    nccl = parsed.get("nccl") or {}
    ev = evidence or Evidence()
    where_ib = _ib_visible(nccl, provenance)
    hosts, why_hosts = hosts_seen(parsed, ev)
    network, how = network_seen(parsed, ev, where_ib)
    if hosts is None:
        seen = min((line.number for line in ev.first.values()), default=None) if nccl else None
        text = "hosts not shown" + (f" (could not read a host name: the NCCL lines carry none, e.g. line {seen})"
                                    if seen else "")
    elif hosts == 0:
        text = f"several hosts ({why_hosts})"
    else:
        text = f"{hosts} host{'s' if hosts > 1 else ''}" + (f" ({why_hosts})" if hosts > 1 and why_hosts else "")
    edges = nccl.get("edges") or []
    if hosts == 1:
        intra = sorted({e["transport"] for e in edges if e.get("transport")}) or \
            [t for t in nccl.get("transports") or [] if not t.startswith("NET/")]
        if intra:
            text += f": {', '.join(intra)}" + (" (NVLS)" if nccl.get("nvls_used") and "NVLS" not in intra else "")
    text += f"; network {network}, {how}" if network else f"; network not shown ({how})"
    inter = [e for e in edges if (e.get("transport") or "").startswith("NET/")]
    gdr = sum("GDRDMA" in (e.get("transport") or "") for e in inter)
    if inter and network and (gdr or network.startswith(("IB", "RoCE"))):  # any network's edges (NET/AWS Libfabric/0/GDRDMA too)
        cut = len(cut_edges(parsed, ev))
        text += f"; GPUDirect RDMA on {gdr}/{len(inter)} network edges" + \
            (f" ({cut} transport line(s) could not be read)" if cut else "")
    if network == NET_SOCKET and hosts != 1:
        text += f" while an IB device is visible {where_ib}" if where_ib else " (no IB device seen)"
    return text
