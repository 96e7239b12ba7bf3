"""``hpcbench doctor --gpu``: is this GPU node healthy, and as fast as it should be?

Per GPU: identity (NVML and sysfs: bus id, NUMA node, nearest CPUs; do the "block" and "closest" layouts
give its rank the same CPUs?), the PCIe link against links.toml, pinned host<->device copies against that
link, bf16/fp32 matrix products and a device-to-device copy against the datasheet (gpus.toml); on GPU 0 a
one-rank DDP/NCCL ResNet-50 through hpcbench's own workload against a bare loop (goal: >= 0.98), and that
run's NCCL_DEBUG=INFO log read by `hpcbench parse` (version, WARN lines, the GPU NCCL names against NVML's);
with two GPUs or more, each pair's NVLink/P2P from NVML and a measured copy.

Every check is a Check: its figure, the reference and share it was judged on, and the limit, so that the
text and the JSON say the same. The judging is plain functions of data (tests feed them sysfs trees and
NVML answers); gpumeasure.py holds the measurements, gpunode.py the facts.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from hpcbench.explain import datasheet, links
from hpcbench.ops import gpunode
from hpcbench.ops.gpunode import GpuId, Pairing, PciPlace
from hpcbench.vocab import ERROR, INFO, OK, WARNING
from hpcbench.workloads.affinity import format_cpulist
from hpcbench.workloads.provenance import sysfs_bus_id

SCHEMA = "hpcbench.doctor-gpu/1"
LABEL = {OK: "ok", WARNING: "warn", ERROR: "fail", INFO: "info"}


@dataclass(frozen=True)
class Limit:
    ok: float  # a share of the reference at or above this is ok
    warn: float  # at or above this a warning, below it a failure
    of: str  # what the reference is


# The one table of limits; every judged line names the one it used.
LIMITS = {
    "h2d": Limit(0.70, 0.50, "the PCIe link's peak (links.toml)"),
    "d2h": Limit(0.70, 0.50, "the PCIe link's peak (links.toml)"),
    "bf16": Limit(0.60, 0.40, "the datasheet's dense bf16 TFLOP/s (gpus.toml)"),
    "fp32": Limit(0.60, 0.40, "the datasheet's fp32 TFLOP/s (gpus.toml)"),
    "memory": Limit(0.70, 0.50, "the datasheet's memory bandwidth (gpus.toml)"),
    "training": Limit(0.98, 0.95, "a bare PyTorch loop of the same model"),
    "p2p": Limit(0.50, 0.25, "the peak of the link between the two GPUs (links.toml)"),
}


SANE = 1.10  # a figure above this share of its peak means the peak is not the right one


@dataclass(frozen=True)
class Check:
    area: str  # identity, pairing, pcie, h2d, d2h, bf16, fp32, memory, training, nccl, p2p
    gpu: str | None  # "0", "0-1" for a pair, None for the node
    severity: str
    claim: str
    figure: float | None = None
    unit: str = ""
    reference: float | None = None  # what the figure is judged against
    share: float | None = None  # figure / reference
    limit: str | None = None  # the limit in words: "ok >= 70%, warn >= 50% of ..."
    source: str | None = None  # where the reference comes from
    evidence: str | None = None  # file:line or sysfs path
    fix: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def judge(area: str, gpu: str | None, what: str, figure: float, unit: str, reference: float | None,
          ref_name: str, source: str | None = None, how: str = "", fix: str | None = None,
          no_ref: str = "") -> Check:
    """ok / warn / fail by the share of ``reference`` that ``figure`` reaches (LIMITS[area])."""
    lim = LIMITS[area]
    limit = f"ok >= {lim.ok:.0%}, warn >= {lim.warn:.0%} of {lim.of}"
    if not reference:
        return Check(area, gpu, INFO, f"{what}: {figure:.4g} {unit} ({how}); not judged: {no_ref}", figure, unit,
                     limit=limit, evidence=how or None, fix=fix)
    share = figure / reference
    sev = OK if share >= lim.ok else WARNING if share >= lim.warn else ERROR
    claim = f"{what}: {figure:.4g} {unit} = {share:.0%} of {reference:.4g} {unit} ({ref_name})"
    return Check(area, gpu, sev, claim, figure, unit, reference, share, limit, source, how or None,
                 fix if sev != OK else None)


def identity(g: GpuId, place: PciPlace) -> list[Check]:
    """Name, bus id, NUMA node and nearest CPUs, from NVML and sysfs; whether the two agree on the NUMA node."""
    near = format_cpulist(place.local_cpus) if place.local_cpus is not None else "unknown"
    numa = place.numa_node if place.numa_node is not None else g.nvml_numa
    claim = (f"{g.name} (named by {g.source}), bus {sysfs_bus_id(g.bus_id)}, NUMA node "
             f"{numa if numa is not None else 'unknown'}, nearest cpus {near}")
    out = [Check("identity", str(g.index), OK if place.numa_node is not None else INFO, claim,
                 evidence=place.path,
                 fix=None if place.numa_node is not None else "no NUMA affinity in sysfs (numa_node -1 or missing): "
                 "one-socket node or VM, nothing to pair")]
    if place.numa_node is not None and g.nvml_numa is not None and place.numa_node != g.nvml_numa:
        out.append(Check("identity", str(g.index), WARNING, f"sysfs says NUMA node {place.numa_node}, NVML "
                         f"{g.nvml_numa}", evidence=f"{place.path}/numa_node",
                         fix="update the driver or BIOS: the two should agree (hpcbench pairs by sysfs)"))
    return out


def pairing(p: Pairing) -> Check:
    if p.agree is None:
        return Check("pairing", str(p.gpu), INFO, f"block vs closest not comparable: {p.detail}")
    if p.agree:
        return Check("pairing", str(p.gpu), OK, f"gpu_bind block and closest agree: {p.detail}")
    return Check("pairing", str(p.gpu), WARNING, f"gpu_bind block and closest disagree: {p.detail}",
                 fix='use gpu_bind = "closest" in the cluster profile (srun only): block feeds this GPU from the '
                     "other socket")


def host_link(g: GpuId, place: PciPlace) -> tuple[Check, links.Peak | None]:
    """The PCIe link as trained against what the device can do, and the peak copies are judged against."""
    link = place.link
    if link is None:
        return Check("pcie", str(g.index), WARNING, "PCIe link unknown: sysfs has no current_link_speed/width",
                     evidence=place.path, fix="a VM or container may hide it; read it on the host"), None
    now = links.pcie(link)
    best = links.pcie({"speed": link.get("max_speed"), "width": link.get("max_width")}) or now
    trained = f"{link['speed']} x{link['width']}"
    most = f"{link.get('max_speed')} x{link.get('max_width')}"
    down = now is not None and best is not None and now.gbps < best.gbps
    claim = f"PCIe {trained}" + (f" (device max {most})" if down else "") + \
        (f" = {now.link}, {now.gbps:.1f} GB/s per direction" if now else ": speed not in links.toml")
    fix = ("check the slot (x16, right generation in the BIOS) or reseat the card; an idle GPU may also lower "
           "its link speed, so compare with the copy figures below") if down else None
    return Check("pcie", str(g.index), WARNING if down or now is None else OK, claim, now.gbps if now else None,
                 "GB/s", best.gbps if best else None, None, None, best.source if best else None,
                 place.path, fix), best


def copies(g: GpuId, h2d: Any, d2h: Any, peak: links.Peak | None) -> list[Check]:
    """Pinned copies against the PCIe link. A copy faster than the link sysfs shows means sysfs does not show
    the real link (a VM's virtual root port): said, not judged against it."""
    ref = peak.gbps if peak else None
    name = peak.link if peak else ""
    fix = ("check the link (lspci -vv: LnkSta), the IOMMU setting, and whether a PCIe switch is shared with other "
           "GPUs or NICs")
    out = []
    for area, what, m in (("h2d", "host -> device", h2d), ("d2h", "device -> host", d2h)):
        c = judge(area, str(g.index), what, m.figure, m.unit, ref, name, peak.source if peak else None, m.how, fix,
                  "no PCIe peak (link unknown)")
        if c.share is not None and c.share > SANE:
            c = Check(area, c.gpu, WARNING, f"{c.claim}: faster than the link sysfs shows, so sysfs does not show "
                      "the real link", c.figure, c.unit, c.reference, c.share, c.limit, c.source, c.evidence,
                      "a VM or container shows a virtual link: read the host's sysfs (lspci -vv, LnkSta)")
        out.append(c)
    return out


def device_figures(g: GpuId, bf16: Any, fp32: Any, memory: Any) -> list[Check]:
    """Matrix products and device memory against the datasheet row for this GPU's name (a figure that could
    not be measured, None, has its failed line already)."""
    sheet = datasheet.lookup(g.name)
    out = []
    for area, what, m, key in (("bf16", "bf16 matmul", bf16, "bf16"), ("fp32", "fp32 matmul", fp32, "fp32"),
                               ("memory", "device memory copy", memory, "memory")):
        if m is None:
            continue
        ref = getattr(sheet, key) if sheet else None
        src = (sheet.source if key == "memory" else sheet.compute_source) if sheet else None
        why = (f"no row for {g.name!r} in hpcbench/explain/gpus.toml" if sheet is None
               else f"{sheet.name}: no sourced {key} figure ({sheet.note or 'none found'})")
        out.append(judge(area, str(g.index), what, m.figure, m.unit, ref, f"{sheet.name} datasheet" if sheet else "",
                         src, m.how, "check clocks and power (nvidia-smi -q -d CLOCK,POWER,PERFORMANCE): a "
                         "throttled or power-capped GPU runs below its datasheet", why))
    return out


def training(t: Any) -> Check:
    """The workload harness's throughput as a share of the bare loop's (its overhead on this GPU)."""
    import statistics

    c = judge("training", "0", "hpcbench workload / bare loop", t.ratio, "x", 1.0, "the bare loop", None, t.how,
              "run benchmarks/harness_overhead.py --framework ddp to see where the harness spends its time")
    thr = f"{statistics.median(t.harness):.1f} vs {statistics.median(t.bare):.1f} samples/s"
    return Check(c.area, c.gpu, c.severity, f"hpcbench workload / bare loop = {t.ratio:.3f} ({thr})", c.figure,
                 "", 1.0, c.share, c.limit, None, c.evidence, c.fix)


def nccl(log: Path, gpus: list[GpuId], rank_gpu: dict[int, int] | None = None,
         places: list[PciPlace] | None = None) -> list[Check]:
    """What `hpcbench parse` reads in a run's NCCL_DEBUG=INFO log: the version, each distinct WARN, and the
    GPU each rank's init line names against NVML's bus id of the GPU that rank used (``rank_gpu``: rank ->
    index into ``gpus``; default rank r used gpus[r]); with ``places``, the CPUs NCCL pinned to against the
    GPU's nearest CPUs in sysfs."""
    from hpcbench.parse.api import parse_file
    from hpcbench.parse.gpus import gpu_affinity, named_gpus

    facts = parse_file(log).get("nccl") or {}
    name = log.name
    out = [Check("nccl", None, OK, f"NCCL {facts['version']}", evidence=name) if facts.get("version") else
           Check("nccl", None, WARNING, "no 'NCCL version' line: NCCL_DEBUG=INFO was not set, or NCCL did not start",
                 evidence=name, fix="export NCCL_DEBUG=INFO for the run (hpcbench's job scripts do)")]
    for w in facts.get("warn_details") or []:
        out.append(Check("nccl", None, WARNING, f"NCCL WARN x{w['count']}: {w['message']}", evidence=name,
                         fix="read the WARN: it names what NCCL fell back from"))
    with open(log, errors="replace") as f:
        named = named_gpus(f)
    with open(log, errors="replace") as f:
        pinned = gpu_affinity(f)
    if not named:
        out.append(Check("nccl", None, WARNING, "NCCL named no GPU: no init line with 'busId'", evidence=name,
                         fix="NCCL 2.12 or later prints 'cudaDev N nvmlDev N busId X' at init with NCCL_DEBUG=INFO"))
    by_bus = {sysfs_bus_id(g.bus_id): g for g in gpus}
    for n in named:
        idx = (rank_gpu or {}).get(n["rank"], n["rank"])
        want = gpus[idx] if 0 <= idx < len(gpus) else None
        where = f"{name}:{n['line']}"
        if want is None:
            out.append(Check("nccl", None, INFO, f"rank {n['rank']} names bus {n['bus_id']}: not a rank of this node",
                             evidence=where))
            continue
        same = sysfs_bus_id(want.bus_id) == n["bus_id"]
        other = by_bus.get(n["bus_id"])
        claim = (f"rank {n['rank']}: NCCL names cudaDev {n['cuda_dev']} nvmlDev {n['nvml_dev']} busId {n['bus_id']}"
                 + (f" = GPU {want.index} {want.name}, as NVML says" if same else
                    f", but the rank used GPU {want.index} at {sysfs_bus_id(want.bus_id)} per NVML"
                    + (f" (that bus is GPU {other.index})" if other else "")))
        out.append(Check("nccl", str(want.index), OK if same else ERROR, claim, evidence=where,
                         fix=None if same else "CUDA_VISIBLE_DEVICES / CUDA_DEVICE_ORDER differ between the rank "
                         "and NVML: set CUDA_DEVICE_ORDER=PCI_BUS_ID"))
        mask = pinned.get((n["host"], n["cuda_dev"]))
        if same and mask and places and want.index < len(places):
            out.append(_pinned(want, mask[0], f"{name}:{mask[1]}", places[want.index]))
    return out


def _pinned(g: GpuId, cpus: set[int], where: str, place: PciPlace) -> Check:
    """NCCL's "Setting affinity for GPU N to MASK" against the GPU's nearest CPUs in sysfs."""
    said = f"NCCL pins GPU {g.index}'s threads to cpus {format_cpulist(cpus)}"
    if place.local_cpus is None:
        return Check("nccl", str(g.index), INFO, f"{said}; sysfs gives the GPU no nearest cpus", evidence=where)
    if cpus <= place.local_cpus:
        return Check("nccl", str(g.index), OK, f"{said}, within its nearest cpus {format_cpulist(place.local_cpus)} "
                     "(sysfs)", evidence=where)
    return Check("nccl", str(g.index), WARNING, f"{said}, outside its nearest cpus "
                 f"{format_cpulist(place.local_cpus)} (sysfs)", evidence=where,
                 fix="NCCL takes the GPU's CPUs from NVML: a driver/BIOS that disagrees with sysfs, or a rank bound "
                     "elsewhere; compare nvidia-smi topo -m")


def peers(gpus: list[GpuId], link: gpunode.PeerLink, measured: Any, places: list[PciPlace]) -> Check:
    """One pair: NVML's NVLink and topology, CUDA's P2P, and a measured copy against the link between them."""
    a, b = gpus[link.a], gpus[link.b]
    pair = f"{a.index}-{b.index}"
    said = (f"NVLink {'yes' if link.nvlink else 'no' if link.nvlink is False else 'unknown'}, "
            f"NVML topology {link.level or 'unknown'}, CUDA P2P {'yes' if link.p2p else 'no'}")
    peak = links.nvlink(a.name) if link.nvlink else None
    if peak is None:
        buses = [links.pcie(p.link) for p in (places[a.index], places[b.index]) if p.link]
        slow = min((p for p in buses if p), key=lambda p: p.gbps, default=None)
        peak = slow
    fix = None if link.p2p else ("P2P is off: a VM, an IOMMU/ACS setting or a PCIe switch blocks it "
                                 "(nvidia-smi topo -p2p r)")
    return judge("p2p", pair, f"GPU {pair} copy ({said})", measured.figure, measured.unit, peak.gbps if peak else None,
                 peak.link if peak else "", peak.source if peak else None, measured.how, fix,
                 "no NVLink row and no PCIe link known for this pair")
