"""The transport of the CPU backends in words, from what their ranks recorded in provenance
(hpcbench/workloads/transport.py writes it): "Gloo TCP over lo", "Open MPI tcp BTL over eth0, PML ob1", each
with its evidence. NCCL's transports are read from its own lines (nccl.py)."""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


def holding(address: str, ifaces: Mapping[str, str]) -> str | None:
    """The interface whose network holds ``address`` (the narrowest, lo for all of 127.0.0.0/8)."""
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return None
    nets = [(ipaddress.ip_interface(n).network, name) for name, n in ifaces.items()]
    held = [(net.prefixlen, name) for net, name in nets if ip in net]
    return max(held)[1] if held else None



@dataclass(frozen=True)
class Described:
    text: str  # "Gloo TCP over lo"
    evidence: str  # where it shows: the provenance field and the setting that decided it


def _gloo(doc: dict[str, Any], rank: int) -> Described:
    g, where = doc["gloo"], f"provenance-rank{rank}.json transport"
    if g.get("iface"):
        return Described(f"Gloo TCP over {g['iface']}", f"{where}.gloo: {g['iface_env']}={g['iface']}")
    iface = holding(doc.get("address") or "", doc.get("interfaces") or {})
    return Described(f"Gloo TCP over {iface or 'the interface of ' + str(doc.get('address'))}",
                     f"{where}: {g['iface_env']} unset, so the address of host name {doc.get('hostname')} "
                     f"({doc.get('address')}), on {iface or 'no interface recorded'}")


def _matches(spec: str, name: str, net: str) -> bool:
    """An Open MPI interface list item: an interface name, or a CIDR network that holds its address."""
    if "/" not in spec:
        return spec == name
    try:
        return ipaddress.ip_interface(net).ip in ipaddress.ip_network(spec, strict=False)
    except ValueError:
        return False


def tcp_interfaces(params: dict[str, Any], ifaces: Mapping[str, str]) -> list[str]:
    """The interfaces Open MPI's tcp BTL uses: those included, else all but those excluded."""
    include = (params.get("btl_tcp_if_include") or {}).get("value")
    exclude = (params.get("btl_tcp_if_exclude") or {}).get("value")
    if include:
        return [n for n, net in ifaces.items() if any(_matches(s, n, net) for s in include.split(","))]
    return [n for n, net in ifaces.items() if not any(_matches(s, n, net) for s in (exclude or "").split(",") if s)]


def allowed(spec: str | None, components: list[str], never: tuple[str, ...]) -> list[str]:
    """The components an MCA selection allows ("^vader": all but vader; "tcp,self": those), less ``never``."""
    names = [s for s in (spec or "").lstrip("^").split(",") if s]
    out = [c for c in components if c not in names] if not names or (spec or "").startswith("^") else names
    return [c for c in out if c not in never]


def _ompi(docs: list[tuple[int, dict[str, Any]]], ib: bool) -> Described:
    rank, d = next((r, x) for r, x in docs if x.get("ompi"))
    params, comps = d["ompi"]["params"], d["ompi"]["components"]
    value = {k: (v or {}).get("value") for k, v in params.items()}
    # self: a rank to itself; openib: nothing to open without an InfiniBand device
    btl = allowed(value.get("btl"), comps.get("btl") or [], ("self",) if ib else ("self", "openib"))
    btl.sort(key=lambda b: b != "tcp")
    ifaces = sorted({i for _, x in docs if x.get("ompi") for i in tcp_interfaces(params, x.get("interfaces") or {})})
    first = btl[0] if btl else None
    text = "Open MPI " + (f"{first} BTL" if first else "no BTL") + (f" over {', '.join(ifaces)}" if first == "tcp" else "")
    text += f" (also allowed: {', '.join(btl[1:])})" if btl[1:] else ""
    pml = allowed(value.get("pml"), comps.get("pml") or [], ("v", "monitoring"))  # v, monitoring: no transport
    pml.sort(key=lambda p: p != "ob1")  # the default; cm needs an MTL, ucx a UCX device
    text += ", PML " + (" or ".join(pml) if pml else "none")
    how = [f"{k}={v} ({params[k].get('source')})" for k, v in value.items() if v
           and (k != "btl_tcp_if_exclude" or params[k].get("source") != "default")]
    return Described(text, f"provenance-rank{rank}.json transport.ompi (ompi_info): " + ("; ".join(how) or "defaults"))


def describe(backend: str | None, provenance: list[dict[str, Any]]) -> Described | None:
    """How a CPU backend's traffic went, in words, from its ranks' provenance; None where it did not record
    it (provenance/1, or a backend this does not know)."""
    docs = [(int(d.get("rank") or 0), d["transport"]) for d in provenance
            if isinstance(d, dict) and isinstance(d.get("transport"), dict)]
    if backend == "gloo" and any(d.get("gloo") for _, d in docs):
        return _gloo(*next((d, r) for r, d in docs if d.get("gloo")))
    if backend == "mpi" and any(d.get("ompi") for _, d in docs):
        ib = any((p.get("infiniband") or {}).get("devices") for p in provenance if isinstance(p, dict))
        return _ompi(docs, ib)
    return None
