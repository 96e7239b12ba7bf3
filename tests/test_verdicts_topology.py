"""Issue 26's second part: NCCL's topology dump read (parse/topology.py) and rule gdr-topology from it, the
rules that were only ever silent on a real log (elastic Horovod's blacklist and exit status, NCCL's GDR distance
line, NCCL_NET_GDR_LEVEL set on one host only), and transport lines that could not be read said as such. Every
log is a real one of tests/data/logs; where a test needs a variant (a line cut as a terminal cuts it, the dump of a
host whose ranks lack the variable) it is made from a real log under tmp_path, and says what it changed."""

from __future__ import annotations

import pytest
from conftest import DATA

from hpcbench.explain import explain_paths
from hpcbench.parse.api import read_log
from hpcbench.parse.checks import check_parsed, verdict
from hpcbench.parse.topology import gdr_level

LOGS = DATA / "logs"
DUMP = "nccl_topodump-phb-gdrlevel-sys-gather_117.log"  # nccl-tests#350: the dump of a host with GDR forced on


def checked(path) -> dict[str, object]:
    log = read_log(path)
    return {f.rule: f for f in check_parsed(log.facts, evidence=log.evidence)}


def test_the_dump_is_read_as_nccl_prints_it():
    (dump,) = read_log(LOGS / DUMP).evidence.topology
    assert (dump.host, dump.line) == ("n207", 24)
    assert dump.gpus["81000"][:2] == ("CPU/1", 27) and dump.ranks == {"81000": 0}
    assert dump.nets == {"1": ("NIC/d1000", 29), "0": ("NIC/21000", 33)}
    assert dump.parents["NIC/d1000"] == "CPU/1" and dump.parents["NIC/21000"] == "CPU/0"
    assert dump.speeds == {"1": 25.0, "0": 3.1}
    assert {k: p.type for k, p in dump.paths.items()} == {("81000", "1"): "PHB", ("81000", "0"): "SYS"}
    near = dump.nearest()["81000"]
    assert (near.net, near.type, near.line, near.derived) == ("1", "PHB", 35, False)
    # without the path lines, NCCL's rule over the tree gives the same: one CPU is PHB, two CPUs SYS
    assert dump.tree_path("81000", "1") == "PHB" and dump.tree_path("81000", "0") == "SYS"


def test_a_tree_with_nvlink_and_a_near_nic_says_nothing_of_a_far_gpu_without_path_lines():
    """Through NVLink NCCL sends a far GPU's data out of a peer GPU near a NIC (PXN): the tree alone cannot tell
    its path. The real dump of nccl#1053 (one GPU with NVLink, its NIC only through the CPU) has no near GPU."""
    (dump,) = read_log(LOGS / "nccl_socket-lo-ibextdisable-topo_73.log").evidence.topology
    assert dump.nvlink and dump.nearest()["7000"].type == "PHB" and dump.nearest()["7000"].derived


@pytest.mark.parametrize("value,level", [("SYS", "SYS"), ("phb", "PHB"), ("3", "PHB"), ("5", "SYS"), ("0", "LOC"),
                                         ("bogus", None), (None, None)])
def test_nccl_net_gdr_level_read_as_nccl_reads_it(value, level):
    assert gdr_level(value) == level  # names, or the integers of before 2.7 (paths.cc levelsOldToNew)


# rule, a real log that trips it, a real log that must not
RULES = [
    ("gdr-topology", "nccl_gdrdisabled-distance7-inline_120.log", DUMP),  # 2.6+ 'distance 7 > 4'; GDR forced on
    ("gdr-topology", "nccl_gdrdisabled-distance7-inline_120.log", "nccl_socket-lo-ibextdisable-topo_73.log"),
    ("crash", "horovod_elastic-failurecount-stop_119.log", "horovod_1.log"),
    ("crash", "horovod_elastic-blacklist-exit134_118.log", "horovod_3.log"),
    ("nccl-env", DUMP, "nccl_directptrread-gdrdma-threads_34.log"),
]


@pytest.mark.parametrize("rule,fires,silent", RULES)
def test_each_rule_trips_on_a_real_log_and_not_on_another(rule, fires, silent):
    assert rule in checked(LOGS / fires), (rule, fires)
    assert rule not in checked(LOGS / silent), (rule, silent)


def test_a_gpu_whose_nearest_nic_is_across_the_cpu_is_named_with_its_line_and_keys(tmp_path):
    """The thread's other host: the same dump on a host whose ranks did not get NCCL_NET_GDR_LEVEL (the variable
    was set in front of mpirun without -x). Made from the real log by leaving out what only the level changes:
    its own line, NCCL's 'Enabled for GPU' lines and the GDRDMA of the edges; the dump and paths are NCCL's."""
    lines = [ln.replace("/GDRDMA", "") for ln in (LOGS / DUMP).read_text().splitlines()
             if "NCCL_NET_GDR_LEVEL" not in ln and "RDMA Enabled for GPU" not in ln]
    log = tmp_path / "remote.log"
    log.write_text("\n".join(lines) + "\n")
    f = checked(log)["gdr-topology"]
    assert f.severity == "warning"
    assert "GPU 81000 on n207 reaches its nearest NIC, NET/1 (mlx5_2), only through the CPU's host bridge (PHB)" in f.claim
    assert "beyond NCCL_NET_GDR_LEVEL's default PXB" in f.claim and "its network edges show no GDRDMA" in f.claim
    assert f.evidence.startswith("remote.log:") and "NET/1 (3/24.000000/PHB)" in f.evidence
    assert "NCCL_NET_GDR_LEVEL=PHB" in f.fix and "NCCL_IB_HCA" in f.fix
    (why,) = explain_paths([str(log)])
    found = {x.rule: x for x in why.findings}
    assert "[slurm.env] NCCL_NET_GDR_LEVEL" in found["gdr-topology"].fix
    # the edges without GDRDMA are its symptom, credited to it
    assert found["ib-without-gdrdma"].because == "gdr-topology"
    # one host, or a Socket network: the distance does not matter
    one = tmp_path / "one-host.log"
    one.write_text("\n".join(ln.replace("n208", "n207") for ln in lines) + "\n")
    assert "gdr-topology" not in checked(one)


def test_nccl_net_gdr_level_raised_is_said_to_need_every_rank():
    f = checked(LOGS / DUMP)["nccl-env"]
    assert f.claim.startswith("NCCL_NET_GDR_LEVEL=SYS is set: GPUDirect RDMA is used up to SYS apart")
    assert "mpirun -x" in f.fix and not f.fix.startswith("unset")
    # the thread's cause: set in front of Open MPI's mpirun (line 1), not passed with -x, so the remote rank lacks it
    assert "set in front of Open MPI's mpirun and not passed with -x" in f.claim and f.evidence.startswith(f"{DUMP}:1: ")
    passed = checked(LOGS / "nccltests_broadcast-c0-na_53.log")["nccl-env"]  # mpirun -x NCCL_IB_DISABLE=1
    assert "not passed with -x" not in passed.claim


def test_busbw_judged_against_the_nic_speed_the_dump_rates():
    found = {f.rule: f for f in explain_paths([str(LOGS / DUMP)])[0].findings}
    assert found["busbw"].claim.startswith("figures low: 10.91 GB/s busbw at 10.625 GiB is 44% of the NET/1 port")
    assert f"{DUMP}:29" in found["busbw"].evidence


def test_an_elastic_worker_that_failed_is_not_a_failed_job():
    went_on = checked(LOGS / "horovod_elastic-blacklist-exit134_118.log")["crash"]
    assert went_on.severity == "warning" and "signal 6, SIGABRT" in went_on.claim
    assert "blacklisted its host elastic-training-synthdemo-worker-3" in went_on.claim
    assert "9 iteration(s) after it (from line 5)" in went_on.claim
    stopped = checked(LOGS / "horovod_elastic-failurecount-stop_119.log")
    assert stopped["crash"].severity == "error" and "failure count == 3 -> stop running" in stopped["crash"].claim
    (why,) = explain_paths([str(LOGS / "horovod_elastic-blacklist-exit134_118.log")])
    assert not any(f.fails for f in why.findings)  # an excerpt of a running job: no error
    assert {"crash", "unfinished"} <= {f.rule for f in why.findings}


def test_a_transport_line_cut_is_said_and_nothing_rests_on_it(tmp_path):
    """A real log with one transport line cut inside its transport, as a paste cut at a width cuts it."""
    text = (LOGS / "nccl_directptr-gdrdma-ring_12.log").read_text()
    assert "[receive] via NET/IB/0/GDRDMA\n" in text
    cut = tmp_path / "cut.log"
    cut.write_text(text.replace("[receive] via NET/IB/0/GDRDMA\n", "[receive] via NET/IB/0/GDR\n", 1))
    found = checked(cut)
    assert found["could-not-read"].claim.startswith("could not read the transport of 1 transport line(s) (line 6;")
    assert found["could-not-read"].evidence.startswith("cut.log:6: ")
    # the cut edge may have been a GDRDMA one: no 'without GPUDirect RDMA' rests on the rest
    assert "ib-without-gdrdma" not in found
    log = read_log(cut)
    assert "(1 transport line(s) could not be read)" in verdict(log.facts, None, log.evidence)
    assert "NET/IB/0/GDR" not in log.facts["nccl"]["transports_raw"]
    from hpcbench.explain import render

    text = render.as_table(explain_paths([str(cut)]))
    assert "no cause of a loss found" in text and "What the figures can bear:" in text  # a caveat, not a cause
    # the whole log: nothing unread
    assert "could-not-read" not in checked(LOGS / "nccl_directptr-gdrdma-ring_12.log")


@pytest.mark.parametrize("tail,cut", [(" [send] via NET/IB/0", False), (" via P2P/direct pointer", False),
                                      (" [receive] via NET/IB/1/GDRDMA/Shared", False), ("", True), (" [se", True),
                                      (" [send] via NET/IB/0/GDR", True), (" via P2P/IP", True), (" via NET/", True),
                                      (" -> 1", False)])
def test_what_follows_a_transport_lines_ranks_tells_whether_it_was_cut(tail, cut):
    from hpcbench.parse.cuts import edge_cut

    assert edge_cut(tail) is cut


def _dump_lines(nic_under_switch: bool) -> list[str]:
    """The shape NCCL prints (topo.cc ncclTopoPrintRec, paths.cc printNodePaths), for a GPU whose path to the NIC
    goes through the CPU: a format test of the rule's two readings, not a corpus log."""
    p = "hostA:11:12 [0] NCCL INFO "
    nic = ([f"{p}              + PCI[24.0] - NIC/12000", f"{p}                            + NET[25.0] - NET/0 (0/1/25.0)"]
           if nic_under_switch else [f"{p}+ PCI[24.0] - NIC/12000", f"{p}              + NET[25.0] - NET/0 (0/1/25.0)"])
    return [f"{p}NET/IB : Using [0]mlx5_0:1/IB [RO]; OOB eth0:10.0.0.1<0>", f"{p}Using network IB",
            f"{p}comm 0x1 rank 0 nRanks 2 nNodes 2 localRanks 1 localRank 0 MNNVL 0",
            f"{p}=== System : maxBw 24.0 totalBw 24.0 ===", f"{p}CPU/0 (1/1/2)", f"{p}+ PCI[24.0] - PCI/10000 (1000)",
            f"{p}              + PCI[24.0] - GPU/11000 (0)", *nic, f"{p}==========================================",
            f"{p}GPU/11000 :GPU/11000 (0/5000.0/LOC) CPU/0 (2/24.0/PHB) NET/0 (3/24.0/PHB)"]


@pytest.mark.parametrize("under_switch,fires", [(True, False), (False, True)])
def test_a_phb_path_is_a_distance_only_where_the_tree_says_so(tmp_path, under_switch, fires):
    """NCCL prints a GPU-NET path after deciding GDR: without GDR (no nvidia_peermem) it routes a GPU and NIC under
    one switch through the CPU, and the path line says PHB (paths.cc; sjeaugey in nccl#489). The distance is the
    tree's: under one switch it is no distance problem (rule ib-without-gdrdma's hint is the fix), under the CPU it is."""
    log = tmp_path / "dump.log"
    log.write_text("\n".join(_dump_lines(under_switch)) + "\n")
    (dump,) = read_log(log).evidence.topology
    assert dump.tree_path("11000", "0") == ("PXB" if under_switch else "PHB")
    assert ("gdr-topology" in checked(log)) is fires
