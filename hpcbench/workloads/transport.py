"""The transport of the CPU backends, which print no NCCL lines to read it from: Gloo's interface and Open
MPI's BTLs and PML, recorded in provenance (``"transport"``, provenance/2); hpcbench/parse/transport.py says them
in words ("Gloo TCP over lo", "Open MPI tcp BTL over eth0").

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
