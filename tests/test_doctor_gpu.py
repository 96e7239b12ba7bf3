"""hpcbench doctor --gpu, every part that needs no GPU: sysfs trees in the kernel's formats, the NVML answers
written down as data, judging against the limits, the text and JSON, and the NCCL cross-check on real logs
(tests/data/logs, SOURCES.tsv). No figure here is a GPU's: measured ones come from the CPU and are checked
only for their arithmetic or plumbing; judged ones are given, and named as given."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from conftest import REPO, write

from hpcbench.explain import datasheet, links
from hpcbench.files import toml
from hpcbench.ops import gpu, gpumeasure, gpunode, gpurun
from hpcbench.ops.gpumeasure import Measure
from hpcbench.ops.gpunode import GpuId
from hpcbench.parse.gpus import named_gpus, nccl_bus_id
from hpcbench.vocab import ERROR, INFO, OK, WARNING

LOGS = REPO / "tests/data/logs"


def node(root: Path, numa_cpus: dict[int, str], socket_of_numa: dict[int, int]) -> Path:
    """CPU topology: each NUMA node's cpulist, and the socket it sits on."""
    from hpcbench.workloads.affinity import parse_cpulist

    for n, cpus in numa_cpus.items():
        write(root / f"devices/system/node/node{n}/cpulist", cpus + "\n")
        for c in parse_cpulist(cpus):
            write(root / f"devices/system/cpu/cpu{c}/topology/physical_package_id", f"{socket_of_numa[n]}\n")
            write(root / f"devices/system/cpu/cpu{c}/topology/core_cpus_list", f"{c}\n")
    return root


def pci(root: Path, bus: str, numa: int, cpus: str, speed: str = "16.0 GT/s PCIe", width: int = 16,
        max_speed: str | None = None, max_width: int = 16) -> None:
    """One device as /sys/bus/pci/devices/<bus>/ shows it (Documentation/ABI/testing/sysfs-bus-pci)."""
    d = root / "bus/pci/devices" / bus
    for name, text in (("numa_node", str(numa)), ("local_cpulist", cpus), ("current_link_speed", speed),
                       ("current_link_width", str(width)), ("max_link_speed", max_speed or speed),
                       ("max_link_width", str(max_width))):
        write(d / name, text + "\n")


# The GPU/NUMA layout of a 4x A100 node published at upb-pc2.atlassian.net (PC2 wiki, "NVIDIA A100 40GB with
# NVLINK"): two sockets in NPS4, GPU0 cpus 48-63 NUMA 3, GPU1 16-31 NUMA 1, GPU2 112-127 NUMA 7, GPU3 80-95 NUMA 5.
# The page gives no bus ids: GPU 0's is the one ddp_82.log names, so that a report's NCCL line is about it.
PC2 = [("0000:00:03.0", 3, "48-63"), ("0000:41:00.0", 1, "16-31"), ("0000:81:00.0", 7, "112-127"),
       ("0000:c1:00.0", 5, "80-95")]
PC2_NUMA = {n: f"{16 * n}-{16 * n + 15}" for n in range(8)}
PC2_SOCKET = {n: n // 4 for n in range(8)}


def pc2(root: Path, gpus=PC2, **link) -> list[GpuId]:
    node(root, PC2_NUMA, PC2_SOCKET)
    for bus, numa, cpus in gpus:
        pci(root, bus, numa, cpus, **link)
    return [GpuId(i, "NVIDIA A100-SXM4-40GB", "0000" + bus.upper(), numa) for i, (bus, numa, _) in enumerate(gpus)]


def test_sysfs_is_read_as_the_kernel_writes_it(tmp_path):
    gpus = pc2(tmp_path)
    place = gpunode.read_place(gpus[2].bus_id, tmp_path)
    assert place.path == str(tmp_path / "bus/pci/devices/0000:81:00.0")
    assert (place.numa_node, min(place.local_cpus), max(place.local_cpus), place.missing) == (7, 112, 127, ())
    assert place.link == {"speed": "16.0 GT/s PCIe", "width": 16, "max_speed": "16.0 GT/s PCIe", "max_width": 16}
    write(tmp_path / "bus/pci/devices/0000:81:00.0/numa_node", "-1\n")  # no affinity from the firmware
    (tmp_path / "bus/pci/devices/0000:81:00.0/current_link_speed").unlink()
    place = gpunode.read_place(gpus[2].bus_id, tmp_path)
    assert place.numa_node is None and place.link is None and place.missing == ("current_link_speed",)


def test_block_and_closest_agree_on_the_published_nps4_layout(tmp_path):
    checks, _ = gpurun.node_checks(pc2(tmp_path), tmp_path)
    pair = [c for c in checks if c.area == "pairing"]
    assert [c.severity for c in pair] == [OK] * 4
    assert "block puts local rank 2 on cpus 64-127; the GPU's nearest cpus are 112-127" in pair[2].claim


def test_block_and_closest_disagree_when_gpus_alternate_sockets(tmp_path):
    # The same node with its GPUs numbered socket 0, 1, 0, 1: block gives ranks 0,1 socket 0 and ranks 2,3 socket 1.
    gpus = pc2(tmp_path, [PC2[0], PC2[2], PC2[1], PC2[3]])
    checks, _ = gpurun.node_checks(gpus, tmp_path)
    pair = {c.gpu: c for c in checks if c.area == "pairing"}
    assert [pair[g].severity for g in "0123"] == [OK, WARNING, WARNING, OK]
    assert pair["1"].claim.endswith("they share none") and 'gpu_bind = "closest"' in pair["1"].fix


def test_a_gpu_without_numa_affinity_is_said_not_judged(tmp_path):
    node(tmp_path, {0: "0-7", 1: "8-15"}, {0: 0, 1: 1})
    pci(tmp_path, "0000:00:04.0", -1, "0-15")  # how a VM's sysfs shows a passed-through GPU
    checks, _ = gpurun.node_checks([GpuId(0, "NVIDIA H100 80GB HBM3", "00000000:00:04.0")], tmp_path)
    by = {c.area: c for c in checks}
    assert by["identity"].severity == INFO and "NUMA node unknown" in by["identity"].claim
    assert by["pairing"].severity == INFO and "no affinity" in by["pairing"].claim


def test_nvml_and_sysfs_disagreeing_on_the_numa_node_is_a_warning(tmp_path):
    gpus = pc2(tmp_path)
    said = GpuId(0, gpus[0].name, gpus[0].bus_id, nvml_numa=2)
    checks = gpu.identity(said, gpunode.read_place(said.bus_id, tmp_path))
    assert [c.severity for c in checks] == [OK, WARNING] and checks[1].claim == "sysfs says NUMA node 3, NVML 2"


def test_a_link_trained_down_is_a_warning_and_copies_are_judged_against_what_the_slot_can_do(tmp_path):
    gpus = pc2(tmp_path, speed="32.0 GT/s PCIe", width=8)
    check, peak = gpu.host_link(gpus[0], gpunode.read_place(gpus[0].bus_id, tmp_path))
    assert check.severity == WARNING and "PCIe 32.0 GT/s PCIe x8 (device max 32.0 GT/s PCIe x16)" in check.claim
    assert peak.gbps == 63.02 and peak.link == "PCIe 5.0 x16" and check.figure == pytest.approx(31.51)
    given = Measure(40.0, "GB/s", "given for the test")  # not a measurement
    h2d, d2h = gpu.copies(gpus[0], given, given, peak)
    assert h2d.severity == WARNING and h2d.share == pytest.approx(40 / 63.02)
    assert h2d.claim == "host -> device: 40 GB/s = 63% of 63.02 GB/s (PCIe 5.0 x16)"
    assert h2d.limit == "ok >= 70%, warn >= 50% of the PCIe link's peak (links.toml)"


def test_a_copy_faster_than_the_link_sysfs_shows_is_not_judged_against_it(tmp_path):
    gpus = pc2(tmp_path, speed="2.5 GT/s PCIe", width=1, max_width=1)  # what a VM's virtual root port may say
    check, peak = gpu.host_link(gpus[0], gpunode.read_place(gpus[0].bus_id, tmp_path))
    assert check.severity == OK and peak.link == "PCIe 1.0 x1"
    h2d, _ = gpu.copies(gpus[0], Measure(50.0, "GB/s", "given"), Measure(50.0, "GB/s", "given"), peak)
    assert h2d.severity == WARNING and h2d.claim.endswith("faster than the link sysfs shows, so sysfs does not show "
                                                          "the real link")


@pytest.mark.parametrize(("share", "severity"), [(0.70, OK), (0.6999, WARNING), (0.50, WARNING), (0.4999, ERROR)])
def test_judging_uses_the_limits_table_at_its_edges(share, severity):
    c = gpu.judge("h2d", "0", "x", share * 10, "GB/s", 10.0, "ref")
    assert c.severity == severity and c.share == pytest.approx(share)
    assert gpu.LIMITS["h2d"].ok == 0.70 and gpu.LIMITS["training"].ok == 0.98


def test_compute_and_memory_are_judged_against_the_datasheet_row_of_the_gpus_name():
    h100 = GpuId(0, "NVIDIA H100 80GB HBM3", "00000000:18:00.0")
    given = (Measure(750.0, "TFLOP/s", "given"), Measure(20.0, "TFLOP/s", "given"), Measure(3000.0, "GB/s", "given"))
    bf16, fp32, mem = gpu.device_figures(h100, *given)
    assert (bf16.severity, bf16.reference, fp32.severity, mem.severity) == (OK, 989.5, ERROR, OK)
    assert bf16.claim == "bf16 matmul: 750 TFLOP/s = 76% of 989.5 TFLOP/s (H100 SXM5 80GB datasheet)"
    assert bf16.source.startswith("https://") and fp32.fix.startswith("check clocks and power")
    h200 = gpu.device_figures(GpuId(0, "NVIDIA H200", "00000000:18:00.0"), *given)
    assert h200[1].severity == INFO and "no sourced fp32 figure" in h200[1].claim and h200[2].reference == 4800.0
    other = gpu.device_figures(GpuId(0, "NVIDIA GeForce RTX 4090", "00000000:01:00.0"), *given)
    assert {c.severity for c in other} == {INFO} and "no row for 'NVIDIA GeForce RTX 4090'" in other[0].claim


def test_every_datasheet_row_has_its_source_and_each_name_matches_one_row():
    doc = toml((REPO / "hpcbench/explain/gpus.toml").read_text(), "gpus.toml")
    assert doc["schema"] == "hpcbench.gpus/1"
    for row in doc["gpu"]:
        assert row["source"].startswith("https://") and row["quote"], row["name"]
        assert any(k in row for k in datasheet.FIGURES), row["name"]
        assert set(row) <= {"name", "match", "exclude", "devices", "source", "quote", "compute_source",
                            "compute_quote", "devices_source", "devices_quote", "note", *datasheet.FIGURES}
    names = {"NVIDIA H100 80GB HBM3": "H100 SXM5 80GB", "NVIDIA H100 PCIe": "H100 PCIe 80GB",
             "NVIDIA H200": "H200 SXM 141GB", "NVIDIA A100-SXM4-80GB": "A100 SXM4 80GB",
             "NVIDIA A100-SXM4-40GB": "A100 SXM4 40GB", "NVIDIA A100-PCIE-40GB": "A100 PCIe 40GB",
             "NVIDIA A100 80GB PCIe": "A100 PCIe 80GB", "NVIDIA L40S": "L40S 48GB",
             "AMD Instinct MI250X": "Instinct MI250X (per GCD)", "AMD Instinct MI300X": "Instinct MI300X"}
    for nvml, row in names.items():
        assert datasheet.lookup(nvml).name == row
        assert sum(any(m.upper() in nvml.upper() for m in r["match"]) and
                   not any(x.upper() in nvml.upper() for x in r.get("exclude", ())) for r in doc["gpu"]) == 1, nvml
    assert datasheet.lookup("AMD Instinct MI250X").memory == 1600.0  # one GCD: half the board
    assert datasheet.lookup("NVIDIA H200 NVL") is None


def test_nccl_bus_ids_decode_as_nccls_own_int64_to_bus_id():
    assert nccl_bus_id("1a000") == "0000:1a:00.0"
    assert nccl_bus_id("1d0") == "0000:00:1d.0"  # a VM's GPU on bus 0 (tests/data/logs/nccl_k8s-mpijob-..._92.log)
    assert nccl_bus_id("10001b000") == "1000:1b:00.0"


def test_the_nccl_log_of_one_ddp_rank_is_cross_checked_against_nvml():
    # ddp_82.log: a 1-rank torchrun job, NCCL 2.19.3, "cudaDev 0 nvmlDev 0 busId 30" (github.com/NVIDIA/nccl/issues/1267)
    log = LOGS / "ddp_82.log"
    right = [GpuId(0, "NVIDIA A100-SXM4-80GB", "00000000:00:03.0")]
    checks = gpu.nccl(log, right)
    assert [(c.severity, c.claim) for c in checks] == [
        (OK, "NCCL 2.19.3+cuda12.3"),
        (OK, "rank 0: NCCL names cudaDev 0 nvmlDev 0 busId 0000:00:03.0 = GPU 0 NVIDIA A100-SXM4-80GB, as NVML says")]
    assert checks[1].evidence == "ddp_82.log:11"
    # Its "Setting affinity for GPU 0 to ff,ffff0000,00ffffff" (cpus 0-23,48-71) against sysfs's local_cpulist:
    inside = gpunode.PciPlace("x", 0, frozenset(range(96)), None)
    outside = gpunode.PciPlace("x", 0, frozenset(range(24)), None)
    assert [(c.severity, c.claim, c.evidence) for c in gpu.nccl(log, right, places=[inside])[2:]] == [
        (OK, "NCCL pins GPU 0's threads to cpus 0-23,48-71, within its nearest cpus 0-95 (sysfs)", "ddp_82.log:12")]
    far = gpu.nccl(log, right, places=[outside])[2]
    assert far.severity == WARNING and far.claim.endswith("outside its nearest cpus 0-23 (sysfs)")
    wrong = [GpuId(0, "NVIDIA A100-SXM4-80GB", "00000000:00:04.0"), GpuId(1, right[0].name, right[0].bus_id)]
    bad = gpu.nccl(log, wrong)[1]
    assert bad.severity == ERROR and "the rank used GPU 0 at 0000:00:04.0 per NVML (that bus is GPU 1)" in bad.claim
    assert "CUDA_DEVICE_ORDER=PCI_BUS_ID" in bad.fix


def test_a_log_without_version_with_a_warn_says_both():
    # nccl_timestampprefix-newest_28.log (github.com/deepspeedai/DeepSpeed/issues/8248): a WARN, busId 1000, no version
    checks = gpu.nccl(LOGS / "nccl_timestampprefix-newest_28.log", [GpuId(0, "NVIDIA H100 80GB HBM3", "00000000:01:00.0")])
    assert [c.severity for c in checks] == [WARNING, WARNING, OK]
    assert checks[0].claim.startswith("no 'NCCL version' line") and checks[1].claim == "NCCL WARN x1: lib wrapper not initialized."
    assert named_gpus(["no init line here"]) == []


def test_timing_arithmetic_with_a_given_clock():
    ticks = iter(range(100))
    seconds = gpumeasure.timed(lambda: None, lambda: None, reps=3, inner=4, clock=lambda: 2.0 * next(ticks))
    assert seconds == [0.5, 0.5, 0.5]  # each repetition: 2 s of the clock over 4 calls
    m = gpumeasure.rate(1e9, seconds, 1e9, "GB/s", "x")
    assert (m.figure, m.unit, m.how) == (2.0, "GB/s", "x; median of 3 timings")


def test_copy_and_matmul_count_bytes_and_flops_on_cpu_tensors():
    import torch

    src, dst = torch.ones(1 << 20, dtype=torch.uint8), torch.zeros(1 << 20, dtype=torch.uint8)
    ticks = iter(range(100))
    m = gpumeasure.copy(dst, src, lambda: None, "cpu copy", both=True, reps=2, inner=1, clock=lambda: next(ticks) * 1e-3)
    assert bool((dst == 1).all()) and m.figure == pytest.approx(2 * 2 ** 20 / 1e-3 / 1e9) and "1 MiB per copy" in m.how
    ticks = iter(range(100))
    mm = gpumeasure.matmul(64, torch.float32, "cpu", lambda: None, reps=2, inner=1, clock=lambda: float(next(ticks)))
    assert mm.figure == pytest.approx(2 * 64 ** 3 / 1e12) and mm.how.startswith("64x64x64 float32 torch.mm")


def _report(tmp_path) -> gpurun.Report:
    gpus = pc2(tmp_path, speed="16.0 GT/s PCIe")[:2]
    checks, places = gpurun.node_checks(gpus, tmp_path)
    given = Measure(24.0, "GB/s", "given for the test")
    for g in gpus:
        checks += gpu.copies(g, given, given, gpu.host_link(g, places[g.index])[1])
        checks += gpu.device_figures(g, Measure(250.0, "TFLOP/s", "given"), Measure(9.0, "TFLOP/s", "given"),
                                     Measure(1400.0, "GB/s", "given"))
    link = gpunode.PeerLink(0, 1, True, "SYSTEM", True)
    checks.append(gpu.peers(gpus, link, Measure(180.0, "GB/s", "given"), places))
    checks += gpu.nccl(LOGS / "ddp_82.log", gpus)
    return gpurun.Report("fixture", gpus, gpurun._ordered(checks))


def test_text_and_json_say_the_same(tmp_path):
    report = _report(tmp_path)
    text = gpurun.format_text(report)
    doc = json.loads(json.dumps(report.to_dict()))
    print(text)
    assert doc["schema"] == "hpcbench.doctor-gpu/1" and len(doc["checks"]) == len(report.checks)
    lines = [ln for ln in text.splitlines()[1:-1] if not ln.startswith(" ")]
    assert len(lines) == len(doc["checks"])
    for line, c in zip(lines, doc["checks"]):
        assert re.match(rf"{gpu.LABEL[c['severity']]} +(GPU {c['gpu']}|node) {c['area']}: ", line), line
        assert c["claim"] in line and (c["limit"] in line if c["share"] is not None else True)
    assert "ok    GPU 0 h2d: host -> device: 24 GB/s = 76% of 31.51 GB/s (PCIe 4.0 x16)" in text
    assert "fail  GPU 0 fp32: fp32 matmul: 9 TFLOP/s = 46% of 19.5 TFLOP/s" not in text  # 46% is a warning
    assert "warn  GPU 0 fp32: fp32 matmul: 9 TFLOP/s = 46% of 19.5 TFLOP/s (A100 SXM4 40GB datasheet)" in text
    assert "ok    GPU 0-1 p2p: GPU 0-1 copy (NVLink yes, NVML topology SYSTEM, CUDA P2P yes): 180 GB/s = 60% of 300 GB/s" in text
    assert text.splitlines()[-1] == "{ok} ok, {warn} warn, {fail} fail, {info} info".format(**doc["summary"])
    assert not report.failed


def test_without_a_gpu_doctor_says_so_in_one_line_and_exits_2(cli):
    for fmt in ("text", "json"):
        proc = cli("doctor", "--gpu", "--format", fmt)
        assert proc.returncode == 2 and proc.stdout == ""
        assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("error: doctor --gpu: no GPU here: ")


@pytest.mark.torch
def test_training_comparison_runs_both_loops_and_keeps_the_log(tmp_path):
    # On the CPU over Gloo: this proves the two processes, the record read and the log, not a GPU's ratio.
    t = gpumeasure.training(tmp_path, device="cpu", backend="gloo", model="mlp", batch=8, steps=3, warmup=1,
                            pairs=1, threads=1)
    assert len(t.harness) == len(t.bare) == 1 and t.ratio > 0
    assert "hpcbench: doctor:" in t.log.read_text() and (tmp_path / "point-1/result.json").exists()
    c = gpu.training(t)
    assert c.area == "training" and c.share == pytest.approx(t.ratio) and c.limit.startswith("ok >= 98%")
    assert links.pcie({"speed": "16.0 GT/s PCIe", "width": 16}).gbps == 31.51


def test_cpu_lists_are_written_back_as_sysfs_writes_them():
    from hpcbench.workloads.affinity import format_cpulist, parse_cpulist

    for text in ("0-3,8,10-11", "5", "0-127", ""):
        assert format_cpulist(parse_cpulist(text)) == text


@pytest.mark.torch
def test_the_whole_run_in_order_with_the_gpu_answers_given_as_data(tmp_path, monkeypatch):
    # Only what needs a GPU is given (NVML's list and the figures of the copies and products); the sysfs tree,
    # the judging, the order, a measurement that breaks, and the training comparison (on the CPU, over Gloo)
    # run for real.
    gpus = pc2(tmp_path / "sys")[:1]
    real_training = gpumeasure.training
    monkeypatch.setattr(gpunode, "nvml_gpus", lambda: gpus)
    monkeypatch.setattr(gpumeasure, "host_links", lambda i: (Measure(25.0, "GB/s", "given"),) * 2)

    def broken(i):
        raise RuntimeError("CUDA out of memory. Tried to allocate 1.00 GiB")
    monkeypatch.setattr(gpumeasure, "compute", broken)
    monkeypatch.setattr(gpumeasure, "device_memory", lambda i: Measure(1500.0, "GB/s", "given"))
    monkeypatch.setattr(gpumeasure, "training", lambda where: real_training(
        where, device="cpu", backend="gloo", model="mlp", batch=8, steps=3, warmup=1, pairs=1, threads=1))
    report = gpurun.run(tmp_path / "sys", workdir=tmp_path / "keep")
    got = [(c.gpu, c.area, c.severity) for c in report.checks]
    # The products broke: a failed line; device memory (given) is still judged.
    assert got[:7] == [("0", "identity", OK), ("0", "pairing", OK), ("0", "pcie", OK), ("0", "h2d", OK),
                       ("0", "d2h", OK), ("0", "bf16", ERROR), ("0", "memory", OK)]
    assert got[7][:2] == ("0", "training") and got[8:] == [(None, "nccl", WARNING), (None, "nccl", WARNING)]
    assert report.checks[5].claim == "bf16 could not be measured: RuntimeError: CUDA out of memory. Tried to allocate 1.00 GiB"
    assert report.checks[5].evidence.endswith("test_doctor_gpu.py:" + str(broken.__code__.co_firstlineno + 1))
    assert report.failed and report.seconds is not None and (tmp_path / "keep/train-1.log").exists()
    # Gloo on the CPU prints no NCCL line: said as such, not hidden.
    assert report.checks[-1].claim == "NCCL named no GPU: no init line with 'busId'"


def test_the_gpu_check_sweep_plans_and_its_cpu_twin_changes_every_line_it_means_to(tmp_path, cli):
    proc = cli("plan", str(REPO / "sweeps/gpu_check.toml"), "--run-dir", str(tmp_path / "run"))
    assert proc.returncode == 0, proc.stderr
    assert re.search(r"nccl\s+resnet50\s+64\s+1\s+1\s+1", proc.stdout), proc.stdout
    script = (REPO / "scripts/gpu_check.sh").read_text()
    toml_lines = (REPO / "sweeps/gpu_check.toml").read_text().splitlines()
    seds = re.findall(r"-e 's/\^(.+?)/(.+?)/'", script)
    assert len(seds) == 6
    for pattern, _ in seds:  # every edit of the dry run's CPU twin finds its line: the twin cannot drift silently
        assert sum(bool(re.match(pattern.replace("\\[", r"\[").replace("\\]", r"\]"), ln)) for ln in toml_lines) == 1, pattern
