"""The conclusions check and explain draw from someone else's log (issue 26): each rule on a real log of
tests/data/logs that trips it and one that must stay silent; the verdict line's hosts and network from every
kind of evidence; bandwidth judged against the hardware the log names; partial parses said as such."""

from __future__ import annotations

import pytest
from conftest import DATA

from hpcbench.explain import explain_paths, links
from hpcbench.parse.api import read_log
from hpcbench.parse.checks import check_parsed, verdict

LOGS = DATA / "logs"


def checked(name: str) -> dict[str, object]:
    log = read_log(LOGS / name)
    return {f.rule: f for f in check_parsed(log.facts, evidence=log.evidence)}


def said(name: str) -> str:
    log = read_log(LOGS / name)
    return verdict(log.facts, None, log.evidence)


def explained(name: str) -> dict[str, object]:
    (why,) = explain_paths([str(LOGS / name)])
    return {f.rule: f for f in why.findings}


# rule, a real log that trips it, a real log that must not
CHECKS = [
    ("lo-interface", "nccl_k8s-master-pod-mnist-progress-socket_104.log", "nccl_socket-lo-mpiprefix_10.log"),
    ("efa-unavailable", "nccl_cloudwatch-gluedts_45.log", "nccl_ofi-libfabric-p5en-digithost_52.log"),
    ("gdr-topology", "nccl_ibring_02.log", "nccl_directptrread-gdrdma-threads_34.log"),
    ("gdr-topology", "nccl_ibring_02.log", "ddp_84.log"),  # GDR "disabled" for a Socket NIC is no finding
    ("no-p2p", "nccl_collnetchannels-initall-proxy_94.log", "nccl_p2pipcread-busid-hexhost_19.log"),
    ("net-intra", "nccl_gdrdma-multinic-iphostname_65.log", "nccl_socket-shm-22chan-ubuntu_56.log"),
    ("ib-roce-mixed", "nccl_ib-plus-roce-mixed-affinity_80.log", "nccl_roce-10hca-mpiprefix-227_87.log"),
    ("crash", "nccl_trainer-role-prefix-ifname_72.log", "nccl_timestampprefix-newest_28.log"),
    ("could-not-read", "nccl_ntrows-fragment-tagged-nvlscomm_100.log", "nccltests_glued-rankprefix_63.log"),
    ("no-mpi-build", "nccltests_dupheader-oldfmt_52.log", "nccltests_3.log"),
    ("no-mpi-build", "nccltests_dupheader-g8-h800_70.log", "nccltests_sendrecv-inplace-na_56.log"),
    ("nccl-warn-harmless", "nccl_socket-2103-fenceglued-blanklines_75.log", "nccl_efa-ring-mpiprefix-4nodes_51.log"),
    ("nccl-warn", "nccl_efa-ring-mpiprefix-4nodes_51.log", "nccl_socket-2103-fenceglued-blanklines_75.log"),
    ("nccl-env", "ddp_7.log", "nccl_p2pdirect-ringpxn-iphostname-prompt_95.log"),  # P2P_LEVEL=LOC, not =SYS
    ("ib-without-gdrdma", "nccl_ibext-p2pipcread_36.log", "nccl_directptr-gdrdma-ring_12.log"),
]


@pytest.mark.parametrize("rule,fires,silent", CHECKS)
def test_each_check_trips_on_one_real_log_and_not_on_another(rule, fires, silent):
    found = checked(fires)
    assert rule in found, (rule, fires, sorted(found))
    assert found[rule].claim and (found[rule].fix or found[rule].severity == "info")
    assert rule not in checked(silent), (rule, silent)


def test_findings_name_their_line():
    assert checked("nccl_k8s-master-pod-mnist-progress-socket_104.log")["lo-interface"].evidence.startswith(
        "nccl_k8s-master-pod-mnist-progress-socket_104.log:17: ")
    unread = checked("nccl_ntrows-fragment-tagged-nvlscomm_100.log")["could-not-read"]
    assert "could not read 1 nccl-tests row(s) (line 5; size 524288 first)" in unread.claim
    assert "the figures leave them out" in unread.claim


def test_srun_labels_on_nccl_tests_rows_are_read(tmp_path):
    """The issue's confident false error: every line of a real table as `srun -l` prints it ('0: ' first)."""
    table = (LOGS / "nccltests_5.log").read_text().splitlines()
    labelled = tmp_path / "srun-l.log"
    labelled.write_text("".join(f"0: {line}\n" for line in table))
    log = read_log(labelled)
    rows = log.facts["nccl_tests"]["rows"]
    assert len(rows) == 12 and rows[-1]["size"] == 134217728 and log.facts["nccl_tests"]["avg_busbw"] == 6.6972
    (why,) = explain_paths([str(labelled)])
    assert why.point.ok and not any(f.fails for f in why.findings)
    assert {"could-not-read", "no-rows", "no-result"}.isdisjoint(f.rule for f in why.findings)


def test_harmless_warns_are_told_apart_from_the_root_cause():
    ok = checked("nccl_socket-2103-fenceglued-blanklines_75.log")["nccl-warn-harmless"]
    assert ok.severity == "info" and "libibverbs" in ok.claim and "Socket transport" in ok.claim
    root = checked("nccl_efa-ring-mpiprefix-4nodes_51.log")["nccl-warn"]
    assert root.severity == "warning" and "Couldn't open AV" in root.claim


def test_nccl_variables_on_a_command_line_count():
    env = checked("nccltests_broadcast-c0-na_53.log")["nccl-env"]
    assert env.claim.startswith("NCCL_IB_DISABLE=1 is set") and ":1: " in env.evidence and "mpirun" in env.evidence
    both = [f.claim for f in check_parsed(read_log(LOGS / "nccl_2292-ibfail-emptylist-p2pdisable_74.log").facts,
                                          evidence=read_log(LOGS / "nccl_2292-ibfail-emptylist-p2pdisable_74.log").evidence)
            if f.rule == "nccl-env"]
    assert [c.split("=")[0] for c in both] == ["NCCL_P2P_DISABLE", "NCCL_SHM_DISABLE"]


@pytest.mark.parametrize("name,starts", [
    ("nccl_roce-2223-kubevirt-prefixedversion_113.log", "2 hosts (nNodes 2)"),  # one host name, nNodes 2
    ("horovod_77.log", "2 hosts (the launcher's -H list)"),  # no NCCL line at all
    ("nccl_socket-p2pipcread-samehostname_55.log", "several hosts (network edges between ranks)"),  # one host name
    ("nccl_ib-roce-rank155-prefix-256ranks_98.log", "several hosts (158+ ranks"),
    ("nccl_ib-4hca-k8spod-hostname_83.log", "1 host;"),
    ("horovod_1.log", "1 host;"),  # horovodrun -H localhost:8, and no NCCL line
    ("nccl_rankonly-prefix-initdone_27.log", "hosts not shown;"),  # '[3] NCCL INFO' lines: no host at all
])
def test_hosts_from_every_kind_of_evidence(name, starts):
    assert said(name).startswith(starts), said(name)


@pytest.mark.parametrize("name,network", [
    ("ddp_9.log", "network Socket, NET/IB found no device (line 11): NCCL falls back to its Socket transport"),
    ("nccl_ofi-libfabric-p5en-digithost_52.log", "network Libfabric, selected; provider efa: EFA"),
    ("nccl_noprefix-efa-gdrdma-p2pipcread_110.log", "network AWS Libfabric, from the NET/ transport lines; GPUDirect RDMA on"),
    ("nccltests_broadcast-c0-na_53.log", "network Socket, NCCL_IB_DISABLE=1 (line 1) leaves NCCL only its Socket"),
    ("horovod_79.log", "network IB, selected (mlx5_0, ib0)"),
    ("nccltests_3.log", "network not shown (no NCCL lines: rerun with NCCL_DEBUG=INFO"),
])
def test_network_from_every_kind_of_evidence(name, network):
    assert network in said(name), said(name)


def test_what_would_help_is_said_once_and_noise_is_gone():
    for name in ("nccltests_3.log", "horovod_1.log"):
        (why,) = explain_paths([str(LOGS / name)])
        text = " ".join(f"{f.claim} {f.fix or ''}" for f in why.findings)
        assert text.count("NCCL_DEBUG=INFO") == 1, text
        assert {"no-nccl-lines", "model"}.isdisjoint(f.rule for f in why.findings)


@pytest.mark.parametrize("name,verdict_word", [
    ("nccltests_indented-g4_65.log", "plausible"),  # 4 RTX 4090: 26 GB/s on PCIe 4.0 x16
    ("nccltests_sendrecv-g2-uint8-old_57.log", "low"),  # 2 GTX 1080: 3.2 GB/s on PCIe 3.0 x16
    ("nccltests_3.log", "plausible"),  # 16 A100 on 2 hosts: within the A100's NVLink, NICs not named
    ("nccltests_nohash-header-2165_66.log", "latency-bound"),  # rows up to 256 B
    ("nccltests_unsorted-zero-busbw_73.log", "nothing"),  # busbw 0.00 everywhere
    ("nccltests_nohash-blocking-k8s_71.log", "nothing"),  # one A10G, mpirun -n 1
])
def test_busbw_judged_against_the_hardware_the_log_names(name, verdict_word):
    f = explained(name)["busbw"]
    assert f.claim.startswith(f"figures {verdict_word}"), f.claim


def test_busbw_unjudged_where_the_log_names_no_hardware():
    found = explained("nccltests_5.log")  # no GPU named, no provenance: no verdict on the figures
    assert "busbw" not in found


def test_a_bandwidth_cliff_is_flagged():
    assert "from 29.5 GB/s at 32 MiB to 5.27 GB/s at 64 MiB" in explained("nccltests_glued-rankprefix_63.log")["bw-cliff"].claim
    assert "bw-cliff" not in explained("nccltests_5.log")


def test_a_header_without_rows_is_an_excerpt_not_a_failed_job():
    found = explained("nccltests_11.log")
    assert "no-rows" in found and "no-result" not in found and not any(f.fails for f in found.values())
    assert "no-rows" not in explained("nccltests_3.log")


def test_a_horovod_run_cut_before_its_summary_is_said():
    run = explained("horovod_3.log")["unfinished"]
    assert "(launcher -np 2) printed 2 iteration(s), the last at 63 img/sec" in run.claim
    assert "unfinished" not in explained("horovod_1.log")


def test_links_table_names_the_hardware_logs_name():
    assert links.nvlink("AMD Instinct MI300X").gbps == 448.0 and links.nvlink("AMD Instinct MI250X").gbps == 400.0
    assert links.nvlink("NVIDIA H20").gbps == 450.0
    assert links.gpu_pcie("NVIDIA GeForce RTX 4090").gbps == pytest.approx(31.51)
    assert links.instance("p4d.24xlarge").gbps == 50.0 and links.instance("P5en").gbps == 400.0
    assert links.instance("ND96isr_MI300X_v5").gbps == 400.0 and links.instance("Standard_ND96isr_H100_v5").gbps == 400.0
    assert links.instance("c5.large") is None
    # every row has its public source and the sentence that supports it
    assert all(e.get("source", "").startswith("https://") and e.get("quote") for e in links.table())
    assert "AMD Instinct MI300X" in read_log(LOGS / "nccltests_rccl-header-version-g8_75.log").evidence.gpus
