"""Provenance on this machine, binding checks, InfiniBand counters (a fake /sys: no IB here), and `hpcbench env`."""
from __future__ import annotations

import json
import os
import platform
import socket
import subprocess

from conftest import write

from hpcbench.rundir import PointPaths
from hpcbench.workloads import affinity, provenance
from hpcbench.workloads.capabilities import detect


def fake_sys(root, sockets: dict[int, list[int]]):
    """A /sys tree with the given socket -> cpus layout, one core per cpu, one NUMA node per socket."""
    for s, cpus in sockets.items():
        for c in cpus:
            write(root / f"devices/system/cpu/cpu{c}/topology/physical_package_id", f"{s}\n")
            write(root / f"devices/system/cpu/cpu{c}/topology/core_cpus_list", f"{c}\n")
        write(root / f"devices/system/node/node{s}/cpulist", ",".join(map(str, cpus)) + "\n")
    return root


def test_collect_describes_this_process():
    doc = provenance.collect(rank=3, local_rank=1, environ={"SLURM_JOB_ID": "7", "NCCL_DEBUG": "INFO", "HOME": "/x"})
    assert doc["schema"] == "hpcbench.provenance/2"
    assert (doc["rank"], doc["local_rank"], doc["hostname"]) == (3, 1, socket.gethostname())
    assert doc["affinity"]["cpus"] == sorted(os.sched_getaffinity(0))
    assert doc["affinity"]["sockets"] and doc["affinity"]["numa_nodes"]
    assert doc["affinity"]["matches"] is None and doc["affinity"]["requested"] is None
    caps = detect()
    assert doc["software"]["torch"] == caps.torch and doc["software"]["horovod"] == caps.horovod
    assert doc["software"]["kernel"] == platform.release()
    assert doc["env"] == {"SLURM_JOB_ID": "7", "NCCL_DEBUG": "INFO"}
    mpirun = subprocess.run(["mpirun", "--version"], capture_output=True, text=True, check=True).stdout
    assert doc["software"]["mpi"].split(" v")[-1] in mpirun
    assert len(doc["git_commit"]) == 40
    assert {n["name"] for n in doc["nics"]} == set(os.listdir("/sys/class/net"))
    # Local rank 1 leaves the node topology to local rank 0; no GPU here gives reasons, not a crash.
    assert doc["topology"] is None and "local rank 0" in doc["unavailable"]["topology"]
    # Whatever this machine has: GPUs listed exactly when torch sees them, HCAs exactly when sysfs has them.
    assert len(doc["gpus"]) == caps.cuda_devices and ("gpus" in doc["unavailable"]) == (caps.cuda_devices == 0)
    hcas = sorted(os.listdir("/sys/class/infiniband")) if os.path.isdir("/sys/class/infiniband") else []
    assert sorted(d["name"] for d in doc["infiniband"]["devices"]) == hcas
    assert ("infiniband" in doc["unavailable"]) == (not hcas)
    json.dumps(doc)  # serialisable as it stands


def test_slurm_mask_binding_is_checked_per_task(tmp_path):
    topo = affinity.CpuTopology.read(fake_sys(tmp_path, {0: [0, 1, 2, 3], 1: [4, 5, 6, 7]}))
    env = {"SLURM_CPU_BIND_TYPE": "mask_cpu:", "SLURM_CPU_BIND_LIST": "0xF,0xF0"}
    ok = affinity.check_affinity({4, 5, 6, 7}, 1, env, topo)
    assert ok["matches"] is True and ok["sockets"] == [1] and ok["requested"] == "slurm mask_cpu:0xF,0xF0"
    bad = affinity.check_affinity({0, 1, 2, 3, 4}, 1, env, topo)
    assert bad["matches"] is False and bad["expected_cpus"] == [4, 5, 6, 7] and "[0,1,2,3,4]" in bad["detail"]
    assert affinity.check_affinity({0, 1}, 0, {"SLURM_CPU_BIND_TYPE": "none"}, topo)["matches"] is True


def test_openmpi_binding_is_one_unit_per_rank(tmp_path):
    topo = affinity.CpuTopology.read(fake_sys(tmp_path, {0: [0, 1], 1: [2, 3]}))
    env = {"OMPI_COMM_WORLD_RANK": "0", "SLURM_CPU_BIND_TYPE": "none",
           "OMPI_MCA_hwloc_base_binding_policy": "socket"}
    assert affinity.check_affinity({2, 3}, 0, env, topo)["matches"] is True
    assert affinity.check_affinity({2}, 0, env, topo)["matches"] is False  # part of a socket
    assert affinity.check_affinity({0, 1, 2, 3}, 0, env, topo)["matches"] is False  # two sockets
    core = {**env, "OMPI_MCA_hwloc_base_binding_policy": "core"}
    assert affinity.check_affinity({3}, 0, core, topo)["matches"] is True
    assert affinity.check_affinity({2, 3}, 0, core, topo)["matches"] is False


def test_affinity_summary_names_the_rank_that_does_not_match():
    good = {"rank": 0, "slurm_node": "node1", "affinity": {"matches": True, "requested": "slurm mask_cpu:0x1"}}
    bad = {"rank": 1, "slurm_node": "node2", "affinity": {"matches": False, "requested": "slurm mask_cpu:0x1",
                                                          "detail": "requested x, got y"}}
    assert affinity.affinity_summary([good, good]) == (True, "2/2 ranks match the requested binding (slurm mask_cpu)")
    ok, detail = affinity.affinity_summary([good, bad])
    assert ok is False and detail == "rank 1 (node2): requested x, got y"
    assert affinity.affinity_summary([{"rank": 0, "affinity": {"matches": None}}])[0] is None


def test_infiniband_counters_before_and_after(tmp_path):
    # No HCA on this machine: the sysfs layout of an mlx5 port, as the kernel writes it.
    port = tmp_path / "class/infiniband/mlx5_0/ports/1"
    write(tmp_path / "class/infiniband/mlx5_0/fw_ver", "20.31.1014\n")
    write(port / "state", "4: ACTIVE\n")
    write(port / "rate", "200 Gb/sec (4X HDR)\n")
    write(port / "link_layer", "InfiniBand\n")
    write(port / "counters/port_xmit_data", "1000\n")
    write(port / "counters/port_rcv_data", "50\n")
    fake_sys(tmp_path, {0: [0, 1]})
    rec = provenance.start(PointPaths(tmp_path / "pt").provenance(0), 0, 0, sys_root=tmp_path)
    written = json.loads((tmp_path / "pt/provenance-rank0.json").read_text())
    assert written["infiniband"]["devices"][0]["ports"][0]["counters_before"] == {"port_xmit_data": 1000,
                                                                                   "port_rcv_data": 50}
    write(port / "counters/port_xmit_data", "3500\n")
    write(port / "counters/port_rcv_data", "50\n")
    rec.finish()
    p = json.loads((tmp_path / "pt/provenance-rank0.json").read_text())["infiniband"]["devices"][0]["ports"][0]
    assert (p["xmit_bytes"], p["rcv_bytes"]) == (2500 * 4, 0)
    assert p["state"] == "4: ACTIVE" and "infiniband" not in rec.doc["unavailable"]


def test_hpcbench_env_table_and_json(cli):
    table = cli("env")
    assert table.returncode == 0, table.stderr
    caps = detect()
    assert f"torch               {caps.torch}" in table.stdout
    assert "which framework/backend/device runs here" in table.stdout
    assert "Open MPI" in table.stdout
    js = cli("env", "--format", "json")
    info = json.loads(js.stdout)
    assert info["capabilities"]["horovod_build"] == {k: v for k, v in caps.horovod_build.items()}
    assert info["provenance"]["schema"] == "hpcbench.provenance/2"
    rows = {(b["framework"], b["backend"], b["device"]): b for b in info["backends"]}
    assert rows[("ddp", "gloo", "cpu")]["runs_here"] is True
    assert rows[("horovod", "mpi", "cpu")]["runs_here"] == ("mpi" in caps.horovod_tensor_ops)
    assert rows[("horovod", "oneccl", "cpu")]["runs_here"] == ("ccl" in caps.horovod_tensor_ops)


# --- the GPU a rank uses and its NUMA node (issue 12, item 5): no GPU here, so a constructed sysfs ------------

def fake_gpu_sys(root, numa: dict[str, str]):
    """Two sockets (cpus 0-3 on NUMA node 0, 4-7 on 1) and GPUs at the given sysfs bus ids with their numa_node."""
    fake_sys(root, {0: [0, 1, 2, 3], 1: [4, 5, 6, 7]})
    for bus, node in numa.items():
        write(root / "bus/pci/devices" / bus / "numa_node", f"{node}\n")
    return root


def test_gpu_pairing_reads_the_gpus_numa_node_from_sysfs(tmp_path):
    from hpcbench.workloads import placement

    root = fake_gpu_sys(tmp_path, {"0000:1b:00.0": "0", "0000:9a:00.0": "1", "0000:c3:00.0": "-1"})
    assert placement.sysfs_bus_id("00000000:9A:00.0") == "0000:9a:00.0"  # torch/NVML's form -> sysfs's
    near = placement.pairing(0, 0, {0, 1, 2, 3}, {"index": 0, "name": "H100", "bus_id": "00000000:1B:00.0"},
                             sys_root=root)
    assert (near["numa_nodes"], near["gpu"], near["gpu_numa_node"], near["gpu_numa_source"]) == ([0], 0, 0, "sysfs")
    assert near["local"] is True and near["cpus"] == [0, 1, 2, 3]
    # Slurm's cyclic layout: local rank 1 on socket 1 (cpus 4-7), feeding GPU 1 on socket 0 ... and the reverse.
    far = placement.pairing(1, 1, {4, 5, 6, 7}, {"index": 1, "name": "H100", "bus_id": "00000000:1B:00.0"},
                            sys_root=root)
    assert far["local"] is False and far["numa_nodes"] == [1] and far["gpu_numa_node"] == 0
    assert far["detail"] == ("GPU 1 (0000:1b:00.0) is on NUMA node 0, the rank's CPUs [4,5,6,7] on NUMA node(s) [1]: "
                             "its data crosses the socket link")
    # -1: the firmware gives no NUMA affinity; no pynvml here either: null, with both reasons.
    unknown = placement.pairing(2, 0, {0}, {"index": 0, "bus_id": "00000000:C3:00.0"}, sys_root=root)
    assert unknown["gpu_numa_node"] is None and unknown["local"] is None
    assert "says -1" in unknown["detail"] and "NVML" in unknown["detail"]
    missing = placement.pairing(3, 0, {0}, {"index": 0, "bus_id": "00000000:01:00.0"}, sys_root=root)
    assert missing["gpu_numa_node"] is None and "FileNotFoundError" in missing["detail"]
    cpu = placement.pairing(4, 0, {5}, None, "device is cpu", sys_root=root)
    assert (cpu["gpu"], cpu["gpu_numa_node"], cpu["local"], cpu["detail"], cpu["numa_nodes"]) == (
        None, None, None, "device is cpu", [1])
    ok, detail = placement.pairing_summary([near, far, cpu])
    assert ok is False and detail == f"rank 1: {far['detail']}"
    assert placement.pairing_summary([near, near]) == (True, "2/2 ranks use a GPU on their own NUMA node")
    assert placement.pairing_summary([cpu, None]) == (None, "device is cpu")


def test_the_gpu_is_the_local_rank_modulo_the_gpus_a_rank_sees(monkeypatch):
    """block/none: every GPU of the node visible (GPU = local rank); closest: one per task (GPU 0 of its own)."""
    import pytest
    import torch

    from hpcbench.workloads import placement

    chosen = []
    monkeypatch.setattr(torch.cuda, "set_device", chosen.append)
    for visible, local_rank, index in ((8, 5, 5), (1, 5, 0), (4, 6, 2)):
        monkeypatch.setattr(torch.cuda, "device_count", lambda v=visible: v)
        device, _, got = placement.use_device("cuda", local_rank)
        assert (got, device, chosen[-1]) == (index, torch.device("cuda", index), index)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 0)
    with pytest.raises(RuntimeError, match="sees no GPU"):
        placement.use_device("cuda", 0)
    assert placement.use_device("cpu", 3)[::2] == (torch.device("cpu"), None)


def test_provenance_records_the_pairing_and_a_failing_probe_never_raises(tmp_path):
    root = fake_gpu_sys(tmp_path, {"0000:1b:00.0": "1"})
    rec = provenance.start(PointPaths(tmp_path / "pt").provenance(0), 0, 0, sys_root=root)
    from hpcbench.workloads import placement

    rec.add("gpu_binding", lambda: placement.pairing(0, 0, {0}, {"index": 0, "bus_id": "0000:1B:00.0"},
                                                     sys_root=root))
    rec.add("broken", lambda: 1 / 0)
    rec.finish()
    doc = json.loads((tmp_path / "pt/provenance-rank0.json").read_text())
    assert doc["gpu_binding"]["gpu_numa_node"] == 1 and doc["gpu_binding"]["local"] is False
    assert doc["broken"] is None and doc["unavailable"]["broken"] == "ZeroDivisionError: division by zero"


# --- the transport of the CPU backends (workloads/transport.py) -----------------------------------------

def test_the_transport_of_gloo_and_open_mpi_on_this_machine():
    """Probed as a rank does (interfaces by ioctl, Open MPI's parameters by the real ompi_info with the rank's
    environment), then said in words from the provenance documents (hpcbench/parse/transport.py)."""
    from hpcbench.parse.transport import Described, allowed, describe, holding, tcp_interfaces
    from hpcbench.workloads import transport

    env = {"PATH": os.environ["PATH"], "GLOO_SOCKET_IFNAME": "lo", "OMPI_MCA_btl": "tcp,self",
           "OMPI_MCA_btl_tcp_if_include": "127.0.0.0/8", "OMPI_MCA_pml": "ob1"}
    ddp = transport.probe("ddp", "gloo", 0, env)
    assert ddp["interfaces"]["lo"] == "127.0.0.1/8" and ddp["gloo"] == {"iface_env": "GLOO_SOCKET_IFNAME", "iface": "lo"}
    said = describe("gloo", [{"rank": 0, "transport": ddp}])
    assert said == Described("Gloo TCP over lo", "provenance-rank0.json transport.gloo: GLOO_SOCKET_IFNAME=lo")
    hvd = transport.probe("horovod", "gloo", 1, env)  # Horovod names its interface in HOROVOD_GLOO_IFACE only
    home = holding(socket.gethostbyname(socket.gethostname()), hvd["interfaces"])
    said = describe("gloo", [{"rank": 1, "transport": hvd}])
    assert said is not None and said.text == f"Gloo TCP over {home}" and "HOROVOD_GLOO_IFACE unset" in said.evidence
    mpi = transport.probe("horovod", "mpi", 0, env)
    assert {"tcp", "self"} <= set(mpi["ompi"]["components"]["btl"]) and "ob1" in mpi["ompi"]["components"]["pml"]
    assert mpi["ompi"]["params"]["btl"] == {"value": "tcp,self", "source": "environment"}
    other = transport.probe("horovod", "mpi", 1, env)
    said = describe("mpi", [{"rank": 0, "transport": mpi}, {"rank": 1, "transport": other}])
    assert said is not None and said.text == "Open MPI tcp BTL over lo, PML ob1", said
    assert "btl=tcp,self (environment)" in said.evidence and "btl_tcp_if_include=127.0.0.0/8 (environment)" in said.evidence
    # Open MPI's default leaves loopback out; "^vader" allows every other BTL but self and, with no IB device, openib
    params = {"btl": {"value": "^vader"}, "btl_tcp_if_exclude": {"value": "127.0.0.1/8,sppp", "source": "default"}}
    assert tcp_interfaces(params, {"lo": "127.0.0.1/8", "eth0": "10.0.0.2/24"}) == ["eth0"]
    assert allowed("^vader", ["ofi", "openib", "tcp", "vader", "self"], ("self",)) == ["ofi", "openib", "tcp"]
    assert describe("gloo", [{"schema": "hpcbench.provenance/1", "rank": 0}]) is None  # not recorded then
