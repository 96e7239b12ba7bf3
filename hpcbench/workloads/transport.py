"""The transport of the CPU backends, which print no NCCL lines to read it from: Gloo's interface and Open
MPI's BTLs and PML, recorded in provenance (``"transport"``, provenance/2) and said in words by ``describe``:
"Gloo TCP over lo", "Open MPI tcp BTL over eth0".

- Gloo (torch's process group and Horovod's) carries everything over TCP on one interface: the one named
  (GLOO_SOCKET_IFNAME for torch, HOROVOD_GLOO_IFACE for Horovod), else the one holding the address this
  host's name resolves to (Gloo's default device).
- Open MPI takes its BTLs, PML and TCP interfaces from MCA parameters: the environment (OMPI_MCA_*) and its
  parameter files, as ``ompi_info --parsable`` reports them (about 0.3 s per call, so once per node, by
  local rank 0, and only for MPI points). Its tcp BTL uses every interface that is up and not excluded
  (btl_tcp_if_include / btl_tcp_if_exclude, names or CIDR), with IPv4 addresses: recorded per interface.
"""

from __future__ import annotations

import ipaddress
import socket
import struct
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from hpcbench import proc

GLOO_ENV = {"ddp": "GLOO_SOCKET_IFNAME", "horovod": "HOROVOD_GLOO_IFACE"}  # framework -> who names Gloo's interface
_OMPI_PARAMS = ("btl", "pml", "btl_tcp_if_include", "btl_tcp_if_exclude")
_SIOCGIFADDR, _SIOCGIFNETMASK = 0x8915, 0x891B


def _ioctl_ipv4(name: str, request: int) -> str | None:
    import fcntl

    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            got = fcntl.ioctl(s.fileno(), request, struct.pack("256s", name.encode()[:15]))
        except OSError:  # no IPv4 address on it
            return None
    return socket.inet_ntoa(got[20:24])


def interfaces() -> dict[str, str]:
    """Interface -> its IPv4 network ("127.0.0.1/8"), for those that have one."""
    out = {}
    for _, name in socket.if_nameindex():
        addr, mask = _ioctl_ipv4(name, _SIOCGIFADDR), _ioctl_ipv4(name, _SIOCGIFNETMASK)
        if addr and mask:
            out[name] = str(ipaddress.ip_interface(f"{addr}/{mask}"))
    return out


def holding(address: str, ifaces: Mapping[str, str]) -> str | None:
    """The interface whose network holds ``address`` (the narrowest, lo for all of 127.0.0.0/8)."""
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return None
    nets = [(ipaddress.ip_interface(n).network, name) for name, n in ifaces.items()]
    held = [(net.prefixlen, name) for net, name in nets if ip in net]
    return max(held)[1] if held else None


def _host_address() -> dict[str, str | None]:
    host = socket.gethostname()
    try:
        return {"hostname": host, "address": socket.gethostbyname(host)}
    except OSError:
        return {"hostname": host, "address": None}


def ompi_params(environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Open MPI's effective BTL/PML parameters (value and source) and its BTL and PML components."""
    out: dict[str, Any] = {"params": {}, "components": {}}
    for framework in ("btl", "pml"):
        ran = proc.run(["ompi_info", "--parsable", "--level", "9", "--param", framework, "all"], timeout=20,
                       env=dict(environ) if environ is not None else None)
        if not ran.ok:
            raise RuntimeError(ran.why())
        comps = []
        for line in ran.stdout.splitlines():
            parts = line.split(":", 5)
            if len(parts) < 5 or parts[0] != "mca":
                continue
            if parts[3] == "version" and parts[4].startswith('"component') and parts[2] not in comps:
                comps.append(parts[2])
            elif parts[3] == "param" and len(parts) == 6 and parts[4] in _OMPI_PARAMS:
                key, rest = parts[4], parts[5]
                field, _, value = rest.partition(":")
                if field in ("value", "source"):
                    out["params"].setdefault(key, {})[field] = value or None
        out["components"][framework] = comps
    return out


def probe(framework: str, backend: str, local_rank: int, environ: Mapping[str, str]) -> dict[str, Any]:
    """This rank's view of its transport. Open MPI's parameters: local rank 0 of an MPI point only."""
    doc: dict[str, Any] = {"interfaces": interfaces(), **_host_address()}
    if backend == "gloo":
        name = GLOO_ENV.get(framework, "GLOO_SOCKET_IFNAME")
        doc["gloo"] = {"iface_env": name, "iface": environ.get(name) or None}
    if backend == "mpi" and local_rank == 0:
        doc["ompi"] = ompi_params(environ)
    return doc


def record(recorder: Any, framework: str, backend: str, local_rank: int) -> None:
    """Add the transport to a rank's provenance (workloads/provenance.Recorder), after its start."""
    import os

    recorder.add("transport", lambda: probe(framework, backend, local_rank, os.environ))
    recorder.write()  # now: a rank that fails in its rendezvous still says which interface it tried


# --- in words, from the provenance of a point's ranks ---------------------------------------------------

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
