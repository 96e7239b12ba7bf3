from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from hpcbench.ops import minicluster, nodes
from hpcbench.workloads.distenv import JOB_PORT_SHELL, expand_hostlist, from_environ, job_port, resolve_addr, side_port

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("expr, hosts", [
    ("node1", ["node1"]),
    ("node[1-3,7]", ["node1", "node2", "node3", "node7"]),
    ("gpu-a[08-10],login", ["gpu-a08", "gpu-a09", "gpu-a10", "login"]),
    ("r1n[1-2]-ib", ["r1n1-ib", "r1n2-ib"]),
])
def test_expand_hostlist(expr, hosts):
    assert expand_hostlist(expr) == hosts


def test_slurm_variables():
    env = from_environ({"SLURM_PROCID": "3", "SLURM_NTASKS": "4", "SLURM_LOCALID": "1", "SLURM_NODEID": "1",
                        "SLURM_JOB_NUM_NODES": "2", "SLURM_JOB_ID": "1234", "MASTER_ADDR": "10.0.0.1"})
    assert (env.rank, env.world_size, env.local_rank, env.node_rank, env.nnodes) == (3, 4, 1, 1, 2)
    assert env.launcher == "slurm" and env.master_addr == "10.0.0.1"
    assert env.master_port == job_port("1234") != job_port("1235")  # concurrent jobs differ


def test_openmpi_variables_give_the_nodes_index():
    """OMPI_COMM_WORLD_NODE_RANK is the rank among all processes on the node (mpirun gives rank 1 of a one-node job
    node rank 1), not the node's index, which Horovod's Gloo rendezvous takes as the host."""
    env = from_environ({"OMPI_COMM_WORLD_RANK": "3", "OMPI_COMM_WORLD_SIZE": "4", "OMPI_COMM_WORLD_LOCAL_RANK": "1",
                        "OMPI_COMM_WORLD_LOCAL_SIZE": "2", "OMPI_COMM_WORLD_NODE_RANK": "1", "MASTER_ADDR": "h"})
    assert (env.rank, env.world_size, env.local_rank, env.node_rank, env.launcher) == (3, 4, 1, 1, "openmpi")
    env = from_environ({"OMPI_COMM_WORLD_RANK": "1", "OMPI_COMM_WORLD_SIZE": "2", "OMPI_COMM_WORLD_LOCAL_RANK": "1",
                        "OMPI_COMM_WORLD_LOCAL_SIZE": "2", "OMPI_COMM_WORLD_NODE_RANK": "1", "MASTER_ADDR": "h"})
    assert env.node_rank == 0


def test_job_ports_stay_below_the_ephemeral_range():
    # A listening port in the ephemeral range can already be held by an outgoing connection
    # (a Horovod Gloo rendezvous on 40035 failed with EADDRINUSE in CI).
    low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    slurm_ports = {6817, 6818, 6819, minicluster.SLURMD_PORT, *nodes.CTLD_PORTS}
    for job in range(0, 200_000, 7):
        master = job_port(str(job))
        side = side_port(master)
        assert 1024 <= master < low and 1024 <= side < low and side != master
        assert not {master, side} & slurm_ports
    assert side_port(29500) < low  # torchrun's default MASTER_PORT, too


def test_job_scripts_derive_the_same_port_as_the_ranks():
    # The torchrun prelude and sbatch/ddp_cifar10_2node.sh compute the port in bash before any Python runs.
    line = re.search(r"^RDZV_PORT=\$\{RDZV_PORT:-(.*)\}$", (REPO / "sbatch/ddp_cifar10_2node.sh").read_text(), re.MULTILINE)
    for job in ("7", "40035", "123456"):
        for expr in (JOB_PORT_SHELL, line.group(1)):
            out = subprocess.run(["bash", "-c", f"echo {expr}"], env={"SLURM_JOB_ID": job},
                                 capture_output=True, text=True, check=True).stdout
            assert int(out) == job_port(job)


def test_openmpi_rank_wins_over_slurm_procid():
    # Under mpirun in an allocation, SLURM_PROCID belongs to the orted, not to the rank.
    env = from_environ({"SLURM_PROCID": "0", "SLURM_NTASKS": "2", "OMPI_COMM_WORLD_RANK": "3",
                        "OMPI_COMM_WORLD_SIZE": "4", "OMPI_COMM_WORLD_LOCAL_RANK": "1",
                        "OMPI_COMM_WORLD_LOCAL_SIZE": "2", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500"})
    assert (env.rank, env.world_size, env.local_rank, env.node_rank) == (3, 4, 1, 1)
    assert env.launcher == "openmpi" and env.master_port == 29500


def test_single_process_defaults():
    env = from_environ({})
    assert (env.rank, env.world_size, env.master_addr, env.launcher) == (0, 1, "127.0.0.1", "single")


def test_unresolvable_node_name_falls_back_to_scontrol_nodeaddr(slurm_cluster):
    # node1 is not in DNS or in this namespace's /etc/hosts (only its own nodes see it); slurmctld knows its NodeAddr.
    from hpcbench.ops.nodes import Layout

    addr = Layout(slurm_cluster).addr("node1")
    assert resolve_addr("node1") == addr
    env = from_environ({"SLURM_PROCID": "0", "SLURM_NTASKS": "2", "SLURM_JOB_NODELIST": "node[1-2]",
                        "SLURM_JOB_ID": "7"})
    assert env.master_addr == addr
    with pytest.raises(RuntimeError, match="not in DNS and not a Slurm node"):
        resolve_addr("no-such-node-x")
