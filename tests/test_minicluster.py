"""The throwaway Slurm of namespaced nodes (the suite's own): a full down/up cycle, idempotent both ways, that leaves
nothing behind when down."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from hpcbench.ops import nodes


@pytest.mark.slurm
def test_down_up_cycle_is_idempotent(cli, slurm_cluster):
    before = cli("minicluster", "status")
    assert before.returncode == 0 and "minicluster up" in before.stdout
    assert re.search(r"node1: idle", before.stdout) and re.search(r"node2: idle", before.stdout)

    down = cli("minicluster", "down")
    assert down.returncode == 0 and "stopped slurmctld" in down.stdout
    assert nodes.leftovers(slurm_cluster) == []
    assert "already down" in cli("minicluster", "down").stdout
    status = cli("minicluster", "status")
    assert status.returncode == 1 and "minicluster down" in status.stdout

    # a step that died leaves its PMIx socket in the slurmd's spool; job ids start at 1 again after `up`, and the
    # next job of that id could not bind it ("Address already in use"): up starts with empty spools
    # (its TmpFS folder, spmix_appdir_0_1.0, the same)
    stale = [slurm_cluster / "spool" / "node2" / "stepd.slurm.pmix.1.0", slurm_cluster / "tmp" / "node2" / "spmix_appdir_0_1.0"]
    for s in stale:
        s.parent.mkdir(parents=True, exist_ok=True)
        s.write_text("")
    up = cli("minicluster", "up", timeout=120)
    assert up.returncode == 0, up.stderr
    assert not any(s.exists() for s in stale)
    assert "started slurmctld" in up.stdout and "config: " in up.stdout and "logs: " in up.stdout
    assert "2 slurmd, each in its own network namespace" in up.stdout
    pids = re.findall(r"pid (\d+)", up.stdout)
    again = cli("minicluster", "up")
    assert "already up" in again.stdout and re.findall(r"pid (\d+)", again.stdout) == pids
    assert "node1: idle" in again.stdout and "node2: idle" in again.stdout
    # another minicluster's `down` may take /etc/slurm/slurm.conf away (it held the place first): `up` takes it back
    from hpcbench.ops.minicluster import SYSTEM_CONF

    assert SYSTEM_CONF.resolve() == (slurm_cluster / "slurm.conf").resolve(), up.stdout  # the fresh up took it
    SYSTEM_CONF.unlink()
    relinked = cli("minicluster", "up")
    assert "already up" in relinked.stdout and f"linked {SYSTEM_CONF}" in relinked.stdout, relinked.stdout
    assert SYSTEM_CONF.resolve() == (slurm_cluster / "slurm.conf").resolve()


def test_slurm_binds_only_where_a_node_has_every_cpu_of_the_host():
    """Slurm numbers a node's CPUs from the whole host, whatever its cpuset: task/affinity's first mask on node2 of
    two is CPU 0, outside node2's cpuset, and every step there fails. One node with all the CPUs binds as on a
    real node (the diagnosis benchmark's binding scenarios need it); nodes sharing CPUs have no cpuset at all."""
    from hpcbench.ops.minicluster import render_conf

    lay = nodes.Layout(Path(nodes.DEFAULT_PATH))
    one, two, many = nodes.Shape(1), nodes.Shape(2), nodes.Shape(len(nodes.host_cpus()) + 1, cpusets=False)
    assert "TaskPlugin=task/affinity" in render_conf(lay, one, "host")
    assert "TaskPlugin=task/affinity" in render_conf(lay, many, "host")
    if len(nodes.host_cpus()) >= 2:  # two nodes, each with part of the host
        assert nodes.node_cpus(two)["node2"] != nodes.host_cpus()
        assert "TaskPlugin=task/none" in render_conf(lay, two, "host")
