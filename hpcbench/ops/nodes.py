"""The minicluster's nodes as the kernel sees them: a network namespace per node on a bridge, a veth each shaped
with tbf at both ends, cgroups (cpuset while there are cores enough, cpu for a quota), and everything found again
by name so that ``down`` removes exactly what ``up`` made. ``minicluster`` starts Slurm on top of them.

Names derive from the folder's slot S (0 for the default folder): the bridge ``hpcbS``, namespaces
``hpcbS-nodeK``, host-side veths ``hpcbSnK``, cgroups ``hpcbenchS/nodeK``, /etc/netns/hpcbS-nodeK (the hosts
file each node sees), addresses 10.77.S.0/24 with no route anywhere else.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import time
import zlib
from dataclasses import dataclass
from pathlib import Path

from hpcbench import proc
from hpcbench.errors import ClusterError, ConfigError
from hpcbench.workloads.affinity import parse_cpu_list

DEFAULT_PATH = "/var/tmp/hpcbench-minicluster"
IFACE = "eth0"  # the node's end of its veth, as jobs see it
# Jumbo frames, as HPC Ethernet fabrics run: at 1500 bytes the headers alone hold a TCP stream to 95.6% of the rate
# (1448 of every 1514 bytes the tbf counts), and the 4 nodes' packets cost the 2 CPUs they share. Horovod-MPI's
# 8 MiB allreduce over 4 nodes at 100 Mbit/s reached 83-87% of the link at 1500, 88-91% at 9000.
MTU = 9000
CGROUP = Path("/sys/fs/cgroup")
NETNS_ETC = Path("/etc/netns")
CFS_PERIOD_US = 100_000
# slurmctld's port by slot: 16817 for the default folder, 17101-17299 for the others (clear of the ports of older
# miniclusters' slurmd, 17001-17002, and of the jobs' 20000-31999: workloads/distenv.py)
CTLD_PORTS = (16817, *range(17101, 17300))
LINK_SOURCE = "shaped link of the minicluster"  # how report and explain name the peak's source


def must(argv: list[str], env: dict[str, str] | None = None) -> None:
    """Run a command that must succeed (a daemon that forks itself away, mungekey, ip, tc)."""
    ran = proc.run(argv, env=env)
    if not ran.ok:
        raise ClusterError(f"{' '.join(argv)[:200]} failed: {ran.why()}", hint="see the logs under the minicluster folder")


def parse_rate(text: str) -> int:
    """Bits per second of a tc-style rate: 1gbit, 100mbit, 500kbit, 20Mbit (case-insensitive)."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([kmg]?)(bit|bps)?\s*", text.lower())
    if not m or not m.group(3) or float(m.group(1)) <= 0:
        raise ConfigError(f"link rate {text!r} is not a rate such as 1gbit, 100mbit or 500kbit")
    bits = float(m.group(1)) * {"": 1, "k": 1e3, "m": 1e6, "g": 1e9}[m.group(2)]
    if m.group(3) == "bps":
        bits *= 8  # tc's "bps" is bytes per second
    return int(bits)


@dataclass(frozen=True)
class Shape:
    """What ``up`` was asked for, kept in the folder so that status, degrade, restore and down know it."""
    nodes: int = 2
    link_bps: int | None = None  # None: unshaped
    cpusets: bool = True  # each node has cores of its own (False when there are more nodes than cores)

    @property
    def names(self) -> list[str]:
        return [f"node{k}" for k in range(1, self.nodes + 1)]


@dataclass(frozen=True)
class Layout:
    root: Path

    conf = property(lambda self: self.root / "slurm.conf")
    state = property(lambda self: self.root / "state")
    logs = property(lambda self: self.root / "log")
    run = property(lambda self: self.root / "run")
    tmp = property(lambda self: self.root / "tmp")
    munge_mark = property(lambda self: self.root / "run" / "munged.started-by-hpcbench")
    shape_file = property(lambda self: self.root / "cluster.json")
    links = property(lambda self: self.root / "links.toml")
    profile = property(lambda self: self.root / "minicluster.toml")

    @property
    def slot(self) -> int:
        """0 for the default folder, else 1-199 from the folder's path: names, subnet and port derive from it."""
        return 0 if str(self.root) == DEFAULT_PATH else 1 + zlib.crc32(str(self.root).encode()) % (len(CTLD_PORTS) - 1)

    @property
    def ctld_port(self) -> int:
        return CTLD_PORTS[self.slot]

    bridge = property(lambda self: f"hpcb{self.slot}")
    head_addr = property(lambda self: f"10.77.{self.slot}.1")

    def netns(self, node: str) -> str:
        return f"hpcb{self.slot}-{node}"

    def veth(self, node: str) -> str:
        return f"hpcb{self.slot}n{node.removeprefix('node')}"

    def addr(self, node: str) -> str:
        return f"10.77.{self.slot}.{10 + int(node.removeprefix('node'))}"

    def cgroup(self, controller: str, node: str | None = None) -> Path:
        top = CGROUP / controller / f"hpcbench{self.slot}"
        return top / node if node else top

    def ctld_pid(self) -> Path:
        return self.run / "slurmctld.pid"

    def slurmd_pid(self, node: str) -> Path:
        return self.run / f"slurmd-{node}.pid"

    def slurmd_nodes(self) -> list[str]:
        """Nodes with a pid file: also those of a cluster started by an older hpcbench or another shape."""
        return sorted(p.stem.removeprefix("slurmd-") for p in self.run.glob("slurmd-*.pid"))

    def fresh(self, shape: Shape) -> None:
        """Its folders, with an empty controller state (job ids start at 1 again) and empty slurmd spools and
        TmpFS: a step that died there left its PMIx socket (spool: stepd.slurm.pmix.15.0) or folder (TmpFS:
        spmix_appdir_0_15.0), and the next job 15's step could not make its own."""
        per_node = [d / n for d in (self.root / "spool", self.tmp) for n in shape.names]
        for d in (self.state, self.logs, self.run, *per_node):
            d.mkdir(parents=True, exist_ok=True)
        for stale in [*self.state.iterdir(), *(p for d in per_node for p in d.iterdir())]:
            shutil.rmtree(stale) if stale.is_dir() else stale.unlink()


def host_cpus() -> list[int]:
    return sorted(os.sched_getaffinity(0))


def node_cpus(shape: Shape) -> dict[str, list[int]]:
    """Each node's own cores while there are enough (cores split evenly, the rest unused); {} when shared."""
    cpus = host_cpus()
    if not shape.cpusets or shape.nodes > len(cpus):
        return {}
    each = len(cpus) // shape.nodes
    return {n: cpus[i * each:(i + 1) * each] for i, n in enumerate(shape.names)}


def slurm_binds(shape: Shape) -> bool:
    """Whether Slurm's task/affinity can bind here. It numbers a node's CPUs from the host's whole topology,
    whatever cpuset the node is in: on node2 of two its mask for the first task is CPU 0, outside node2's cpuset,
    and the step fails ("task_g_set_affinity: Invalid argument"). A node that has every CPU of the host (one node,
    or nodes sharing CPUs) has no such gap; the host's whole topology is its online CPUs, not this process's own
    (a container's cpuset)."""
    try:
        online = sorted(parse_cpu_list(Path("/sys/devices/system/cpu/online").read_text()))
    except OSError:
        online = host_cpus()
    return all(sorted(cpus) == online for cpus in node_cpus(shape).values())


def _tbf(dev: str, bps: int, netns: str | None = None) -> list[str]:
    # burst: 1 ms of the rate, at least 16 KB (below that tbf cannot reach the rate at the kernel's timer granularity).
    # A real link banks no credit: with 10 ms of it (125 KB at 100 Mbit/s) a training step's 87 KB gradient exchange
    # passed at memory speed after each idle compute phase, and busbw rose by what was banked in an allreduce's gaps.
    # latency bounds the queue, as a switch port's buffer does.
    burst = max(16 * 1024, bps // 8 // 1000)
    argv = ["tc", "qdisc", "replace", "dev", dev, "root", "tbf", "rate", f"{bps}bit", "burst", str(burst),
            "latency", "50ms"]
    return ["ip", "netns", "exec", netns, *argv] if netns else argv


def shape_link(lay: Layout, node: str, bps: int | None) -> None:
    """tbf at both ends of the node's veth: the host end shapes what the node receives, its eth0 what it sends."""
    if bps is None:
        proc.run(["tc", "qdisc", "del", "dev", lay.veth(node), "root"])
        proc.run(["ip", "netns", "exec", lay.netns(node), "tc", "qdisc", "del", "dev", IFACE, "root"])
        return
    must(_tbf(lay.veth(node), bps))
    must(_tbf(IFACE, bps, lay.netns(node)))


def _hosts_file(lay: Layout, shape: Shape, host: str) -> str:
    lines = ["127.0.0.1 localhost", f"{lay.head_addr} {host}"]
    return "\n".join(lines + [f"{lay.addr(n)} {n}" for n in shape.names]) + "\n"


def make_network(lay: Layout, shape: Shape, host: str) -> None:
    must(["ip", "link", "add", lay.bridge, "type", "bridge"])
    must(["ip", "link", "set", lay.bridge, "alias", f"hpcbench minicluster {lay.root}"])
    must(["ip", "link", "set", lay.bridge, "mtu", str(MTU)])  # set, so that it does not follow its first port's
    must(["ip", "addr", "add", f"{lay.head_addr}/24", "dev", lay.bridge])
    must(["ip", "link", "set", lay.bridge, "up"])
    for n in shape.names:
        ns = lay.netns(n)
        # Over /etc/hosts inside the node (as `ip netns exec` does): node names resolve inside the cluster.
        (NETNS_ETC / ns).mkdir(parents=True, exist_ok=True)
        (NETNS_ETC / ns / "hosts").write_text(_hosts_file(lay, shape, host))
        must(["ip", "netns", "add", ns])
        must(["ip", "link", "add", lay.veth(n), "mtu", str(MTU), "type", "veth", "peer", "name", IFACE, "mtu", str(MTU),
              "netns", ns])
        must(["ip", "link", "set", lay.veth(n), "master", lay.bridge, "up"])
        must(["ip", "-n", ns, "addr", "add", f"{lay.addr(n)}/24", "dev", IFACE])
        must(["ip", "-n", ns, "link", "set", IFACE, "up"])
        must(["ip", "-n", ns, "link", "set", "lo", "up"])
        shape_link(lay, n, shape.link_bps)


def made(lay: Layout) -> dict[str, list[str]]:
    """What of this slot exists now, found by name (not from the folder, which may be gone): for down and its test."""
    ns = [line.split()[0] for line in proc.run(["ip", "netns", "list"]).stdout.splitlines() if line.strip()]
    links = re.findall(r"^\d+: ([^:@]+)", proc.run(["ip", "-o", "link", "show"]).stdout, flags=re.M)
    prefix = f"hpcb{lay.slot}"
    return {
        "namespaces": [n for n in ns if n.startswith(prefix + "-")],
        "links": [n for n in links if n == lay.bridge or re.fullmatch(rf"{prefix}n\d+", n)],
        "cgroups": [str(p) for c in ("cpuset", "cpu") if (p := lay.cgroup(c)).exists()],
        "etc": [str(p) for p in sorted(NETNS_ETC.glob(f"{prefix}-*"))] if NETNS_ETC.is_dir() else [],
    }


def leftovers(root: Path) -> list[str]:
    """Everything of this cluster still on the host: empty after ``down``."""
    return [f"{kind}: {x}" for kind, xs in made(Layout(Path(root).resolve())).items() for x in xs]


def _pids_of(lay: Layout, made: dict[str, list[str]]) -> set[int]:
    pids: set[int] = set()
    for ns in made["namespaces"]:
        pids.update(int(p) for p in proc.run(["ip", "netns", "pids", ns]).stdout.split() if p.isdigit())
    for top in made["cgroups"]:
        for tasks in Path(top).rglob("tasks"):
            try:
                pids.update(int(p) for p in tasks.read_text().split())
            except OSError:
                pass
    return pids - {os.getpid()}


def unmake(lay: Layout) -> list[str]:
    found = made(lay)
    if not any(found.values()):
        return []
    # Processes left inside (a job step that outlived its slurmd) were started by this cluster: end them first,
    # or a namespace and its cgroups cannot go.
    for sig in (signal.SIGTERM, signal.SIGKILL):
        pids = _pids_of(lay, found)
        for pid in pids:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        if pids:
            time.sleep(1)
    for ns in found["namespaces"]:
        proc.run(["ip", "netns", "del", ns])  # takes its end of the veth, and so the pair and both qdiscs
    for link in found["links"]:
        proc.run(["ip", "link", "del", link])
    for top in found["cgroups"]:
        for d in sorted(Path(top).rglob("*"), key=lambda p: -len(p.parts)) + [Path(top)]:
            if d.is_dir():
                try:
                    d.rmdir()
                except OSError:
                    pass
    for etc in found["etc"]:
        shutil.rmtree(etc, ignore_errors=True)
    if NETNS_ETC.is_dir() and not any(NETNS_ETC.iterdir()):
        NETNS_ETC.rmdir()  # made by the first up, when no tool had made it
    return [f"removed {len(found['namespaces'])} namespace(s), {len(found['links'])} link(s), "
            f"{len(found['cgroups'])} cgroup tree(s) and {len(found['etc'])} /etc/netns folder(s)"]


def _cg_write(path: Path, value: str) -> None:
    try:
        path.write_text(value)
    except OSError as e:
        raise ClusterError(f"cannot write {value!r} to {path}: {e.strerror}",
                           hint="the cgroup v1 cpu and cpuset controllers must be mounted under /sys/fs/cgroup")


def make_cgroups(lay: Layout, shape: Shape) -> None:
    own = node_cpus(shape)
    top = lay.cgroup("cpuset")
    if own:
        top.mkdir(exist_ok=True)
        _cg_write(top / "cpuset.cpus", (CGROUP / "cpuset" / "cpuset.cpus").read_text().strip())
        _cg_write(top / "cpuset.mems", (CGROUP / "cpuset" / "cpuset.mems").read_text().strip())
    lay.cgroup("cpu").mkdir(exist_ok=True)
    for n in shape.names:
        lay.cgroup("cpu", n).mkdir(exist_ok=True)
        if own:
            d = lay.cgroup("cpuset", n)
            d.mkdir(exist_ok=True)
            _cg_write(d / "cpuset.cpus", ",".join(map(str, own[n])))
            _cg_write(d / "cpuset.mems", (top / "cpuset.mems").read_text().strip())


def set_quota(lay: Layout, node: str, fraction: float | None) -> None:
    d = lay.cgroup("cpu", node)
    cpus = len(cpuset_of(lay, node))
    _cg_write(d / "cpu.cfs_period_us", str(CFS_PERIOD_US))
    _cg_write(d / "cpu.cfs_quota_us", "-1" if fraction is None else str(max(1000, int(fraction * CFS_PERIOD_US * cpus))))


def cpuset_of(lay: Layout, node: str) -> list[int]:
    f = lay.cgroup("cpuset", node) / "cpuset.cpus"
    return sorted(parse_cpu_list(f.read_text())) if f.exists() else host_cpus()


def tbf_rate(lay: Layout, node: str) -> int | None:
    """The rate tbf shapes the node's sending end to, as the kernel says (None: unshaped)."""
    out = proc.run(["ip", "netns", "exec", lay.netns(node), "tc", "-j", "qdisc", "show", "dev", IFACE]).stdout
    try:
        qdiscs = json.loads(out or "[]")
    except ValueError:
        return None
    for q in qdiscs:
        if q.get("kind") == "tbf":
            return int(q.get("options", {}).get("rate", 0)) * 8 or None  # tc -j gives bytes per second
    return None


def render_links(lay: Layout, shape: Shape, rates: dict[str, int | None]) -> str:
    """The links.toml that jobs read (HPCBENCH_LINKS): each node's interface and its shaped rate, its peak."""
    out = [f"# written by hpcbench minicluster: each node's link and the rate tbf shapes it to (its peak). A node without a rate is unshaped.\n"]
    for n in shape.names:
        out.append(f'[{n}]\ninterface = "{IFACE}"\naddress = "{lay.addr(n)}"\n')
        if rates.get(n):
            out.append(f"bits_per_second = {rates[n]}\nsource = \"{LINK_SOURCE}\"\n")
        out.append("\n")
    return "".join(out)
