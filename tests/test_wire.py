"""Bytes on the wire: the nodes' interface counters (provenance ``wire``) read against their links' peaks, hosts told
apart by boot id, and what explain and the report say of them. The provenance documents are written here in the
shape provenance.py records (one per rank); the counters of a real run are checked by test_minicluster_netns."""
from __future__ import annotations

import dataclasses

import pytest
from conftest import REPO

from hpcbench.explain.context import Context
from hpcbench.explain.links import between_hosts, of_peak
from hpcbench.explain.rules import host, wire
from hpcbench.figures.wire import host_names, machines, node_wires
from hpcbench.workloads import provenance

LOG = REPO / "tests" / "data" / "logs" / "horovod_1.log"
BOOT = "baed2962-8a88-45ff-bd16-cd1dce78c212"
LINKS = "/var/tmp/mc/links.toml"


def doc(rank: int, node: str, sent: int, bps: int | None = 100_000_000, *, iface: str = "eth0", lo: int = 0,
        boot: str = BOOT, size: int | None = 8 << 20, env: dict[str, str] | None = None) -> dict:
    """One rank's provenance as a minicluster node writes it: 8 steps of a collective in 1 s."""
    declared = {"interface": "eth0", "bits_per_second": bps, "source": "shaped link of the minicluster",
                "file": LINKS} if bps else None
    return {"rank": rank, "slurm_node": node, "hostname": node, "boot_id": boot, "net_namespace": f"net:[{rank}]",
            "link_declared": declared, "env": env or {"GLOO_SOCKET_IFNAME": "eth0"},
            "nics": [{"name": "eth0", "kind": "virtual", "speed": 10000}],
            "wire": {"what": "all_reduce 8388608 B in place", "steps": 8, "seconds": 1.0, "size_bytes": size,
                     "interfaces": [{"name": iface, "tx_bytes": sent, "rx_bytes": sent},
                                    {"name": "lo", "tx_bytes": lo, "rx_bytes": lo}]}}


def context(docs: list[dict], nodes: int, **kw) -> Context:
    from hpcbench.report.summarize import make_report

    [why] = make_report([LOG]).why
    p = dataclasses.replace(why.point, **{"provenance": tuple(docs), "nodes": nodes, "ranks_per_node": 1,
                                          "world_size": nodes, "hosts": host_names(docs), "kind": "collective",
                                          "collective": "all_reduce", **kw})
    return Context.of(p, [p])


def test_counters_are_read_per_node_against_the_declared_link():
    docs = [doc(r, f"node{r + 1}", 11_300_000) for r in range(4)]
    docs.append(doc(4, "node1", 99))  # a second rank of node1 reads the same interface: its lowest rank counts
    wires = node_wires(docs)
    assert [w.node for w in wires] == ["node1", "node2", "node3", "node4"]
    w = wires[0]
    assert (w.interface, w.sent, w.steps, w.rate) == ("eth0", 11_300_000, 8, 11_300_000.0)
    assert w.peak is not None and w.peak.words() == "100 Mbit/s" and w.share == pytest.approx(0.904)
    assert w.peak.source == f"declared in {LINKS}: shaped link of the minicluster"
    # without a declaration, a virtual interface's sysfs speed is no rate; a physical one's is
    bare = doc(0, "node1", 1000, bps=None)
    assert node_wires([bare])[0].peak is None and "virtual" in node_wires([bare])[0].peak_why
    bare["nics"][0]["kind"] = "ethernet"
    assert node_wires([bare])[0].peak.source == "sysfs speed of eth0"


def test_one_host_is_judged_by_boot_id_not_by_hostname():
    docs = [doc(r, f"node{r + 1}", 1) for r in range(4)]
    m = machines(docs)
    assert m is not None and m.one_host_many_namespaces and host_names(docs) == ("node1+node2+node3+node4",)
    two = [doc(0, "node1", 1), doc(1, "node2", 1, boot="another-kernel")]
    assert host_names(two) == ("node1", "node2") and not machines(two).one_host_many_namespaces
    assert host_names([{"rank": 0, "hostname": "a"}]) == ()  # an older provenance says nothing: not guessed
    [f] = host.one_host(context(docs, 4))
    assert f.claim == ("4 nodes in separate network namespaces of one host: the links are real and shaped; "
                       "compute is shared")
    [f] = host.one_host(context(docs, 4, kind="train"))
    assert f.severity == "warning"  # a training point's compute shared by its nodes: a cause
    # nodes with CPUs of their own (cpusets): the cores are not shared, and it is a caveat, not a cause
    own = [{**doc(r, f"node{r + 1}", 1), "affinity": {"cpus": [r]}} for r in range(2)]
    [f] = host.one_host(context(own, 2, kind="train"))
    assert f.severity == "info" and f.claim.endswith("each node has CPUs of its own (node1: CPU 0; node2: CPU 1); "
                                                     "memory and the kernel are shared")
    # a CPU in common: shared again
    [f] = host.one_host(context([{**d, "affinity": {"cpus": [0, 1]}} for d in own], 2))
    assert f.claim.endswith("compute is shared")


def test_explain_says_the_traffic_and_its_share_of_the_link():
    ctx = context([doc(r, f"node{r + 1}", 11_300_000 + r) for r in range(4)], 4)
    [f] = wire.traffic(ctx)
    assert f.rule == "wire" and f.claim.startswith("inter-node traffic: 11.3 MB over eth0 at 11.3 MB/s")
    assert "90% of the 100 Mbit/s link" in f.claim and f.evidence.startswith("provenance-rank3.json wire")
    assert wire.elsewhere(ctx) == [] and wire.contention(ctx) == []
    peak, _ = between_hosts("Socket", list(ctx.provenance), 1)
    assert peak is not None and peak.gbps == 0.0125 and of_peak(0.0113, peak) == "90% of 0.0125 GB/s"


def test_a_degraded_node_is_named_as_the_slowest_link():
    docs = [doc(r, f"node{r + 1}", 2_400_000, bps=20_000_000 if r == 2 else 100_000_000) for r in range(4)]
    [f] = wire.traffic(context(docs, 4))
    assert f.rule == "slowest-link" and f.severity == "warning"
    assert f.claim.startswith("node3's link is the slowest: 2.4 MB over eth0 at 2.4 MB/s")
    assert "96% of the 20 Mbit/s link; the other nodes reached at most 19% of theirs (100 Mbit/s)" in f.claim
    assert "minicluster restore node3" in f.fix
    peak, _ = between_hosts("Socket", docs, 1)
    assert peak is not None and peak.gbps == 0.0025 and "eth0 of node3" in peak.link


def test_bytes_over_another_interface_than_the_one_named_are_said():
    docs = [doc(r, f"node{r + 1}", 0, iface="eth0", lo=9_000_000) for r in range(2)]
    [f] = wire.elsewhere(context(docs, 2))
    assert f.rule == "wire-interface" and f.claim.startswith("2 node(s) sent their bytes over lo, not eth0 "
                                                             "(env GLOO_SOCKET_IFNAME)")
    # two ranks of ONE node: the kernel carries their bytes over lo even when addressed at eth0; nothing to say
    one = [doc(r, "node1", 0, iface="eth0", lo=9_000_000) for r in range(2)]
    assert wire.elsewhere(context(one, 2)) == []


def test_more_bytes_than_the_point_moves_is_contention():
    # 2 ranks, 8 MiB: each sends 8.39 MB per allreduce; 13.7 MB means another job's bytes shared the link
    [f] = wire.contention(context([doc(r, f"node{r + 1}", 8 * 13_700_000) for r in range(2)], 2))
    assert f.rule == "contention" and "13.7 MB per step, 1.6x its all_reduce of 8.39 MB (8.39 MB)" in f.claim
    assert wire.contention(context([doc(r, f"node{r + 1}", 8 * 8_400_000) for r in range(2)], 2)) == []


def test_the_report_table_gives_each_node_its_bytes_and_share():
    from hpcbench.report.summarize import make_report
    from hpcbench.report.tables_wire import wire_table

    ctx = context([doc(r, f"node{r + 1}", 8 * 1_560_000) for r in range(2)], 2)

    agg = make_report([LOG]).aggs[0]
    for s in agg.samples:
        s.provenance, s.nodes = list(ctx.provenance), 2
    t = wire_table([agg])
    assert [r[1:7] for r in t.rows] == [["node1", "eth0", "1.56 MB", "12.5 MB/s", "100 Mbit/s", "100%"],
                                        ["node2", "eth0", "1.56 MB", "12.5 MB/s", "100 Mbit/s", "100%"]]
    assert any("separate network namespaces of one host (2 nodes)" in n for n in t.notes)


def test_provenance_reads_the_counters_and_the_declared_link(tmp_path):
    links = tmp_path / "links.toml"
    links.write_text('[node2]\ninterface = "eth0"\nbits_per_second = 20000000\nsource = "shaped"\n')
    d = provenance.collect(0, 0, environ={"HPCBENCH_LINKS": str(links), "SLURMD_NODENAME": "node2"})
    assert d["link_declared"] == {"interface": "eth0", "bits_per_second": 20000000, "source": "shaped",
                                  "file": str(links)}
    assert d["boot_id"] == open("/proc/sys/kernel/random/boot_id").read().strip()
    assert d["net_namespace"].startswith("net:[")
    missing = provenance.collect(0, 0, environ={"HPCBENCH_LINKS": str(links), "SLURMD_NODENAME": "node9"})
    assert missing["link_declared"] is None and "node9" in missing["unavailable"]["link_declared"]
    rec = provenance.Recorder(d, None)
    with rec.wire(3, "timed steps"):
        with open("/dev/null", "w") as f:
            f.write("x")
    w = rec.doc["wire"]
    assert (w["what"], w["steps"], w["size_bytes"]) == ("timed steps", 3, None) and w["seconds"] >= 0
    assert {i["name"] for i in w["interfaces"]} >= {"lo"} and all(i["tx_bytes"] >= 0 for i in w["interfaces"])


def test_a_training_point_that_kept_its_link_near_the_peak_is_link_bound():
    # 11.3 MB/s of the 12.5 MB/s (100 Mbit/s) link over the timed steps: the exchange waits for the link
    busy = [doc(r, f"node{r + 1}", 11_300_000) for r in range(2)]
    [f] = wire.traffic(context(busy, 2, kind="train"))
    assert f.rule == "link-bound" and f.severity == "warning", f
    assert f.claim.startswith("the gradient exchange is bound by the link: 11.3 MB over eth0 at 11.3 MB/s")
    assert "90% of the 100 Mbit/s link" in f.claim and "[workload] batch_size" in f.fix
    # half the link: the traffic is said, as information
    [f] = wire.traffic(context([doc(r, f"node{r + 1}", 6_000_000) for r in range(2)], 2, kind="train"))
    assert f.rule == "wire" and f.severity == "info"
    # a collective is meant to fill the link: never 'bound'
    [f] = wire.traffic(context(busy, 2))
    assert f.rule == "wire"
