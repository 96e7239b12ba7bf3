"""Provenance on this machine, binding checks, InfiniBand counters (a fake /sys: no IB here), and `hpcbench env`."""
from __future__ import annotations

import json
import os
import platform
import socket
import subprocess

from conftest import write

from hpcbench.rundir import PointPaths
from hpcbench.workloads import provenance
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
    assert doc["schema"] == "hpcbench.provenance/1"
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
    topo = provenance.CpuTopology.read(fake_sys(tmp_path, {0: [0, 1, 2, 3], 1: [4, 5, 6, 7]}))
    env = {"SLURM_CPU_BIND_TYPE": "mask_cpu:", "SLURM_CPU_BIND_LIST": "0xF,0xF0"}
    ok = provenance.check_affinity({4, 5, 6, 7}, 1, env, topo)
    assert ok["matches"] is True and ok["sockets"] == [1] and ok["requested"] == "slurm mask_cpu:0xF,0xF0"
    bad = provenance.check_affinity({0, 1, 2, 3, 4}, 1, env, topo)
    assert bad["matches"] is False and bad["expected_cpus"] == [4, 5, 6, 7] and "[0,1,2,3,4]" in bad["detail"]
    assert provenance.check_affinity({0, 1}, 0, {"SLURM_CPU_BIND_TYPE": "none"}, topo)["matches"] is True


def test_openmpi_binding_is_one_unit_per_rank(tmp_path):
    topo = provenance.CpuTopology.read(fake_sys(tmp_path, {0: [0, 1], 1: [2, 3]}))
    env = {"OMPI_COMM_WORLD_RANK": "0", "SLURM_CPU_BIND_TYPE": "none",
           "OMPI_MCA_hwloc_base_binding_policy": "socket"}
    assert provenance.check_affinity({2, 3}, 0, env, topo)["matches"] is True
    assert provenance.check_affinity({2}, 0, env, topo)["matches"] is False  # part of a socket
    assert provenance.check_affinity({0, 1, 2, 3}, 0, env, topo)["matches"] is False  # two sockets
    core = {**env, "OMPI_MCA_hwloc_base_binding_policy": "core"}
    assert provenance.check_affinity({3}, 0, core, topo)["matches"] is True
    assert provenance.check_affinity({2, 3}, 0, core, topo)["matches"] is False


def test_affinity_summary_names_the_rank_that_does_not_match():
    good = {"rank": 0, "slurm_node": "node1", "affinity": {"matches": True, "requested": "slurm mask_cpu:0x1"}}
    bad = {"rank": 1, "slurm_node": "node2", "affinity": {"matches": False, "requested": "slurm mask_cpu:0x1",
                                                          "detail": "requested x, got y"}}
    assert provenance.affinity_summary([good, good]) == (True, "2/2 ranks match the requested binding (slurm mask_cpu)")
    ok, detail = provenance.affinity_summary([good, bad])
    assert ok is False and detail == "rank 1 (node2): requested x, got y"
    assert provenance.affinity_summary([{"rank": 0, "affinity": {"matches": None}}])[0] is None


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
    assert info["provenance"]["schema"] == "hpcbench.provenance/1"
    rows = {(b["framework"], b["backend"], b["device"]): b for b in info["backends"]}
    assert rows[("ddp", "gloo", "cpu")]["runs_here"] is True
    assert rows[("horovod", "mpi", "cpu")]["runs_here"] == ("mpi" in caps.horovod_tensor_ops)
    assert rows[("horovod", "oneccl", "cpu")]["runs_here"] == ("ccl" in caps.horovod_tensor_ops)
