"""Bytes on the wire: each node's interface counters around the timed steps (provenance ``wire``), against the
peak of that node's link, and which machine each node really was (the kernel's boot id, not the hostname).

The report's table and explain's findings both read these; nothing here is measured again.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

LOOPBACK = "lo"
# The variables by which a user names the interface the traffic should take, most specific first.
MEANT_VARS = ("GLOO_SOCKET_IFNAME", "HOROVOD_GLOO_IFACE", "NCCL_SOCKET_IFNAME", "OMPI_MCA_btl_tcp_if_include")


def rate_words(bps: float) -> str:
    """Bits per second as people name a link: 100 Mbit/s, 1 Gbit/s."""
    for unit, scale in (("Gbit/s", 1e9), ("Mbit/s", 1e6), ("kbit/s", 1e3)):
        if bps >= scale:
            return f"{bps / scale:g} {unit}"
    return f"{bps:g} bit/s"


def bytes_words(n: float) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return f"{n / scale:.3g} {unit}"
    return f"{n:.0f} B"


@dataclass(frozen=True)
class LinkPeak:
    """A node's link rate and where the figure comes from (declared, sysfs, or the table)."""
    bits_per_second: float
    source: str  # "declared in <file>: shaped link of the minicluster", "sysfs speed of eth0", ...

    @property
    def bytes_per_second(self) -> float:
        return self.bits_per_second / 8

    def words(self) -> str:
        return rate_words(self.bits_per_second)


@dataclass(frozen=True)
class NodeWire:
    node: str  # the Slurm node (else the hostname) of the rank whose counters these are
    rank: int
    interface: str  # the interface that sent the most bytes in the window
    sent: int  # bytes it sent in the window
    received: int
    other: dict[str, int]  # bytes sent over the node's other interfaces (loopback included)
    steps: int
    seconds: float
    what: str  # what the window covered ("timed steps", "all_reduce 8388608 B in place")
    size: int | None  # a collective's message size in the window; None for training steps
    meant: str | None  # the interface the user named (GLOO_SOCKET_IFNAME, ..., or the declared link's)
    meant_by: str  # where that name comes from
    peak: LinkPeak | None
    peak_why: str  # why there is no peak

    @property
    def per_step(self) -> float:
        return self.sent / self.steps if self.steps else float(self.sent)

    @property
    def rate(self) -> float:
        """Bytes per second the interface sent over the window."""
        return self.sent / self.seconds if self.seconds > 0 else 0.0

    @property
    def share(self) -> float | None:
        return self.rate / self.peak.bytes_per_second if self.peak else None

    @property
    def elsewhere(self) -> bool:
        """The bytes went over another interface than the one meant."""
        return self.meant is not None and self.sent > 0 and self.interface != self.meant and \
            not self.interface.startswith(self.meant)


def _meant(doc: dict[str, Any]) -> tuple[str | None, str]:
    env = doc.get("env") or {}
    for var in MEANT_VARS:
        if env.get(var):
            return str(env[var]).split(",")[0].lstrip("^=") or None, f"env {var}"
    declared = doc.get("link_declared") or {}
    if declared.get("interface"):
        return str(declared["interface"]), f"{declared.get('file', 'the links file')}"
    return None, ""


def link_peak(doc: dict[str, Any], interface: str) -> tuple[LinkPeak | None, str]:
    """The peak of the node's link: declared (HPCBENCH_LINKS), else the interface's sysfs speed, else unknown."""
    declared = doc.get("link_declared") or {}
    if declared.get("bits_per_second") and declared.get("interface") in (None, interface):
        return LinkPeak(float(declared["bits_per_second"]),
                        f"declared in {declared.get('file', 'HPCBENCH_LINKS')}: {declared.get('source', '')}"), ""
    nic = next((n for n in doc.get("nics") or [] if n.get("name") == interface), None)
    if nic and isinstance(nic.get("speed"), (int, float)) and nic["speed"] > 0:
        if nic.get("kind") in ("virtual", "loopback"):
            return None, f"{interface} is a {nic['kind']} interface: its sysfs speed ({nic['speed']} Mb/s) is no rate"
        return LinkPeak(nic["speed"] * 1e6, f"sysfs speed of {interface}"), ""
    return None, f"no declared rate (HPCBENCH_LINKS) and no sysfs speed for {interface}"


def node_wires(prov: list[dict[str, Any]]) -> list[NodeWire]:
    """One entry per node (its lowest rank's counters: the ranks of a node share its interfaces)."""
    out: dict[str, NodeWire] = {}
    for doc in sorted(prov, key=lambda d: d.get("rank") or 0):
        wire = doc.get("wire")
        node = str(doc.get("slurm_node") or doc.get("hostname") or "?")
        if not wire or node in out:
            continue
        sent = {str(i["name"]): int(i.get("tx_bytes") or 0) for i in wire.get("interfaces") or []}
        got = {str(i["name"]): int(i.get("rx_bytes") or 0) for i in wire.get("interfaces") or []}
        if not sent:
            continue
        meant, by = _meant(doc)
        # the interface that carried the traffic: the busiest one other than loopback, unless only loopback moved
        busy = max(sent, key=lambda n: (sent[n] > 0 and n != LOOPBACK, sent[n]))
        peak, why = link_peak(doc, busy)
        out[node] = NodeWire(node, int(doc.get("rank") or 0), busy, sent[busy], got.get(busy, 0),
                             {n: b for n, b in sent.items() if n != busy and b}, int(wire.get("steps") or 0),
                             float(wire.get("seconds") or 0.0), str(wire.get("what") or ""),
                             wire.get("size_bytes"), meant, by, peak, why)
    return list(out.values())


@dataclass(frozen=True)
class Machines:
    """Which kernels the ranks ran on: nodes that share a boot id are one host, whatever their hostnames."""
    hosts: dict[str, list[str]]  # boot id -> the node names on it
    namespaces: dict[str, set[str]]  # boot id -> the distinct network namespaces of its nodes

    @property
    def one_host_many_namespaces(self) -> bool:
        return len(self.hosts) == 1 and any(len(n) > 1 for n in self.namespaces.values())


def machines(prov: list[dict[str, Any]]) -> Machines | None:
    """None when the provenance does not say (older records, foreign logs)."""
    hosts: dict[str, list[str]] = {}
    spaces: dict[str, set[str]] = {}
    for d in prov:
        boot = d.get("boot_id")
        if not boot:
            return None
        node = str(d.get("slurm_node") or d.get("hostname") or "?")
        if node not in hosts.setdefault(boot, []):
            hosts[boot].append(node)
        if d.get("net_namespace"):
            spaces.setdefault(boot, set()).add(str(d["net_namespace"]))
    return Machines({b: sorted(n) for b, n in hosts.items()}, spaces) if hosts else None


def host_names(prov: list[dict[str, Any]]) -> tuple[str, ...]:
    """One name per machine ("node1+node2" for two nodes of one kernel); () when the provenance does not say."""
    m = machines(prov)
    return tuple(sorted("+".join(nodes) for nodes in m.hosts.values())) if m else ()
