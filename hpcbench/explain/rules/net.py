"""Transport rules: which links NCCL really used, against what the nodes had.

The log checks of hpcbench.parse.checks (Socket while IB is visible, SHM where P2P was expected, IB
without GPUDirect RDMA, NCCL's WARN lines) are the same here, with the line that shows each; added:
NCCL variables that switch a transport off, NVLS or CollNet available but unused, and the network
named as it is (IB, RoCE, Socket, a plugin).
"""

from __future__ import annotations

from hpcbench.explain.context import Context
from hpcbench.findings import Finding
from hpcbench.parse.checks import check_point, verdict
from hpcbench.vocab import INFO, WARNING

# the line that shows each log check's finding
_SHOWN_BY = {"socket-with-ib": ("socket", "ib_device"), "shm-not-p2p": ("shm",), "ib-without-gdrdma": ("ib_transport",)}
# the NCCL variables each log check's fix is about, and how its fix names their keys
_KEYS = {"socket-with-ib": ("keys:", ("NCCL_IB_HCA", "NCCL_SOCKET_IFNAME", "NCCL_IB_DISABLE"), ""),
         "shm-not-p2p": ("keys:", ("NCCL_P2P_DISABLE", "NCCL_P2P_LEVEL"), ""),
         "ib-without-gdrdma": ("key:", ("NCCL_NET_GDR_LEVEL",), ""), "no-nccl-lines": ("key:", ("NCCL_DEBUG",), ""),
         "nccl-warn": ("for more of NCCL's reasons, set", ("NCCL_DEBUG_SUBSYS",), ' = "ALL"')}
# NCCL variables that take a transport away, and what they cost when set
_DISABLES = {"NCCL_P2P_DISABLE": ("1", "GPUs inside a node talk through host memory (SHM) instead of NVLink/PCIe P2P"),
             "NCCL_IB_DISABLE": ("1", "NCCL falls back to TCP sockets between nodes"),
             "NCCL_SHM_DISABLE": ("1", "GPUs that cannot use P2P go through the network instead of host memory"),
             "NCCL_NET_GDR_LEVEL": ("0", "GPUDirect RDMA is off: network data is staged through host memory"),
             "NCCL_NET": ("Socket", "NCCL is told to use TCP sockets between nodes")}


def log_checks(ctx: Context) -> list[Finding]:
    out: list[Finding] = []
    for f in check_point(ctx.parsed, ctx.provenance, ctx.point.device):
        if f.rule == "no-nccl-lines" and ctx.point.device != "cuda":  # only a job known to be on GPUs
            continue
        lines = [str(ctx.evidence.first[k]) for k in _SHOWN_BY.get(f.rule, ()) if k in ctx.evidence.first]
        cost = ctx.point.comm_fraction if f.rule == "socket-with-ib" else None
        effect = (f"communication is {ctx.point.comm_fraction:.0%} of the step; over IB it would be a fraction "
                  "of that" if cost else None)
        lead, names, value = _KEYS.get(f.rule, ("", (), ""))
        keys = ", ".join(ctx.key("env", v) for v in names) + value
        fix = f"{f.fix} ({lead} {keys})" if f.fix and names else f.fix
        out.append(Finding(f.severity, f.rule, f.claim, fix, "; ".join(lines) or f.subject, effect,
                           ctx.name, cost))
    return out


def network(ctx: Context) -> list[Finding]:
    """What the network was, named as it is: IB, RoCE, Socket or a plugin (an info line for every point)."""
    if not ctx.nccl:
        return []
    said = {verdict(p, ctx.provenance or None) for p in ctx.parsed if p.get("nccl")}
    where = ctx.evidence.first.get("ib_device") or ctx.evidence.first.get("socket")
    return [Finding(INFO, "network", "; ".join(sorted(said)), None, str(where) if where else None,
                    subject=ctx.name)]


def env_disables(ctx: Context) -> list[Finding]:
    out = []
    for name, (value, what) in _DISABLES.items():
        got, where = ctx.env(name)
        if got is not None and got.lower() == value.lower():
            out.append(Finding(WARNING, "nccl-env", f"{name}={got} is set: {what}",
                               f"unset {ctx.key('env', name)} unless this study is about it (then it is an axis, "
                               f"[matrix.env] {name}, and fine)",
                               where, subject=ctx.name))
    return out


def unused_features(ctx: Context) -> list[Finding]:
    """NVLS (NVLink SHARP) or CollNet (SHARP in the network) available, but not used."""
    out = []
    first = ctx.evidence.first
    nvls_used = any(n.get("nvls_used") for n in ctx.nccl) or "nvls_used" in first
    if "nvls_available" in first and not nvls_used:
        algo, _where = ctx.env("NCCL_ALGO")
        why = f" (NCCL_ALGO={algo})" if algo else ""
        out.append(Finding(INFO, "nvls-unused", f"NVLS multicast is available but no NVLS channel was used{why}",
                           "allreduce over NVLink SHARP reaches ~480 GB/s busbw on H100 against ~370 with Ring: "
                           f"check {ctx.key('env', 'NCCL_NVLS_ENABLE')} and {ctx.key('env', 'NCCL_ALGO')}",
                           str(first["nvls_available"]), subject=ctx.name))
    collnet_used = any(n.get("collnet_used") for n in ctx.nccl) or "collnet_used" in first
    if "collnet_available" in first and not collnet_used:
        out.append(Finding(INFO, "collnet-unused", "CollNet (in-network reduction) is available but was not used",
                           f"set {ctx.key('env', 'NCCL_COLLNET_ENABLE')} = \"1\" and load the SHARP plugin",
                           str(first["collnet_available"]),
                           subject=ctx.name))
    return out


RULES = (log_checks, network, env_disables, unused_features)
ORDER = 10  # transports first: what the run used is the first thing to know
ON_LOGS_ALONE = True  # a log of NCCL lines only is evidence about transports
