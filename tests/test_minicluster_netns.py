"""The namespaced minicluster in a folder of its own (beside the suite's shared one): up, a job on each node, its
shaped links, degrade and restore, and a down that leaves nothing behind."""
from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from hpcbench.ops import nodes


def _sh(*argv: str, env: dict[str, str] | None = None, timeout: float = 60) -> str:
    return subprocess.run(argv, capture_output=True, text=True, check=False, timeout=timeout,
                          env={**os.environ, **(env or {})}).stdout


# node1 sends 3 MB to node2 over a plain TCP socket, inside a two-node job: the time says the link's rate.
SEND = r"""
import os, socket, sys, time
n = 3_000_000
if os.environ["SLURM_PROCID"] == "1":
    s = socket.create_server(("0.0.0.0", 23456)); c, _ = s.accept(); got = 0
    while got < n:
        got += len(c.recv(1 << 16))
    c.sendall(b"k")
else:
    for _ in range(100):
        try:
            c = socket.create_connection(("node2", 23456)); break
        except OSError:
            time.sleep(0.1)
    t = time.monotonic(); c.sendall(b"x" * n); c.recv(1); print(f"SECONDS {time.monotonic() - t:.3f}")
"""


@pytest.mark.slurm
def test_namespaced_cluster_up_degrade_restore_down(cli, tmp_path):
    root = tmp_path / "mc"
    lay = nodes.Layout(root.resolve())
    env = {"SLURM_CONF": str(lay.conf)}
    try:
        up = cli("minicluster", "up", "--dir", str(root), "--nodes", "2", "--link", "100mbit", timeout=180)
        assert up.returncode == 0, up.stdout + up.stderr
        assert re.search(r"node1: idle 10\.77\.\d+\.11 \(hpcb\d+-node1\), link 100 Mbit/s", up.stdout), up.stdout
        assert "node2: idle" in up.stdout and f"SLURM_CONF={lay.conf}" in up.stdout
        # tbf at both ends of each veth: the host's end (what the node receives) and the node's eth0 (what it sends)
        assert "tbf" in _sh("tc", "qdisc", "show", "dev", lay.veth("node2"))
        assert "tbf" in _sh("ip", "netns", "exec", lay.netns("node2"), "tc", "qdisc", "show", "dev", "eth0")
        # jumbo frames end to end: the node's eth0, its veth's host end and the bridge
        for shown in (_sh("ip", "-n", lay.netns("node2"), "link", "show", "eth0"),
                      _sh("ip", "link", "show", lay.veth("node2")), _sh("ip", "link", "show", lay.bridge)):
            assert f" mtu {nodes.MTU} " in shown, shown
        assert 'bits_per_second = 100000000\nsource = "shaped link of the minicluster"' in lay.links.read_text()
        assert f'HPCBENCH_LINKS = "{lay.links}"' in lay.profile.read_text()

        # Each step runs in its node's namespaces: own hostname, own eth0 with its address, own cores.
        seen = _sh("srun", "-N2", "--ntasks-per-node=1", "sh", "-c",
                   "echo $(hostname) $(cat /sys/class/net/eth0/address) $(grep Cpus_allowed_list /proc/self/status)",
                   env=env)
        lines = sorted(seen.splitlines())
        assert [ln.split()[0] for ln in lines] == ["node1", "node2"], seen
        assert lines[0].split()[1] != lines[1].split()[1]  # two different eth0
        if len(os.sched_getaffinity(0)) >= 2:
            assert lines[0].split()[-1] != lines[1].split()[-1], seen  # cores of their own

        def send_seconds() -> float:
            out = _sh("srun", "-N2", "--ntasks-per-node=1", sys.executable, "-c", SEND, env=env, timeout=120)
            m = re.search(r"SECONDS ([\d.]+)", out)
            assert m, out
            return float(m.group(1))

        # 3 MB = 24 Mbit: about 0.24 s at 100 Mbit/s, 1.2 s at 20 Mbit/s.
        fast = send_seconds()
        degraded = cli("minicluster", "degrade", "node2", "--link", "20mbit", "--cpu", "0.5", "--dir", str(root))
        assert degraded.returncode == 0, degraded.stderr
        assert "node2: link shaped to 20 Mbit/s" in degraded.stdout and "CPU quota 50%" in degraded.stdout
        status = cli("minicluster", "status", "--dir", str(root)).stdout
        assert re.search(r"node2: idle .* link 20 Mbit/s, CPUs .*quota 0\.5 CPU", status), status
        assert re.search(r"node1: idle .* link 100 Mbit/s", status), status
        assert "bits_per_second = 20000000" in lay.links.read_text()
        slow = send_seconds()
        # never faster than the link allows (less a burst of tbf's bucket); a loaded host may make either slower
        assert fast > 0.2 and slow > 1.0 and slow > fast, (fast, slow)

        restored = cli("minicluster", "restore", "node2", "--dir", str(root))
        assert restored.returncode == 0 and "node2: link back to 100 Mbit/s" in restored.stdout
        assert (lay.cgroup("cpu", "node2") / "cpu.cfs_quota_us").read_text().strip() == "-1"
        assert "bits_per_second = 20000000" not in lay.links.read_text()

        # a running cluster of another shape is left alone (others may have jobs on it) unless --restart
        other = cli("minicluster", "up", "--dir", str(root), "--nodes", "3")
        assert other.returncode != 0 and "a minicluster of another shape is up" in other.stderr, other.stderr
        assert "--restart" in other.stderr and "node2: idle" in cli("minicluster", "status", "--dir", str(root)).stdout

        for bad in (("degrade", "node9", "--link", "1mbit"), ("degrade", "node1", "--link", "fast"),
                    ("degrade", "node1", "--cpu", "2"), ("degrade", "node1"), ("up", "--nodes", "9")):
            ran = cli("minicluster", *bad, "--dir", str(root))
            assert ran.returncode == 2 and len(ran.stderr.strip().splitlines()) == 1, (bad, ran.stderr)
    finally:
        down = cli("minicluster", "down", "--dir", str(root), timeout=120)
    assert down.returncode == 0 and "stopped slurmctld" in down.stdout, down.stdout + down.stderr
    # Nothing is left: no namespace, link, qdisc, cgroup or /etc/netns folder of this cluster's slot.
    assert nodes.leftovers(root) == []
    prefix = f"hpcb{lay.slot}"
    assert prefix not in _sh("ip", "netns", "list")
    assert not re.search(rf"\b{prefix}(n\d+)?\b", _sh("ip", "link") + _sh("tc", "qdisc"))
    assert not lay.cgroup("cpu").exists() and not lay.cgroup("cpuset").exists()
    assert "already down" in cli("minicluster", "down", "--dir", str(root)).stdout
