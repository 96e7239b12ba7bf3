"""Transport rules: which links NCCL really used, against what the nodes had.

The log checks of hpcbench.parse.checks (Socket while IB is visible, SHM where P2P was expected, IB
without GPUDirect RDMA, NCCL's WARN lines) are the same here, with the line that shows each; added:
NCCL variables that switch a transport off, NVLS or CollNet available but unused, and the network
named as it is (IB, RoCE, Socket, a plugin).
"""

from __future__ import annotations

from hpcbench.explain.context import Context
from hpcbench.findings import Finding
from hpcbench.parse.checks import DISABLES, check_point, env_findings, verdict
from hpcbench.vocab import INFO

# the line that shows each log check's finding
_SHOWN_BY = {"socket-with-ib": ("socket", "ib_device"), "shm-not-p2p": ("shm",), "ib-without-gdrdma": ("ib_transport",)}
# the NCCL variables each log check's fix is about, and how its fix names their keys
_KEYS = {"socket-with-ib": ("keys:", ("NCCL_IB_HCA", "NCCL_SOCKET_IFNAME", "NCCL_IB_DISABLE"), ""),
         "shm-not-p2p": ("keys:", ("NCCL_P2P_DISABLE", "NCCL_P2P_LEVEL"), ""),
         "ib-without-gdrdma": ("key:", ("NCCL_NET_GDR_LEVEL",), ""), "no-nccl-lines": ("key:", ("NCCL_DEBUG",), ""),
         "gdr-topology": ("keys:", ("NCCL_NET_GDR_LEVEL", "NCCL_IB_HCA"), ""),
         "nccl-warn": ("for more of NCCL's reasons, set", ("NCCL_DEBUG_SUBSYS",), ' = "ALL"')}


def log_checks(ctx: Context) -> list[Finding]:
    """The log checks of `hpcbench check` on the point's own logs (socket-with-ib, shm-not-p2p, ib-without-
    gdrdma, nccl-warn, no-nccl-lines on a GPU point), each with the log lines that show it; Socket while IB is
    visible costs the point's communication share."""
    out: list[Finding] = []
    for f in check_point(ctx.parsed, ctx.provenance, ctx.point.device, ctx.evidence):
        if f.rule == "no-nccl-lines" and (ctx.point.device != "cuda" or ctx.point.point_id is None):
            continue  # only a job known to be on GPUs; of someone else's log the network verdict says it
        if f.rule == "nccl-env":  # env_disables says them, from the provenance too
            continue
        lines = [str(ctx.evidence.first[k]) for k in _SHOWN_BY.get(f.rule, ()) if k in ctx.evidence.first]
        cost = ctx.point.comm_fraction if f.rule == "socket-with-ib" else None
        effect = (f"communication is {ctx.point.comm_fraction:.0%} of the step; over IB it would be a fraction "
                  "of that" if cost else None)
        lead, names, value = _KEYS.get(f.rule, ("", (), ""))
        keys = ", ".join(ctx.key("env", v) for v in names) + value
        fix = f"{f.fix} ({lead} {keys})" if f.fix and names else f.fix
        out.append(Finding(f.severity, f.rule, f.claim, fix, f.evidence or "; ".join(lines) or f.subject, effect,
                           ctx.name, cost))
    return out


def network(ctx: Context) -> list[Finding]:
    """Where the ranks ran and what the network was, named as it is: IB, RoCE, Socket or a plugin (an info line
    for every point with NCCL lines, and for a log someone else made, where it says what to collect)."""
    if not ctx.nccl and ctx.point.point_id is not None:
        return []
    said = {verdict(p, ctx.provenance or None, ctx.evidence) for p in ctx.parsed}
    where = ctx.evidence.first.get("ib_device") or ctx.evidence.first.get("socket")
    return [Finding(INFO, "network", "; ".join(sorted(said)), None, str(where) if where else None,
                    subject=ctx.name)]


def env_disables(ctx: Context) -> list[Finding]:
    """An NCCL_* variable that turns a transport or feature off (P2P, IB, SHM, NET, GDR level 0), set in the
    ranks' environment or said by NCCL's own line."""
    env = {name: (value, where) for name in DISABLES for value, where in [ctx.env(name)] if value is not None}
    return env_findings(env, ctx.name, lambda name: ctx.key("env", name), axis=True)


def unused_features(ctx: Context) -> list[Finding]:
    """NVLS (NVLink SHARP) or CollNet (SHARP in the network) available, but not used."""
    out = []
    first = ctx.evidence.first
    nvls_used = any(n.get("nvls_used") for n in ctx.nccl) or "nvls_used" in first
    # only a log that shows NCCL past its channel setup says NVLS was not set up (an excerpt may end before)
    if "nvls_available" in first and not nvls_used and ctx.evidence.all("setup_done"):
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
# A GPU whose nearest NIC is beyond NCCL_NET_GDR_LEVEL sends without GPUDirect RDMA: its edges show no GDRDMA, and
# its network data is staged through host memory; a variable that takes a transport away (or GDR from some hosts)
# lowers the figures the same way
EXPLAINS = {"gdr-topology": ("ib-without-gdrdma", "busbw"), "nccl-env": ("busbw", "ib-without-gdrdma", "shm-not-p2p")}
CAVEATS = ("could-not-read",)  # what parse could not read bounds what the figures and the verdict can bear
