from __future__ import annotations

import pytest

from hpcbench.workloads.distenv import expand_hostlist, from_environ, resolve_addr


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
    assert env.master_port == 20000 + 1234  # derived from the job id, so concurrent jobs differ


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
    # node1 is not in DNS or /etc/hosts; only slurmctld knows its NodeAddr.
    assert resolve_addr("node1") == "127.0.0.1"
    env = from_environ({"SLURM_PROCID": "0", "SLURM_NTASKS": "2", "SLURM_JOB_NODELIST": "node[1-2]",
                        "SLURM_JOB_ID": "7"})
    assert env.master_addr == "127.0.0.1"
    with pytest.raises(RuntimeError, match="not in DNS and not a Slurm node"):
        resolve_addr("no-such-node-x")
