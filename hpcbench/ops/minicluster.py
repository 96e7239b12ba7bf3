"""A throwaway Slurm on this machine with a real network: ``hpcbench minicluster up|down|status|degrade|restore``.

Each node is its own network and UTS namespace (hostname ``nodeK``, address 10.77.S.(10+K)) joined to a bridge
by a veth pair; ``--link RATE`` shapes each veth with ``tbf`` at both ends (the node's send and receive
direction). slurmctld stays in the host's namespace and listens on the bridge's address; each slurmd runs inside
its node's namespaces, so every job step and rank it starts sends its inter-node bytes over the shaped link, and
/sys/class/net inside a job shows that node's own eth0. While there are at least as many cores as nodes each node
gets its own cores (cgroup v1 cpuset); ``degrade NODE --cpu F`` caps a node with a CFS quota.

Everything a cluster makes is named from its folder's slot S (0 for the default folder): the bridge ``hpcbS``,
namespaces ``hpcbS-nodeK``, host-side veths ``hpcbSnK``, cgroups ``hpcbenchS/nodeK``, /etc/netns/hpcbS-nodeK
(the hosts file ``ip netns exec`` puts over /etc/hosts), and slurmctld's port; so clusters in different folders
run side by side and ``down`` removes exactly what its ``up`` made. Traffic stays on 10.77.S.0/24: the namespaces
have no route anywhere else. Accounting is off (no slurmdbd), so sacct fails; hpcbench reads squeue instead.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import time
import zlib
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

from hpcbench import proc
from hpcbench.errors import ClusterError, ConfigError

DEFAULT_PATH = "/var/tmp/hpcbench-minicluster"
DEFAULT_DIR = Path(os.environ.get("HPCBENCH_MINICLUSTER_DIR", DEFAULT_PATH))
MAX_NODES = 8
SLURMD_PORT = 6818  # every slurmd has a namespace of its own, so they all listen on the same port
SYSTEM_CONF = Path("/etc/slurm/slurm.conf")
MARK = "# written by hpcbench minicluster"
IFACE = "eth0"  # the node's end of its veth, as jobs see it
LINK_SOURCE = "shaped link of the minicluster"
CGROUP = Path("/sys/fs/cgroup")
NETNS_ETC = Path("/etc/netns")
CFS_PERIOD_US = 100_000


def parse_rate(text: str) -> int:
    """Bits per second of a tc-style rate: 1gbit, 100mbit, 500kbit, 20Mbit (case-insensitive)."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([kmg]?)(bit|bps)?\s*", text.lower())
    if not m or not m.group(3) or float(m.group(1)) <= 0:
        raise ConfigError(f"link rate {text!r} is not a rate such as 1gbit, 100mbit or 500kbit")
    bits = float(m.group(1)) * {"": 1, "k": 1e3, "m": 1e6, "g": 1e9}[m.group(2)]
    if m.group(3) == "bps":
        bits *= 8  # tc's "bps" is bytes per second
    return int(bits)


def rate_words(bps: int) -> str:
    """100000000 -> '100 Mbit/s' (how the link is named to people)."""
    for unit, scale in (("Gbit/s", 1e9), ("Mbit/s", 1e6), ("kbit/s", 1e3)):
        if bps >= scale:
            return f"{bps / scale:g} {unit}"
    return f"{bps} bit/s"


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
        return 0 if str(self.root) == DEFAULT_PATH else 1 + zlib.crc32(str(self.root).encode()) % 199

    @property
    def ctld_port(self) -> int:
        return 16817 if self.slot == 0 else 17100 + self.slot  # 17101-17299: clear of the default 16817 and 17001-17002

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


def _topology() -> tuple[int, int, int]:
    """(sockets, cores per socket, threads per core) of this host, as slurmd would detect them."""
    cpus = os.cpu_count() or 1
    packages = set()
    for d in Path("/sys/devices/system/cpu").glob("cpu[0-9]*/topology/physical_package_id"):
        try:
            packages.add(d.read_text().strip())
        except OSError:
            pass
    sockets = max(1, len(packages))
    if cpus % sockets:
        sockets = 1
    return sockets, cpus // sockets, 1


def _host_cpus() -> list[int]:
    return sorted(os.sched_getaffinity(0))


def node_cpus(shape: Shape) -> dict[str, list[int]]:
    """Each node's own cores while there are enough (cores split evenly, the rest unused); {} when shared."""
    cpus = _host_cpus()
    if not shape.cpusets or shape.nodes > len(cpus):
        return {}
    each = len(cpus) // shape.nodes
    return {n: cpus[i * each:(i + 1) * each] for i, n in enumerate(shape.names)}


def render_conf(lay: Layout, shape: Shape, host: str) -> str:
    # Slurm declares every node with the host's CPU count even where a cpuset gives it fewer: the suite's
    # two-ranks-per-node points still fit, and those ranks share the node's cores (status says how many).
    sockets, cores, threads = _topology()
    cpus = sockets * cores * threads
    nodes = "\n".join(
        f"NodeName={n} NodeHostname={n} NodeAddr={lay.addr(n)} Port={SLURMD_PORT} CPUs={cpus} Sockets={sockets} "
        f"CoresPerSocket={cores} ThreadsPerCore={threads} RealMemory=1024 State=UNKNOWN" for n in shape.names)
    return f"""{MARK}; remove with: hpcbench minicluster down --dir {lay.root}
ClusterName=hpcbench{lay.slot}
SlurmctldHost={host}({lay.head_addr})
SlurmctldPort={lay.ctld_port}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
StateSaveLocation={lay.state}
SlurmdSpoolDir={lay.root}/spool/%n
SlurmctldPidFile={lay.ctld_pid()}
SlurmdPidFile={lay.run}/slurmd-%n.pid
SlurmctldLogFile={lay.logs}/slurmctld.log
SlurmdLogFile={lay.logs}/slurmd-%n.log
# No Slurm cgroups in containers: track processes by their parent. The node's own cgroups (cpuset, cpu quota) are
# hpcbench's, made before its slurmd starts, so every job step inherits them; where a cpuset confines the node,
# Slurm binds nothing (its CPU numbers are 0..n-1 on every node, not the cores the cpuset gives).
ProctrackType=proctrack/linuxproc
TaskPlugin={"task/none" if node_cpus(shape) else "task/affinity"}
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
MpiDefault=none
# The nodes share one filesystem, so PMIx needs a separate temporary folder per node.
TmpFS={lay.tmp}/%n
ReturnToService=2
SlurmdParameters=config_overrides
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
KillWait=5
MinJobAge=600
{nodes}
PartitionName=debug Nodes=node[1-{shape.nodes}] Default=YES MaxTime=INFINITE State=UP
"""


def render_links(lay: Layout, shape: Shape, rates: dict[str, int | None]) -> str:
    """The links.toml that jobs read (HPCBENCH_LINKS): each node's interface and its shaped rate, its peak."""
    out = [f"{MARK}: each node's link and the rate tbf shapes it to (its peak). A node without a rate is unshaped.\n"]
    for n in shape.names:
        out.append(f'[{n}]\ninterface = "{IFACE}"\naddress = "{lay.addr(n)}"\n')
        if rates.get(n):
            out.append(f"bits_per_second = {rates[n]}\nsource = \"{LINK_SOURCE}\"\n")
        out.append("\n")
    return "".join(out)


def render_profile(lay: Layout, shape: Shape, repo_profile: Path) -> str:
    """The cluster profile of this cluster: the repository's minicluster.toml with this folder's links file
    and the real node count (module folders made absolute, as the copy lives elsewhere)."""
    text = repo_profile.read_text()
    text = re.sub(r'^module_use = \["\.\./modules"\]', f'module_use = ["{repo_profile.parent.parent / "modules"}"]',
                  text, flags=re.M)
    text = re.sub(r"^max_nodes = \d+", f"max_nodes = {shape.nodes}", text, flags=re.M)
    return re.sub(r'^HPCBENCH_LINKS = ".*"', f'HPCBENCH_LINKS = "{lay.links}"', text, flags=re.M)


def _alive(pidfile: Path, name: str) -> int | None:
    """The pid in ``pidfile`` if that process is still ``name`` (a stale file may name a reused pid)."""
    try:
        pid = int(pidfile.read_text().strip())
        comm = Path(f"/proc/{pid}/comm").read_text().strip()
        zombie = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, ValueError, IndexError):
        return None
    return pid if comm.startswith(name) and not zombie else None


def _pgrep(name: str) -> bool:
    return proc.run(["pgrep", "-x", name]).ok


def _start(argv: list[str], env: dict[str, str] | None = None) -> None:
    """Run a command that must succeed (a daemon that forks itself away, mungekey, ip, tc)."""
    ran = proc.run(argv, env=env)
    if not ran.ok:
        raise ClusterError(f"{' '.join(argv)[:200]} failed: {ran.why()}", hint="see the logs under the minicluster folder")


def _env(lay: Layout) -> dict[str, str]:
    return {**os.environ, "SLURM_CONF": str(lay.conf)}


def _require_root_and_tools() -> None:
    if os.geteuid() != 0:
        raise ClusterError("minicluster needs root (it makes network namespaces and starts munged and Slurm)",
                           hint="run it with sudo, or as root in a container")
    missing = [t for t in ("slurmctld", "slurmd", "munged", "scontrol", "sinfo", "ip", "tc", "unshare")
               if not shutil.which(t)]
    if missing:
        raise ClusterError(f"not installed: {', '.join(missing)}",
                           hint="apt-get install slurm-wlm munge iproute2 util-linux (scripts/test.sh does this)")


def _daemons(lay: Layout) -> dict[str, int | None]:
    out = {"slurmctld": _alive(lay.ctld_pid(), "slurmctld")}
    out.update({f"slurmd {n}": _alive(lay.slurmd_pid(n), "slurmd") for n in lay.slurmd_nodes()})
    return out


def _ensure_munge(lay: Layout) -> str:
    if _pgrep("munged"):
        return "munged already running"
    key = Path("/etc/munge/munge.key")
    if not key.exists():
        _start(["mungekey", "--create"])
        shutil.chown(key, "munge", "munge")
        key.chmod(0o400)
    # munged refuses to start when its folders or files belong to someone else (e.g. root).
    for d in (Path("/run/munge"), Path("/var/log/munge"), Path("/var/lib/munge")):
        d.mkdir(parents=True, exist_ok=True)
        for p in (d, *d.iterdir()):
            shutil.chown(p, "munge", "munge")
    _start(["runuser", "-u", "munge", "--", "munged"])
    lay.munge_mark.write_text("1\n")
    return "munged started"


def _wait_for(what: str, ok: Callable[[], bool], timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if ok():
            return
        time.sleep(0.3)
    raise ClusterError(f"timed out waiting for {what}", hint="see the logs under the minicluster folder")


def _node_states(lay: Layout) -> dict[str, str]:
    ran = proc.run(["sinfo", "--noheader", "--Node", "--format=%N %T"], env=_env(lay))
    if not ran.ok:
        return {}
    return dict(line.split()[:2] for line in ran.stdout.splitlines() if len(line.split()) >= 2)


def _nodes_ready(lay: Layout, shape: Shape) -> bool:
    states = _node_states(lay)
    return set(states) == set(shape.names) and all(
        s.rstrip("*~#").lower() in ("idle", "mixed", "allocated") for s in states.values())


def read_shape(lay: Layout) -> Shape | None:
    try:
        return Shape(**json.loads(lay.shape_file.read_text()))
    except (OSError, ValueError, TypeError):
        return None


# --- the network -------------------------------------------------------------------------------------------

def _tbf(dev: str, bps: int, netns: str | None = None) -> list[str]:
    # burst: 10 ms of the rate (at least 16 KB, else tbf cannot reach the rate at the kernel's timer granularity);
    # latency bounds the queue, as a switch port's buffer does.
    burst = max(16 * 1024, bps // 8 // 100)
    argv = ["tc", "qdisc", "replace", "dev", dev, "root", "tbf", "rate", f"{bps}bit", "burst", str(burst),
            "latency", "50ms"]
    return ["ip", "netns", "exec", netns, *argv] if netns else argv


def _shape_link(lay: Layout, node: str, bps: int | None) -> None:
    """tbf at both ends of the node's veth: the host end shapes what the node receives, its eth0 what it sends."""
    if bps is None:
        proc.run(["tc", "qdisc", "del", "dev", lay.veth(node), "root"])
        proc.run(["ip", "netns", "exec", lay.netns(node), "tc", "qdisc", "del", "dev", IFACE, "root"])
        return
    _start(_tbf(lay.veth(node), bps))
    _start(_tbf(IFACE, bps, lay.netns(node)))


def _hosts_file(lay: Layout, shape: Shape, host: str) -> str:
    lines = ["127.0.0.1 localhost", f"{lay.head_addr} {host}"]
    return "\n".join(lines + [f"{lay.addr(n)} {n}" for n in shape.names]) + "\n"


def _make_network(lay: Layout, shape: Shape, host: str) -> None:
    _start(["ip", "link", "add", lay.bridge, "type", "bridge"])
    _start(["ip", "link", "set", lay.bridge, "alias", f"hpcbench minicluster {lay.root}"])
    _start(["ip", "addr", "add", f"{lay.head_addr}/24", "dev", lay.bridge])
    _start(["ip", "link", "set", lay.bridge, "up"])
    for n in shape.names:
        ns = lay.netns(n)
        # Over /etc/hosts inside the node (as `ip netns exec` does): node names resolve inside the cluster.
        (NETNS_ETC / ns).mkdir(parents=True, exist_ok=True)
        (NETNS_ETC / ns / "hosts").write_text(_hosts_file(lay, shape, host))
        _start(["ip", "netns", "add", ns])
        _start(["ip", "link", "add", lay.veth(n), "type", "veth", "peer", "name", IFACE, "netns", ns])
        _start(["ip", "link", "set", lay.veth(n), "master", lay.bridge, "up"])
        _start(["ip", "-n", ns, "addr", "add", f"{lay.addr(n)}/24", "dev", IFACE])
        _start(["ip", "-n", ns, "link", "set", IFACE, "up"])
        _start(["ip", "-n", ns, "link", "set", "lo", "up"])
        _shape_link(lay, n, shape.link_bps)


def _made(lay: Layout) -> dict[str, list[str]]:
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


def leftovers(root: Path = DEFAULT_DIR) -> list[str]:
    """Everything of this cluster still on the host: empty after ``down``."""
    return [f"{kind}: {x}" for kind, xs in _made(Layout(Path(root).resolve())).items() for x in xs]


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


def _unmake(lay: Layout) -> list[str]:
    made = _made(lay)
    if not any(made.values()):
        return []
    # Processes left inside (a job step that outlived its slurmd) were started by this cluster: end them first,
    # or a namespace and its cgroups cannot go.
    for sig in (signal.SIGTERM, signal.SIGKILL):
        pids = _pids_of(lay, made)
        for pid in pids:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        if pids:
            time.sleep(1)
    for ns in made["namespaces"]:
        proc.run(["ip", "netns", "del", ns])  # takes its end of the veth, and so the pair and both qdiscs
    for link in made["links"]:
        proc.run(["ip", "link", "del", link])
    for top in made["cgroups"]:
        for d in sorted(Path(top).rglob("*"), key=lambda p: -len(p.parts)) + [Path(top)]:
            if d.is_dir():
                try:
                    d.rmdir()
                except OSError:
                    pass
    for etc in made["etc"]:
        shutil.rmtree(etc, ignore_errors=True)
    return [f"removed {len(made['namespaces'])} namespace(s), {len(made['links'])} link(s), "
            f"{len(made['cgroups'])} cgroup tree(s) and {len(made['etc'])} /etc/netns folder(s)"]


# --- cgroups -------------------------------------------------------------------------------------------------

def _cg_write(path: Path, value: str) -> None:
    try:
        path.write_text(value)
    except OSError as e:
        raise ClusterError(f"cannot write {value!r} to {path}: {e.strerror}",
                           hint="the cgroup v1 cpu and cpuset controllers must be mounted under /sys/fs/cgroup")


def _make_cgroups(lay: Layout, shape: Shape) -> None:
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


def _set_quota(lay: Layout, node: str, fraction: float | None) -> None:
    d = lay.cgroup("cpu", node)
    cpus = len(_cpuset_of(lay, node))
    _cg_write(d / "cpu.cfs_period_us", str(CFS_PERIOD_US))
    _cg_write(d / "cpu.cfs_quota_us", "-1" if fraction is None else str(max(1000, int(fraction * CFS_PERIOD_US * cpus))))


def _cpuset_of(lay: Layout, node: str) -> list[int]:
    f = lay.cgroup("cpuset", node) / "cpuset.cpus"
    if not f.exists():
        return _host_cpus()
    out: list[int] = []
    for part in f.read_text().strip().split(","):
        lo, _, hi = part.partition("-")
        if lo:
            out.extend(range(int(lo), int(hi or lo) + 1))
    return out


def _start_slurmd(lay: Layout, node: str) -> None:
    """The node's slurmd, inside its network, UTS and mount namespaces and its cgroups: every job step inherits all.

    Not ``ip netns exec``: its fresh /sys hides /sys/fs/cgroup, without which slurmd will not start. The same is
    done by hand instead: the host's cgroup tree is kept aside, a sysfs of the node's network namespace goes on
    /sys (so /sys/class/net inside a job is the node's own eth0 and lo), the cgroup tree goes back on top, and
    the node's hosts file over /etc/hosts."""
    keep = lay.run / f"cgroup-{node}"
    keep.mkdir(parents=True, exist_ok=True)
    join = "".join(f"echo $$ > {lay.cgroup(c, node)}/tasks && " for c in ("cpuset", "cpu")
                   if lay.cgroup(c, node).is_dir())
    inner = (f"mount --rbind /sys/fs/cgroup {keep} && mount -t sysfs sysfs /sys && "
             f"mount --move {keep} /sys/fs/cgroup && mount --bind {NETNS_ETC / lay.netns(node) / 'hosts'} /etc/hosts "
             f"&& hostname {node} && exec slurmd -f {lay.conf} -N {node}")
    _start(["sh", "-c", f"{join}exec nsenter --net=/run/netns/{lay.netns(node)} unshare --uts --mount "
            f"--propagation private sh -c '{inner}'"], env=_env(lay))


# --- the verbs -----------------------------------------------------------------------------------------------

def _ping(lay: Layout) -> bool:
    ran = proc.run(["scontrol", "ping"], env=_env(lay))
    return ran.ok and "UP" in ran.stdout


def up(root: Path = DEFAULT_DIR, nodes: int = 2, link: str | None = None) -> list[str]:
    """Start the cluster (idempotent for the same shape; another shape restarts it). Returns the lines to print."""
    if not 1 <= nodes <= MAX_NODES:
        raise ConfigError(f"--nodes {nodes}: the minicluster has 1 to {MAX_NODES} nodes")
    shape = Shape(nodes, parse_rate(link) if link else None)
    shape = Shape(shape.nodes, shape.link_bps, cpusets=nodes <= len(_host_cpus()))
    _require_root_and_tools()
    lay = Layout(Path(root).resolve())
    lines = []
    if all(_daemons(lay).values()) and _ping(lay):
        if read_shape(lay) == shape and not any(e for e in _made_problems(lay, shape)):
            return [f"minicluster already up; config {lay.conf}, logs {lay.logs}"] + status_lines(lay)
        lines.append(f"minicluster was up with another shape ({_shape_words(read_shape(lay))}): restarting it")
    owner = proc.run(["ip", "-d", "link", "show", lay.bridge]).stdout
    m = re.search(r"alias hpcbench minicluster (\S+)", owner)
    if m and m.group(1) != str(lay.root):
        raise ClusterError(f"the names of slot {lay.slot} (bridge {lay.bridge}) belong to the minicluster in {m.group(1)}",
                           hint="use another --dir, or take that one down first")
    lines += down(root, quiet=True)
    for d in (lay.state, lay.logs, lay.run, *(lay.tmp / n for n in shape.names),
              *(lay.root / "spool" / n for n in shape.names)):
        d.mkdir(parents=True, exist_ok=True)
    for stale in lay.state.iterdir():  # throwaway: a fresh controller state every time
        shutil.rmtree(stale) if stale.is_dir() else stale.unlink()
    host = socket.gethostname()
    lay.conf.write_text(render_conf(lay, shape, host))
    lay.shape_file.write_text(json.dumps(asdict(shape)) + "\n")
    lay.links.write_text(render_links(lay, shape, {n: shape.link_bps for n in shape.names}))
    repo_profile = Path(__file__).resolve().parents[2] / "clusters" / "minicluster.toml"
    if repo_profile.is_file():
        lay.profile.write_text(render_profile(lay, shape, repo_profile))
    lines.append(_ensure_munge(lay))
    try:
        _make_network(lay, shape, host)
        _make_cgroups(lay, shape)
        _link_system_conf(lay, lines)
        env = _env(lay)
        _start(["slurmctld", "-f", str(lay.conf)], env=env)
        _wait_for("slurmctld", lambda: _ping(lay))
        for node in shape.names:
            _start_slurmd(lay, node)
        _wait_for(f"{', '.join(shape.names)} to register", lambda: _nodes_ready(lay, shape), timeout=60)
    except BaseException:
        down(root, quiet=True)  # nothing half-made stays behind
        raise
    lines += [f"started slurmctld on {lay.head_addr}:{lay.ctld_port} (bridge {lay.bridge}) and {nodes} slurmd, "
              f"each in its own network namespace: {_shape_words(shape)}",
              f"config:  {lay.conf}   (export SLURM_CONF={lay.conf} to use it)",
              f"profile: {lay.profile}   (its links: {lay.links})", f"logs:    {lay.logs}"]
    return lines + status_lines(lay)


def _made_problems(lay: Layout, shape: Shape) -> list[str]:
    made = _made(lay)
    return [f"namespace of {n} missing" for n in shape.names if lay.netns(n) not in made["namespaces"]]


def _shape_words(shape: Shape | None) -> str:
    if shape is None:
        return "nodes on 127.0.0.1, no namespaces"
    link = f"links shaped to {rate_words(shape.link_bps)}" if shape.link_bps else "links unshaped"
    cpus = "each with cores of its own" if shape.cpusets and shape.nodes <= len(_host_cpus()) else \
        f"sharing the host's {len(_host_cpus())} CPUs"
    return f"{shape.nodes} node(s), {link}, {cpus}"


def _link_system_conf(lay: Layout, lines: list[str]) -> None:
    """Point /etc/slurm/slurm.conf at ours when nothing is there (or a link to a folder that is gone); never
    over a real configuration or another minicluster's."""
    ours = SYSTEM_CONF.is_symlink() and Path(os.readlink(SYSTEM_CONF)) == lay.conf
    if not SYSTEM_CONF.exists() or ours:  # exists() is False for a dangling link
        SYSTEM_CONF.parent.mkdir(parents=True, exist_ok=True)
        if SYSTEM_CONF.is_symlink():
            SYSTEM_CONF.unlink()
        SYSTEM_CONF.symlink_to(lay.conf)
        lines.append(f"linked {SYSTEM_CONF} -> {lay.conf}, so sbatch/srun/submitit find it")
    else:
        lines.append(f"{SYSTEM_CONF} is not this cluster's: export SLURM_CONF={lay.conf} before using Slurm")


def down(root: Path = DEFAULT_DIR, quiet: bool = False) -> list[str]:
    """Stop everything `up` started and remove everything it made (idempotent)."""
    lay = Layout(Path(root).resolve())
    running = {k: v for k, v in _daemons(lay).items() if v}
    lines = []
    if running:
        if lay.conf.exists():
            proc.run(["scancel", "--full", "--user", "root"], env=_env(lay))
        for pid in running.values():
            os.kill(pid, signal.SIGTERM)
        _wait_for("daemons to stop", lambda: not any(_daemons(lay).values()), timeout=20)
        lines.append(f"stopped {', '.join(running)}")
    lines += _unmake(lay)
    # munged serves every Slurm on the host: stop it only if this cluster started it and no other slurmctld uses it.
    if lay.munge_mark.exists() and not _pgrep("slurmctld"):
        proc.run(["pkill", "-x", "munged"])
        # Wait, or a quick `up` would find the dying munged "already running" and lose authentication.
        _wait_for("munged to stop", lambda: not _pgrep("munged"), timeout=20)
        lay.munge_mark.unlink()
        lines.append("stopped munged")
    if SYSTEM_CONF.is_symlink() and Path(os.readlink(SYSTEM_CONF)) == lay.conf:
        SYSTEM_CONF.unlink()
        lines.append(f"removed {SYSTEM_CONF}")
    if not lines and not quiet:
        lines.append("minicluster already down")
    return lines


def _known_node(lay: Layout, node: str) -> Shape:
    shape = read_shape(lay)
    if shape is None or not all(_daemons(lay).values()):
        raise ClusterError(f"no minicluster is up in {lay.root}", hint="start one: hpcbench minicluster up")
    if node not in shape.names:
        raise ConfigError(f"no node {node!r} in the minicluster (it has {', '.join(shape.names)})")
    return shape


def _declare(lay: Layout, shape: Shape, node: str, bps: int | None) -> None:
    """Rewrite links.toml with ``node``'s new rate (the others keep theirs)."""
    rates = {n: _tbf_rate(lay, n) for n in shape.names}
    rates[node] = bps
    lay.links.write_text(render_links(lay, shape, rates))


def degrade(root: Path, node: str, link: str | None = None, cpu: float | None = None) -> list[str]:
    """Slow one node's link (tbf at a lower rate) and/or its CPUs (a CFS quota: the share of its cores it gets)."""
    lay = Layout(Path(root).resolve())
    if link is None and cpu is None:
        raise ConfigError("degrade needs --link RATE or --cpu FRACTION (or both)")
    if cpu is not None and not 0 < cpu <= 1:
        raise ConfigError(f"--cpu {cpu}: give the share of the node's CPU time it keeps, above 0 and at most 1")
    shape = _known_node(lay, node)
    lines = []
    if link is not None:
        bps = parse_rate(link)
        _shape_link(lay, node, bps)
        _declare(lay, shape, node, bps)
        lines.append(f"{node}: link shaped to {rate_words(bps)} both ways ({lay.veth(node)} and its {IFACE})")
    if cpu is not None:
        _set_quota(lay, node, cpu)
        lines.append(f"{node}: CPU quota {cpu:.0%} of its {len(_cpuset_of(lay, node))} CPU(s) (cgroup cpu "
                     f"{lay.cgroup('cpu', node)})")
    return lines


def restore(root: Path, node: str) -> list[str]:
    lay = Layout(Path(root).resolve())
    shape = _known_node(lay, node)
    _shape_link(lay, node, shape.link_bps)
    _declare(lay, shape, node, shape.link_bps)
    _set_quota(lay, node, None)
    link = rate_words(shape.link_bps) if shape.link_bps else "unshaped"
    return [f"{node}: link back to {link}, CPU quota removed"]


def _tbf_rate(lay: Layout, node: str) -> int | None:
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


def status_lines(lay: Layout) -> list[str]:
    lines = [f"{name}: {'pid ' + str(pid) if pid else 'not running'}" for name, pid in _daemons(lay).items()]
    shape = read_shape(lay)
    states = _node_states(lay)
    for node in sorted(states):
        extra = ""
        if shape and node in shape.names and lay.netns(node) in _made(lay)["namespaces"]:
            bps = _tbf_rate(lay, node)
            own = node_cpus(shape).get(node)
            quota = (lay.cgroup("cpu", node) / "cpu.cfs_quota_us")
            q = quota.read_text().strip() if quota.exists() else "-1"
            cpus = f"CPUs {','.join(map(str, own))} (own)" if own else f"CPUs shared with {shape.nodes - 1} other node(s)"
            if q != "-1":
                cpus += f", quota {int(q) / CFS_PERIOD_US:g} CPU"
            extra = (f" {lay.addr(node)} ({lay.netns(node)}), link {rate_words(bps) if bps else 'unshaped'}, "
                     f"{cpus}")
        lines.append(f"{node}: {states[node]}{extra}")
    return lines


def status(root: Path = DEFAULT_DIR) -> tuple[bool, list[str]]:
    lay = Layout(Path(root).resolve())
    is_up = all(_daemons(lay).values()) and _ping(lay)
    head = f"minicluster {'up' if is_up else 'down'} (folder {lay.root}; {_shape_words(read_shape(lay))})"
    return is_up, [head] + status_lines(lay)
