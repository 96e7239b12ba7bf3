"""Speed of light: the peak of the slowest link a point's traffic crosses, from the table in links.toml.

Which link: between hosts, the network NCCL used (IB port rate from sysfs, Ethernet/RoCE speed);
inside one host, NVLink by GPU model (NVLS where NCCL used it); a peak that cannot be known from
the evidence is None with the reason, never a guess.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from hpcbench.files import toml


@dataclass(frozen=True)
class Peak:
    gbps: float  # GB/s, unidirectional, per GPU (what busbw is compared with)
    link: str  # which link, as the table names it, and how it was identified
    practical: float | None = None  # what NVIDIA maintainers quote as achievable busbw, where they do
    source: str = ""


@cache
def read_table(name: str) -> dict[str, Any]:
    """One of explain's tables of peaks, beside this file: links.toml, gpus.toml (datasheet.py)."""
    return toml((Path(__file__).with_name(name)).read_text(encoding="utf-8"), name)


def table() -> list[dict[str, Any]]:
    return list(read_table("links.toml")["link"])


def _peak(entry: dict[str, Any], how: str, scale: float = 1.0) -> Peak:
    practical = entry.get("practical")
    return Peak(entry["peak"] * scale, f"{entry['name']}{how}", practical * scale if practical else None,
                entry.get("practical_source") or entry["source"])


def _named(entry: dict[str, Any], gpu: str) -> bool:
    name = gpu.upper()  # nvidia-smi writes "A100-PCIE-40GB", tables "PCIe"
    return any(g.upper() in name for g in entry["gpu"]) and not any(x.upper() in name for x in entry.get("exclude", ()))


def nvlink(gpu: str, nvls: bool = False) -> Peak | None:
    """NVLink (or NVLink SHARP, when NCCL used NVLS) of a GPU model, by its name; AMD's Infinity Fabric alike."""
    kinds = ("nvls",) if nvls else ("nvlink", "xgmi")
    return next((_peak(e, f": {gpu}") for e in table() if e["kind"] in kinds and _named(e, gpu)), None)


def gpu_pcie(gpu: str) -> Peak | None:
    """The x16 link of the PCIe generation a GPU without NVLink is built for, by its name."""
    for e in table():
        if e["kind"] == "gpu_pcie" and _named(e, gpu):
            bus = next(p for p in table() if p["kind"] == "pcie" and p["gts"] == e["gts"])
            return Peak(bus["peak"], f"{e['name']}: {gpu}", None, e["source"])
    return None


def instance(named: str) -> Peak | None:
    """A cloud instance's network between nodes, from the way a log names it ('p4d.24xlarge', 'P5en')."""
    bare = named.removeprefix("Standard_")  # Azure's size names: Standard_ND96isr_H100_v5
    for e in table():
        if e["kind"] == "instance" and any(re.fullmatch(re.escape(m) + r"(?:[.\w-]*)", bare) for m in e["match"]):
            return _peak(e, f" (the log names {named})")
    return None


def ib(rate: str, ports: int = 1, gpus: int = 1) -> Peak | None:
    """An InfiniBand port from its sysfs rate ("400 Gb/sec (4X NDR)"); ports shared by the GPUs of a node."""
    m = re.search(r"\((\d+X \w+)\)", rate)
    for e in table():
        if e["kind"] == "ib" and m and e["rate"] == m.group(1):
            share = min(ports, gpus) / gpus if gpus > ports else 1.0
            return _peak(e, f": {rate}" + (f", {ports} port(s) for {gpus} GPUs" if share < 1 else ""), share)
    return None


def pcie(link: dict[str, Any]) -> Peak | None:
    """A device's PCIe link as sysfs gives it ({"speed": "16.0 GT/s PCIe", "width": 8}): the x16 figure of
    its generation scaled to the width it trained to (a GPU in an x8 slot, or one that trained down)."""
    m = re.match(r"([\d.]+) GT/s", str(link.get("speed") or ""))
    width = link.get("width")
    if not m or not isinstance(width, int) or width <= 0:
        return None
    e = next((e for e in table() if e["kind"] == "pcie" and e["gts"] == float(m.group(1))), None)
    if e is None:
        return None
    name = e["name"].replace(" x16", f" x{width}")
    if link.get("max_width") and link["max_width"] != width:
        name += f" (trained down from x{link['max_width']})"
    return Peak(e["peak"] * width / 16, name, None, e["source"])


def ethernet(mbps: int, name: str = "") -> Peak | None:
    e = next(e for e in table() if e["kind"] == "ethernet")
    return Peak(mbps * e["per_mbps"], f"Ethernet {mbps / 1000:g} Gb/s{f' ({name})' if name else ''}",
                None, e["source"]) if mbps > 0 else None


def _ports(prov: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Active IB/RoCE ports of the first node's provenance: {device, rate, link_layer}."""
    for d in prov:
        ports = [{"device": dev.get("name"), **p} for dev in (d.get("infiniband") or {}).get("devices") or []
                 for p in dev.get("ports") or [] if "ACTIVE" in str(p.get("state", "")).upper()]
        if ports:
            return ports
    return []


def _fastest_nic(prov: list[dict[str, Any]]) -> tuple[int, str]:
    nics = [n for d in prov[:1] for n in d.get("nics") or [] if n.get("kind") not in ("loopback", "virtual")
            and isinstance(n.get("speed"), (int, float)) and n["speed"] > 0]
    best = max(nics, key=lambda n: n["speed"], default=None)
    return (int(best["speed"]), str(best.get("name"))) if best else (0, "")


def between_hosts(network: str | None, prov: list[dict[str, Any]], gpus_per_node: int) -> tuple[Peak | None, str]:
    """The link between hosts: (peak, or None and why)."""
    if network in ("IB", "IBext", "RoCE") or (network or "").startswith("IBext"):
        ports = _ports(prov)
        if not ports:
            return None, "the log shows an IB/RoCE network, but no provenance gives the port rate"
        p = ports[0]
        if str(p.get("link_layer", "")).lower() == "ethernet":  # RoCE: the Ethernet speed is the rate
            m = re.match(r"(\d+)", str(p.get("rate", "0")))
            if m is None:
                return None, f"RoCE rate {p.get('rate')!r} is not a number of Gb/s"
            return ethernet(int(m.group(1)) * 1000, f"RoCE {p['device']}"), ""
        peak = ib(str(p.get("rate", "")), len(ports), max(gpus_per_node, 1))
        return peak, "" if peak else f"IB rate {p.get('rate')!r} is not in the table"
    if network is None and not prov:
        return None, "the log shows neither the network NCCL used (no NCCL_DEBUG=INFO lines) nor the NICs"
    if network == "Socket" or network is None:
        mbps, name = _fastest_nic(prov)
        if not mbps:
            return None, "no NIC speed recorded (provenance missing, or a virtual NIC that reports none)"
        return ethernet(mbps, name), ""
    return None, f"network {network!r}: its link rate is not in the table"


def _slowest_pcie(prov: list[dict[str, Any]]) -> Peak | None:
    found = [pcie(g["pcie"]) for d in prov for g in d.get("gpus") or [] if g.get("pcie")]
    return min((p for p in found if p), key=lambda p: p.gbps, default=None)


def within_host(gpus: set[str], nvls: bool, transports: set[str],
                prov: list[dict[str, Any]] | None = None) -> tuple[Peak | None, str]:
    """The link between GPUs of one host: NVLink by GPU model, else the slowest GPU's PCIe link."""
    if not gpus:
        return None, "the GPU model is not known (no provenance, and the log does not name it)"
    gpu = min(gpus)
    if any(t.startswith("SHM") for t in transports):
        return None, "SHM goes through host memory, whose bandwidth is not in the table"
    peak = nvlink(gpu, nvls) or (nvlink(gpu) if nvls else None)
    if peak:
        return peak, ""
    bus = _slowest_pcie(prov or [])
    if bus:  # the link the GPU trained to beats the one it is built for
        return Peak(bus.gbps, f"{bus.link} ({gpu}, PCIe from sysfs)", None, bus.source), ""
    built = gpu_pcie(gpu)
    if built:
        return built, ""
    return None, f"{gpu}: no NVLink in the table, and no provenance gives its PCIe link (sysfs)"
