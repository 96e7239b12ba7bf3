"""hpcbench explain: every rule fires on real evidence and stays silent where the evidence says otherwise.

Transport rules read real public logs (tests/data/logs, sources in SOURCES.tsv); the rules about
ranks read provenance and records of hpcbench's own format, constructed with known values.
"""
from __future__ import annotations

import json
import math
from dataclasses import replace

import pytest
from conftest import DATA
from report_helpers import make_run, point, record

from hpcbench.explain import links, model
from hpcbench.files import atomic_write_json
from hpcbench.records import AllreduceRow, RankInfo
from hpcbench.report.summarize import make_report

LOGS = DATA / "logs"


def rules_of(*paths, **kw) -> dict[str, dict[str, object]]:
    """point label -> {rule: finding} for the points of ``paths``."""
    rep = make_report([str(p) for p in paths], **kw)
    return {w.label: {f.rule: f for f in w.findings} for w in rep.why}


def test_socket_while_ib_is_visible_is_an_error_with_its_line(tmp_path):
    # A real many-node Socket log: alone, nothing says an IB device was there, so nothing is claimed ...
    log = LOGS / "nccl_socket-ring-manynodes_15.log"
    found = rules_of(log)[log.name]
    assert "socket-with-ib" not in found and found["network"].claim.startswith("15 hosts (host names ")
    assert found["network"].claim.endswith("; network Socket, from the NET/ transport lines (no IB device seen)")
    # ... as the job log of a point whose ranks' provenance lists an active InfiniBand HCA, it is an error
    p = point(nodes=2, rpn=8, device="cuda", backend="nccl")
    rd = make_run(tmp_path / "run", [(p, record(p, 100.0, comm_fraction=0.4))])
    (rd.point(p).dir / "job-1000.out").write_text(log.read_text())
    hca = {"name": "mlx5_0", "ports": [{"port": 1, "state": "4: ACTIVE", "rate": "200 Gb/sec (4X HDR)",
                                        "link_layer": "InfiniBand"}]}
    atomic_write_json(rd.point(p).dir / "provenance-rank0.json", {"schema": "hpcbench.provenance/1", "rank": 0,
                                                                  "hostname": "h1", "infiniband": {"devices": [hca]}})
    err = rules_of(rd.root)[p.label]["socket-with-ib"]
    assert err.severity == "error" and "while an InfiniBand device is visible in the provenance of h1 (mlx5_0)" in err.claim
    assert "job-1000.out:" in err.evidence and "via NET/Socket" in err.evidence  # the file:line that shows it
    assert err.cost == 0.4 and "communication is 40% of the step" in err.effect
    ib = rules_of(LOGS / "nccl_ibring_02.log")["nccl_ibring_02.log"]
    assert "socket-with-ib" not in ib and "ib-without-gdrdma" in ib  # IB used, without GPUDirect RDMA
    assert ib["ib-without-gdrdma"].evidence.startswith("nccl_ibring_02.log:")  # file:line of a 'via NET/IB' line
    gdr = rules_of(LOGS / "nccl_gdrdma-mpiprefix_04.log")["nccl_gdrdma-mpiprefix_04.log"]
    assert "ib-without-gdrdma" not in gdr


def test_shm_where_p2p_was_expected(tmp_path):
    shm = rules_of(LOGS / "nccl_shm-socket-mixedchanfmt_32.log")["nccl_shm-socket-mixedchanfmt_32.log"]
    assert "shm-not-p2p" in shm and ":1: " in shm["shm-not-p2p"].evidence and "via SHM" in shm["shm-not-p2p"].evidence
    p2p = rules_of(LOGS / "nccl_p2pipcread-busid-hexhost_19.log")["nccl_p2pipcread-busid-hexhost_19.log"]
    assert "shm-not-p2p" not in p2p


def test_nvls_available_but_unused(tmp_path):
    # this excerpt ends before NCCL sets its channels up: that NVLS was not used is not shown, so not said
    cut = rules_of(LOGS / "nccl_noprefix-sharp-224_26.log")["nccl_noprefix-sharp-224_26.log"]
    assert "nvls-unused" not in cut
    # the same init, gone on to its channel count with no NVLS channel (the line of a real 2-GPU init)
    text = (LOGS / "nccl_noprefix-sharp-224_26.log").read_text()
    done = [ln for ln in (LOGS / "nccl_collnetchannels-initall-proxy_94.log").read_text().splitlines()
            if "0 nvls channels" in ln][0]
    whole = tmp_path / "whole.log"
    whole.write_text(text + done + "\n")
    found = rules_of(whole)["whole.log"]
    assert "nvls-unused" in found and "NVLS multicast support is available" in found["nvls-unused"].evidence
    absent = rules_of(LOGS / "nccl_cloudwatch-tsline-nvlsno_25.log")["nccl_cloudwatch-tsline-nvlsno_25.log"]
    assert "nvls-unused" not in absent  # that log says NVLS is NOT available


def test_nccl_variables_that_switch_a_transport_off(tmp_path):
    base = LOGS / "nccl_nvls0chan-algoenv-hexhost_44.log"  # sets NCCL_ALGO only: not a transport switch
    assert "nccl-env" not in rules_of(base)[base.name]
    # the same real log, with NCCL_P2P_DISABLE=1 in the ranks' environment (provenance) instead of the log
    p = point(rpn=2, device="cuda", backend="nccl")
    rd = make_run(tmp_path / "run", [(p, record(p, 100.0))])
    (rd.point(p).dir / "job-1000.out").write_text(base.read_text())
    atomic_write_json(rd.point(p).dir / "provenance-rank0.json",
                      {"schema": "hpcbench.provenance/1", "rank": 0, "hostname": "h1", "env": {"NCCL_P2P_DISABLE": "1"}})
    found = rules_of(rd.root)[p.label]["nccl-env"]
    assert found.claim.startswith("NCCL_P2P_DISABLE=1 is set") and found.evidence == "provenance-rank0.json env.NCCL_P2P_DISABLE"


def _prov(rank, host, cpus, requested=None, matches=None, detail="", local_rank=None):
    return {"schema": "hpcbench.provenance/1", "rank": rank, "local_rank": rank if local_rank is None else local_rank,
            "hostname": host, "slurm_node": host,
            "affinity": {"cpus": cpus, "requested": requested, "matches": matches, "detail": detail}}


def _run_with(tmp_path, provs, nodes=1, rpn=2, **rec_kw):
    p = point(nodes=nodes, rpn=rpn)
    rd = make_run(tmp_path / "run", [(p, record(p, 100.0, **rec_kw))])
    for d in provs:
        atomic_write_json(rd.point(p).dir / f"provenance-rank{d['rank']}.json", d)
    return rules_of(rd.root)[p.label]


def test_binding_as_asked_and_shared_cores(tmp_path):
    bad = _run_with(tmp_path / "a", [_prov(0, "h1", [0, 1], "slurm mask_cpu:0x1", False, "requested cpus 0, in effect 0,1"),
                                     _prov(1, "h1", [2, 3], "slurm mask_cpu:0x4", True)])
    assert "binding" in bad and "requested cpus 0, in effect 0,1" in bad["binding"].claim
    assert "shared-cores" not in bad
    unbound = _run_with(tmp_path / "b", [_prov(0, "h1", [0, 1, 2, 3]), _prov(1, "h1", [0, 1, 2, 3])])
    assert "2 ranks on h1 are not bound" in unbound["shared-cores"].claim and "binding" not in unbound
    good = _run_with(tmp_path / "c", [_prov(0, "h1", [0, 1], "slurm sockets", True), _prov(1, "h1", [2, 3], "slurm sockets", True)])
    assert "binding" not in good and "shared-cores" not in good


def test_nccl_affinity_against_the_ranks_mask(tmp_path):
    # real lines: "algo-1 ... Setting affinity for GPU 6 to ffffff00,0000ffff,ff000000" (CPUs 0-23 and 40-63 of 64...)
    log = LOGS / "nccl_cloudwatch-tsline-nvlsno_25.log"
    p = point(rpn=8, device="cuda", backend="nccl")
    rd = make_run(tmp_path / "run", [(p, record(p, 100.0))])
    (rd.point(p).dir / "job-1000.out").write_text(log.read_text())
    # the mask is CPUs 24-47 and 72-95 (three 32-bit words, most significant first); the rank runs on 0-2
    atomic_write_json(rd.point(p).dir / "provenance-rank6.json", _prov(6, "algo-1", [0, 1, 2], local_rank=6))
    found = rules_of(rd.root)[p.label]
    assert "nccl-affinity" in found and "GPU 6 on algo-1" in found["nccl-affinity"].claim
    assert "Setting affinity for GPU 6" in found["nccl-affinity"].evidence
    atomic_write_json(rd.point(p).dir / "provenance-rank6.json", _prov(6, "algo-1", [24, 25, 26], local_rank=6))
    assert "nccl-affinity" not in rules_of(rd.root)[p.label]


def test_one_host_posing_as_two_nodes(tmp_path):
    p = point(nodes=2, rpn=1)
    one = replace(record(p, 90.0), ranks=[RankInfo(r, 0, "vm", f"node{r + 1}", r, [0]) for r in range(2)])
    rd = make_run(tmp_path / "one", [(p, one)])
    assert "ran on 1 host (vm)" in rules_of(rd.root)[p.label]["one-host"].claim
    rd = make_run(tmp_path / "two", [(p, record(p, 90.0))])  # one host per node
    assert "one-host" not in rules_of(rd.root)[p.label]


def _timed(p, step, spread, n=10, **kw):
    times = [step - spread, step + spread] * (n // 2)
    return record(p, p.batch_size * p.world_size / step, step_times_s=times, mean_step_time_s=step, **kw)


def test_noise_rules(tmp_path):
    a, b = point(), point(rpn=2)
    # 2 ranks at 0.19 s/step against 1 at 0.10: speedup 1.05, and the intervals [256, 427] and [267, 400] overlap
    rd = make_run(tmp_path / "run", [(a, _timed(a, 0.10, 0.03, step_time_ci95_s=0.02)),
                                     (b, _timed(b, 0.19, 0.03, step_time_ci95_s=0.04))])
    found = rules_of(rd.root)
    cv = 0.03 * math.sqrt(10 / 9) / 0.10  # sample sd of ten steps at 0.10 +- 0.03, over the mean
    assert "noisy-steps" in found[a.label] and f"{cv:.0%}" in found[a.label]["noisy-steps"].claim
    assert "few-repeats" in found[a.label]
    assert "within-noise" in found[b.label] and "speedup 1.05" in found[b.label]["within-noise"].claim
    quiet = make_run(tmp_path / "quiet", [(a, _timed(a, 0.10, 0.001, step_time_ci95_s=0.0005)),
                                          (b, _timed(b, 0.06, 0.001, step_time_ci95_s=0.0005))])
    assert not {"noisy-steps", "within-noise"} & set(rules_of(quiet.root)[b.label])


def test_communication_share_and_its_noise(tmp_path):
    p = point(rpn=2)
    heavy = make_run(tmp_path / "heavy", [(p, record(p, 100.0, comm_time_s=0.2, compute_time_s=0.44,
                                                     compute_time_ci95_s=0.01, comm_fraction=0.3125, comm_method="m",
                                                     step_time_ci95_s=0.01))])
    f = rules_of(heavy.root)[p.label]["comm-share"]
    assert f.severity == "warning" and f.cost == pytest.approx(0.3125) and "31%" in f.claim
    noisy = make_run(tmp_path / "noisy", [(p, record(p, 100.0, comm_time_s=0.2, compute_time_s=0.44,
                                                     compute_time_ci95_s=0.3, comm_fraction=0.3125, comm_method="m",
                                                     step_time_ci95_s=0.1))])
    assert "within noise" in rules_of(noisy.root)[p.label]["comm-share"].claim
    # 31% of the step, but its interval (19%-44%) reaches below the 25% bound: said, not claimed as a cause
    wide = make_run(tmp_path / "wide", [(p, record(p, 100.0, comm_time_s=0.2, compute_time_s=0.44,
                                                   compute_time_ci95_s=0.055, comm_fraction=0.3125, comm_method="m",
                                                   step_time_ci95_s=0.055))])
    f = rules_of(wide.root)[p.label]["comm-share"]
    assert f.severity == "info" and "reaches below 25%" in f.claim and "within noise" not in f.claim, f.claim


def test_the_alpha_beta_fit_and_prediction_by_hand():
    curve = {s: 50.0 + s / 1e9 * 1e6 for s in (1 << 10, 1 << 16, 1 << 20, 1 << 24)}  # 50 us + 1 GB/s
    fit = model.fit(curve, "by hand")
    assert fit.alpha_s == pytest.approx(50e-6) and 1 / fit.beta_s_per_byte == pytest.approx(1e9)
    assert model.buckets(30 << 20, "ddp") == [1 << 20, 25 << 20, 4 << 20]
    assert model.buckets(200 << 20, "horovod") == [128 << 20, 72 << 20]
    pred = model.predict(0.1, 10 << 20 >> 2, "ddp", fit)  # 10 MiB of gradients: buckets of 1 and 9 MiB
    comm = 2 * 50e-6 + (10 << 20) / 1e9
    last = 50e-6 + (9 << 20) / 1e9
    assert pred.comm_s == pytest.approx(comm) and pred.exposed_s == pytest.approx(last)  # the rest hides in backward


def test_model_against_the_runs_allreduce_point(tmp_path):
    ar = point(kind="collective", nodes=1, rpn=2)
    one, two = point(model="mlp"), point(model="mlp", rpn=2)
    rows = [AllreduceRow(size_bytes=s, count=s // 4, dtype="float32", time_us=100.0 + s / 1e9 * 1e6, algbw_gbps=0,
                         busbw_gbps=0, wrong=0) for s in (1 << 10, 1 << 20, 1 << 24)]
    rd = make_run(tmp_path / "run", [(ar, record(ar, 1.0, kind="collective", allreduce=rows)),
                                     (one, _timed(one, 0.010, 0.0001, compute_time_s=0.010)),
                                     (two, _timed(two, 0.030, 0.0001, compute_time_s=0.010, comm_time_s=0.02,
                                                  comm_fraction=0.66, comm_method="m"))])
    found = rules_of(rd.root)[two.label]
    gap = found["model-gap"]  # the model: 10 ms + ~0.5 ms exposed, measured 30 ms: 20 points unexplained and more
    assert gap.severity == "warning" and "measured efficiency 33%, model 9" in gap.claim
    assert "comm-share" in gap.claim or "see" in gap.claim
    assert "MiB of float32 gradients" in gap.evidence and "the run's allreduce point" in gap.evidence


def test_link_peaks_from_the_table():
    ndr = links.ib("400 Gb/sec (4X NDR)")
    assert ndr.gbps == 50.0 and ndr.practical == 46.0 and "nccl-tests/issues/290" in ndr.source
    assert links.ib("400 Gb/sec (4X NDR)", ports=4, gpus=8).gbps == 25.0  # 4 NICs shared by 8 GPUs
    assert links.ethernet(100000).gbps == 12.5
    h100 = links.nvlink("NVIDIA H100 80GB HBM3")
    assert (h100.gbps, h100.practical) == (450.0, 370.0)
    assert links.nvlink("NVIDIA H100 80GB HBM3", nvls=True).practical == 480.0
    assert links.nvlink("NVIDIA A100-PCIE-40GB") is None  # PCIe A100 has no NVLink
    peak, why = links.between_hosts("IB", [], 8)
    assert peak is None and "no provenance" in why  # never a guessed rate


def test_busbw_against_the_peak_in_the_report(tmp_path):
    ar = point(kind="collective", nodes=2, rpn=1)
    rows = [AllreduceRow(size_bytes=1 << 30, count=1 << 28, dtype="float32", time_us=1e5, algbw_gbps=10.0,
                         busbw_gbps=10.0, wrong=0)]
    rd = make_run(tmp_path / "run", [(ar, record(ar, 10.0, kind="collective", allreduce=rows))])
    nic = {"name": "ens1", "kind": "ethernet", "model": "mlx5_core", "speed": 100000, "state": "up"}
    for r, host in ((0, "h1"), (1, "h2")):
        atomic_write_json(rd.point(ar).dir / f"provenance-rank{r}.json",
                          {"schema": "hpcbench.provenance/1", "rank": r, "hostname": host, "nics": [nic]})
    rep = make_report([rd.root])
    t = next(t for t in rep.tables if t.key == "allreduce")
    assert t.rows[-1][1] == "80% of 12.5 GB/s"  # 10 GB/s busbw on a 100 Gb/s NIC
    assert any("Ethernet 100 Gb/s (ens1)" in n for n in t.notes)
    from hpcbench.report import plots

    ax = plots.allreduce_bw(rep.aggs, rep.peaks()).axes[0]  # the plot: a dashed line at the peak, the share
    peak_lines = [ln for ln in ax.get_lines() if ln.get_linestyle() == "--"]
    assert [list(ln.get_ydata()) for ln in peak_lines] == [[12.5, 12.5]]
    assert peak_lines[0].get_label().startswith("peak 12.5 GB/s: Ethernet 100 Gb/s")
    shares = [ln.get_label() for ln in ax.get_lines() if "of peak" in ln.get_label()]
    assert len(shares) == 1 and shares[0].endswith(": 80% of peak at 1 GiB"), shares
    bare = plots.allreduce_bw(rep.aggs).axes[0]  # no peak known: no line, no share
    assert all(ln.get_linestyle() != "--" and "of peak" not in ln.get_label() for ln in bare.get_lines())


def test_explain_cli_formats_and_exit_code(cli, tmp_path):
    logs = [str(LOGS / "nccl_shm-socket-mixedchanfmt_32.log"), str(LOGS / "nccl_trainer-role-prefix-ifname_72.log")]
    table = cli("explain", *logs)
    assert table.returncode == 1  # the trainer log failed with ncclInternalError: an error-level finding
    assert "shm-not-p2p" in table.stdout and "crash" in table.stdout
    header = cli("explain", str(LOGS / "nccltests_11.log"))  # a header without rows is an excerpt, not a failure
    assert header.returncode == 0 and "no-rows" in header.stdout and "no-result" not in header.stdout
    doc = json.loads(cli("explain", *logs, "--format", "json").stdout)
    assert {d["point"] for d in doc["points"]} == {"nccl_shm-socket-mixedchanfmt_32.log",
                                                   "nccl_trainer-role-prefix-ifname_72.log"}
    assert doc["schema"] == "hpcbench.explain/2" and doc["run"]["causes"][0]["severity"] == "error"  # errors first
    md = cli("explain", logs[0], "--format", "markdown")
    assert md.returncode == 0 and md.stdout.startswith("**1 cause explains this run** (1 points):")
    assert "\n- **nccl_shm-socket-mixedchanfmt_32.log**" in md.stdout
    bad = cli("explain", logs[0], "--allreduce", str(tmp_path / "nope.log"))
    assert bad.returncode == 2 and "no such allreduce log" in bad.stderr
    one = cli("explain", logs[0], "--allreduce", str(LOGS / "nccltests_3.log"))  # a single 10 GiB row
    assert one.returncode == 2 and one.stderr.count("\n") == 1 and "1 message size(s)" in one.stderr


def test_pcie_peak_from_sysfs(tmp_path):
    # a sysfs tree in the kernel's format: a GPU that trained to x8 of an x16 Gen4 slot
    from hpcbench.workloads.provenance import pcie_link

    dev = tmp_path / "bus/pci/devices/0000:3b:00.0"
    dev.mkdir(parents=True)
    for name, text in (("current_link_speed", "16.0 GT/s PCIe"), ("current_link_width", "8"),
                       ("max_link_speed", "16.0 GT/s PCIe"), ("max_link_width", "16")):
        (dev / name).write_text(text + "\n")
    link = pcie_link("00000000:3B:00.0", tmp_path)
    assert link == {"speed": "16.0 GT/s PCIe", "width": 8, "max_speed": "16.0 GT/s PCIe", "max_width": 16}
    peak = links.pcie(link)
    assert peak.gbps == pytest.approx(31.51 / 2) and peak.link == "PCIe 4.0 x8 (trained down from x16)"
    assert pcie_link("00000000:AF:00.0", tmp_path) is None  # no such device: nothing, not a guess
    prov = [{"gpus": [{"name": "NVIDIA GeForce RTX 4090", "pcie": link}]}]
    got, why = links.within_host({"NVIDIA GeForce RTX 4090"}, False, {"P2P/CUMEM"}, prov)
    assert got.gbps == pytest.approx(15.755) and "RTX 4090, PCIe from sysfs" in got.link and not why
    none, why = links.within_host({"NVIDIA GeForce RTX 4090"}, False, {"P2P/CUMEM"}, [])
    assert none.gbps == pytest.approx(31.51) and "PCIe 4.0 x16" in none.link  # without sysfs: the x16 it is built for
    unknown, why = links.within_host({"NVIDIA GeForce GT 710"}, False, {"P2P/CUMEM"}, [])
    assert unknown is None and "no provenance gives its PCIe link" in why
    # NVLink wins over PCIe where the GPU has it
    h100 = [{"gpus": [{"name": "NVIDIA H100 80GB HBM3", "pcie": {"speed": "32.0 GT/s PCIe", "width": 16}}]}]
    assert links.within_host({"NVIDIA H100 80GB HBM3"}, False, {"P2P/CUMEM"}, h100)[0].gbps == 450.0


@pytest.mark.torch  # collect() probes torch's backends
def test_binding_mismatch_of_a_real_process(tmp_path):
    """A rank told by Slurm it is bound to CPUs 0-1 (mask 0x3), run under `taskset -c 0` as a wrapper
    script would: its real affinity is CPU 0 alone, and explain says so from its real provenance."""
    import os
    import subprocess
    import sys

    if len(os.sched_getaffinity(0)) < 2:
        pytest.fail("this test needs 2 CPUs: it binds a process to one of them")
    env = {**os.environ, "SLURM_CPU_BIND_TYPE": "mask_cpu:", "SLURM_CPU_BIND_LIST": "0x3"}
    code = "import json, sys; from hpcbench.workloads.provenance import collect; json.dump(collect(0, 0), sys.stdout)"
    ran = subprocess.run(["taskset", "-c", "0", sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, check=False, timeout=300)
    assert ran.returncode == 0, ran.stderr
    doc = json.loads(ran.stdout)
    assert doc["affinity"]["cpus"] == [0] and doc["affinity"]["matches"] is False
    found = _run_with(tmp_path, [doc, {**doc, "rank": 1, "local_rank": 1,
                                       "affinity": {**doc["affinity"], "cpus": [1], "matches": True}}])
    assert found["binding"].claim == "1 rank(s) are not bound as asked: requested slurm mask_cpu:0x3 means cpus " \
                                     "[0,1], but cpus [0] are in effect"
    assert found["binding"].evidence == "provenance-rank0.json affinity" and "taskset" in found["binding"].fix


def test_load_before_the_steps_and_gpu_numa_pairing(tmp_path):
    from hpcbench.records import NodeLoad

    def found(tag, **kw):
        p = point(nodes=2, rpn=1, device=kw.pop("device", "cpu"))
        rd = make_run(tmp_path / tag, [(p, record(p, 100.0, **kw))])
        return rules_of(rd.root)[p.label]

    # two Slurm nodes on one 8-CPU host, one rank each; a 1-minute load of 9.5 before the steps: 7.5 is not ours
    busy = [NodeLoad("h1", n, 8, [9.5, 6.0, 3.0], [9.8, 6.2, 3.1], 4, 1, 1) for n in ("n1", "n2")]
    load = found("busy", node_load=busy)["load"]
    assert load.severity == "warning" and load.claim == "host h1 was busy: 1-minute load 9.5 on 8 CPUs when the " \
        "steps started, 9.8 after them, of which this point's ranks account for at most 2: something ran beside it"
    # high before the steps only: the lagging average of the job before, said as such
    lagging = [NodeLoad("h1", n, 8, [9.5, 6.0, 3.0], [4.0, 5.0, 3.0], 4, 1, 1) for n in ("n1", "n2")]
    assert found("lagging", node_load=lagging)["load"].severity == "info"
    assert "load" not in found("own", node_load=[NodeLoad("h1", n, 2, [2.2, 1.0, 0.5], None, 2, 1, 1)
                                                 for n in ("n1", "n2")])  # only its own two ranks
    assert "oversubscribed" not in found("fits", node_load=busy)
    # the minicluster: two nodes of one kernel, each in a 1-CPU cpuset of a 2-CPU host; the load average is the
    # kernel's and counts both nodes' ranks: 2.6 is theirs and 0.6 more, no 'load' (per node, 1.6 over 1 CPU was)
    def kernel(before: float) -> list[NodeLoad]:
        return [NodeLoad(n, n, 1, [before, 1.0, 0.5], [before, 1.0, 0.5], 1, 1, 1, kernel="boot-1", kernel_cpus=2)
                for n in ("node1", "node2")]
    assert "load" not in found("kernel", node_load=kernel(2.6))
    shared = found("kernel-busy", node_load=kernel(4.5))["load"]
    assert shared.claim.startswith("host node1+node2 was busy: 1-minute load 4.5 on 2 CPUs"), shared.claim
    # no per-node CPU count: said of a training point (an older record); a communication point never has one
    assert found("old")["oversubscribed"].severity == "info"
    ar = point(kind="collective", nodes=2, rpn=1)
    comm = make_run(tmp_path / "ar", [(ar, record(ar, 1.0, kind="collective"))])
    assert "oversubscribed" not in rules_of(comm.root)[ar.label]
    # a Horovod-MPI rank keeps its background thread runnable too (it spins in MPI): 3.0 on the two CPUs of its two
    # ranks is their own; Horovod-Gloo's thread sleeps
    assert "load" in found("ddp-3", node_load=kernel(3.0))
    assert "load" in found("hvd-gloo-3", node_load=kernel(3.0), framework="horovod", backend="gloo")
    assert "load" not in found("hvd-3", node_load=kernel(3.0), framework="horovod", backend="mpi")
    assert "at most 4 (with 1 background thread per rank)" in found("hvd-6", node_load=kernel(6.0),
                                                                    framework="horovod", backend="mpi")["load"].claim
    far = "rank 1: GPU 1 (0000:3b:00.0) is on NUMA node 0, the rank's CPUs [32] on NUMA node(s) [1]: " \
          "its data crosses the socket link"
    numa = found("far", device="cuda", gpu_numa_ok=False, gpu_numa_detail=far)["gpu-numa"]
    assert numa.severity == "warning" and far in numa.claim and "gpu_bind" in numa.fix
    assert "gpu-numa" not in found("near", device="cuda", gpu_numa_ok=True, gpu_numa_detail="2/2 ranks ...")
    assert "gpu-numa" not in found("cpu", gpu_numa_ok=None, gpu_numa_detail="device is cpu")
    unknown = found("unknown", device="cuda", gpu_numa_ok=None, gpu_numa_detail="GPU 0: NUMA node unknown")
    assert unknown["gpu-numa"].severity == "info" and "not known: GPU 0: NUMA node unknown" in unknown["gpu-numa"].claim


def test_real_logs_roce_apart_from_ib_and_ib_disabled():
    roce = "nccl_roce-i40iw-netib-nogdr_68.log"  # NET/IB transport lines, over RoCE ports
    found = rules_of(LOGS / roce)[roce]
    assert found["network"].claim == ("several hosts (network edges between ranks); network RoCE, selected "
                                      "(mlx5_0, mlx5_1, ...); GPUDirect RDMA on 0/3 network edges")
    assert "ib-without-gdrdma" in found and "/RoCE" in found["network"].evidence
    ib = "nccl_old23-ib_06.log"  # InfiniBand link layer: not called RoCE, and no "IB over IB"
    assert rules_of(LOGS / ib)[ib]["network"].claim == "3 hosts (host names c1833-89, o5806-06, s8494-16); network IB, selected (mlx5_0, ib0)"
    off = "nccl_socket-ibdisable1-ibextv8plugin-hexhost_67.log"
    env = rules_of(LOGS / off)[off]["nccl-env"]
    assert env.claim.startswith("NCCL_IB_DISABLE=1 is set: NCCL falls back to TCP sockets")
    assert env.evidence.startswith(f"{off}:1: ") and "NCCL_IB_DISABLE set by environment to 1" in env.evidence
    on = "nccl_ib-ibdisable0-env-ibhca_53.log"  # NCCL_IB_DISABLE=0: IB stays on, nothing to say
    assert "nccl-env" not in rules_of(LOGS / on)[on]


def test_a_lagging_rank_that_shares_cores_unbound_is_credited_to_shared_cores(tmp_path):
    """Unbound ranks on one CPU set: the kernel moves them, one lags, and the fix is to bind them: the lag is
    said under shared-cores. A lag far beyond what the sharing explains (an injected slow_rank) is a cause of its
    own and leads; the same lag with each rank on its own cores is a straggler to look for on that node."""
    from hpcbench.explain import explain_paths

    unbound = [_prov(0, "h1", [0, 1]), _prov(1, "h1", [0, 1])]
    shared = _run_with(tmp_path / "a", unbound, rank_compute_s=[0.3, 0.7])  # sharing explains up to 1.5 x 0.3 s
    assert shared["straggler"].because == "shared-cores" and shared["shared-cores"].because is None
    [w] = explain_paths([tmp_path / "a" / "run"])
    assert w.findings[0].rule == "shared-cores" and [f.rule for f in w.under(w.findings[0])][0] == "straggler"
    alone = _run_with(tmp_path / "c", unbound, rank_compute_s=[0.3, 3.0])
    assert alone["straggler"].own_cause and alone["straggler"].because is None
    [w] = explain_paths([tmp_path / "c" / "run"])
    assert w.findings[0].rule == "straggler" and w.top()[1].rule == "shared-cores"
    bound = _run_with(tmp_path / "b", [_prov(0, "h1", [0], "slurm cores", True), _prov(1, "h1", [1], "slurm cores", True)],
                      rank_compute_s=[0.3, 0.9])
    assert "rank 1 on node1 takes 900.0 ms per compute" in bound["straggler"].claim and "shared-cores" not in bound
    # a third slower, but each rank's mean is only known to +-80 ms: the gap is within the noise, said and not claimed
    cores = [_prov(0, "h1", [0], "slurm cores", True), _prov(1, "h1", [1], "slurm cores", True)]
    noisy = _run_with(tmp_path / "d", cores, rank_compute_s=[0.3, 0.4], rank_compute_ci95_s=[0.08, 0.08])
    assert noisy["straggler"].severity == "info" and "within the noise" in noisy["straggler"].claim
    clear = _run_with(tmp_path / "e", cores, rank_compute_s=[0.3, 0.4], rank_compute_ci95_s=[0.01, 0.01])
    assert clear["straggler"].severity == "warning"
    # an older record has only the slowest rank's interval: it stands for every rank's
    old = _run_with(tmp_path / "f", cores, rank_compute_s=[0.3, 0.4], compute_time_ci95_s=0.08)
    assert old["straggler"].severity == "info"


def test_a_comm_share_the_model_predicts_is_its_own_cause(tmp_path):
    """Two Slurm nodes on one host (one-host, a cause of comm-share through the shared CPUs), but the step is what
    the allreduce curve predicts: the comm share is the link's cost, not credited to the host; where the model
    does not explain the step, it is."""
    ar = point(kind="collective", nodes=2, rpn=1)
    one, two = point(model="mlp"), point(model="mlp", nodes=2, rpn=1)
    # 100 us + 100 MB/s: the MLP's 407 kB of gradients take 4.2 ms, one DDP bucket, nothing hidden
    rows = [AllreduceRow(size_bytes=s, count=s // 4, dtype="float32", time_us=100.0 + s / 1e8 * 1e6, algbw_gbps=0,
                         busbw_gbps=0, wrong=0) for s in (1 << 10, 1 << 20, 1 << 24)]
    host = [RankInfo(r, 0, "vm", f"node{r + 1}", r, [0]) for r in range(2)]

    def found(step: float, where: str):
        posing = replace(_timed(two, step, 0.0001, compute_time_s=0.010, comm_time_s=step - 0.010,
                                comm_fraction=(step - 0.010) / step, comm_method="m"), ranks=host)
        rd = make_run(tmp_path / where, [(ar, record(ar, 1.0, kind="collective", allreduce=rows)),
                                         (one, _timed(one, 0.010, 0.0001, compute_time_s=0.010)), (two, posing)])
        return rules_of(rd.root)[two.label]

    held = found(0.0143, "held")
    assert "one-host" in held and "explain it" in held["model"].claim
    assert held["comm-share"].own_cause and held["comm-share"].because is None
    assert "the model predicts the step" in held["comm-share"].evidence
    missed = found(0.030, "missed")  # 20 ms of exchange where the curve gives 4: the shared host is the lead
    assert "model-gap" in missed and missed["comm-share"].because == "one-host"
