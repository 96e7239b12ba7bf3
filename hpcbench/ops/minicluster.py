"""A throwaway Slurm on this machine with a real network: ``hpcbench minicluster up|down|status|degrade|restore``.

Each node is its own network and UTS namespace (hostname ``nodeK``, address 10.77.S.(10+K)) joined to a bridge
by a veth pair; ``--link RATE`` shapes each veth with ``tbf`` at both ends (the node's send and receive
direction). slurmctld stays in the host's namespace and listens on the bridge's address; each slurmd runs inside
its node's namespaces, so every job step and rank it starts sends its inter-node bytes over the shaped link, and
/sys/class/net inside a job shows that node's own eth0. While there are at least as many cores as nodes each node
gets its own cores (cgroup v1 cpuset); ``degrade NODE --cpu F`` caps a node with a CFS quota.

Names, addresses and slurmctld's port derive from the folder (nodes.py), so clusters in different folders run side
by side. Accounting is off (no slurmdbd), so sacct fails; hpcbench reads squeue instead.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path

from hpcbench import proc
from hpcbench.errors import ClusterError, ConfigError
from hpcbench.figures.wire import rate_words
from hpcbench.ops.nodes import (CFS_PERIOD_US, DEFAULT_PATH, IFACE, NETNS_ETC, Layout, Shape, cpuset_of, host_cpus, made,
                                make_cgroups, make_network, must, node_cpus, parse_rate, render_links, set_quota, shape_link,
                                slurm_binds, tbf_rate, unmake)

DEFAULT_DIR = Path(os.environ.get("HPCBENCH_MINICLUSTER_DIR", DEFAULT_PATH))
MAX_NODES = 8
SLURMD_PORT = 6818  # every slurmd has a namespace of its own, so they all listen on the same port
SYSTEM_CONF = Path("/etc/slurm/slurm.conf")
MARK = "# written by hpcbench minicluster"



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
# hpcbench's, made before its slurmd starts, so every job step inherits them; where a cpuset confines a node to
# part of the host, Slurm binds nothing (nodes.slurm_binds).
ProctrackType=proctrack/linuxproc
TaskPlugin={"task/affinity" if slurm_binds(shape) else "task/none"}
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
# A batch job starts as soon as it is submitted: by default Slurm may hold it up to 3 s (batch_sched_delay) to
# schedule many submissions at once, which on this cluster of one-job-at-a-time sweeps only adds latency.
SchedulerParameters=batch_sched_delay=0
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
        must(["mungekey", "--create"])
        shutil.chown(key, "munge", "munge")
        key.chmod(0o400)
    # munged refuses to start when its folders or files belong to someone else (e.g. root).
    for d in (Path("/run/munge"), Path("/var/log/munge"), Path("/var/lib/munge")):
        d.mkdir(parents=True, exist_ok=True)
        for p in (d, *d.iterdir()):
            shutil.chown(p, "munge", "munge")
    must(["runuser", "-u", "munge", "--", "munged"])
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


def start_slurmd(lay: Layout, node: str) -> None:
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
    must(["sh", "-c", f"{join}exec nsenter --net=/run/netns/{lay.netns(node)} unshare --uts --mount "
            f"--propagation private sh -c '{inner}'"], env=_env(lay))


def _ping(lay: Layout) -> bool:
    ran = proc.run(["scontrol", "ping"], env=_env(lay))
    return ran.ok and "UP" in ran.stdout


def up(root: Path = DEFAULT_DIR, nodes: int = 2, link: str | None = None, restart: bool = False) -> list[str]:
    """Start the cluster (idempotent for the same shape); one of another shape (or an older hpcbench's, on 127.0.0.1)
    is replaced only with ``restart``, as others may have jobs on it. Returns the lines to print."""
    if not 1 <= nodes <= MAX_NODES:
        raise ConfigError(f"--nodes {nodes}: the minicluster has 1 to {MAX_NODES} nodes")
    shape = Shape(nodes, parse_rate(link) if link else None)
    shape = Shape(shape.nodes, shape.link_bps, cpusets=nodes <= len(host_cpus()))
    _require_root_and_tools()
    lay = Layout(Path(root).resolve())
    lines = []
    if all(_daemons(lay).values()) and _ping(lay):
        if read_shape(lay) == shape and all(lay.netns(n) in made(lay)["namespaces"] for n in shape.names):
            lines = [f"minicluster already up; config {lay.conf}, logs {lay.logs}"]
            if not SYSTEM_CONF.exists():  # another minicluster's `down` took its link away: take the place again
                _link_system_conf(lay, lines)
            return lines + status_lines(lay)
        was = _shape_words(read_shape(lay))
        if not restart:
            raise ClusterError(f"a minicluster of another shape is up in {lay.root} ({was}); up leaves it and its jobs "
                               "alone", hint=f"replace it with --restart (it cancels every job there), or use another "
                               "--dir")
        lines.append(f"minicluster was up with another shape ({was}): restarting it")
    owner = proc.run(["ip", "-d", "link", "show", lay.bridge]).stdout
    m = re.search(r"alias hpcbench minicluster (\S+)", owner)
    if m and m.group(1) != str(lay.root):
        raise ClusterError(f"the names of slot {lay.slot} (bridge {lay.bridge}) belong to the minicluster in {m.group(1)}",
                           hint="use another --dir, or take that one down first")
    lines += down(root, quiet=True)
    lay.fresh(shape)
    host = socket.gethostname()
    lay.conf.write_text(render_conf(lay, shape, host))
    lay.shape_file.write_text(json.dumps(asdict(shape)) + "\n")
    lay.links.write_text(render_links(lay, shape, {n: shape.link_bps for n in shape.names}))
    repo_profile = Path(__file__).resolve().parents[2] / "clusters" / "minicluster.toml"
    if repo_profile.is_file():
        lay.profile.write_text(render_profile(lay, shape, repo_profile))
    lines.append(_ensure_munge(lay))
    try:
        make_network(lay, shape, host)
        make_cgroups(lay, shape)
        _link_system_conf(lay, lines)
        env = _env(lay)
        must(["slurmctld", "-f", str(lay.conf)], env=env)
        _wait_for("slurmctld", lambda: _ping(lay))
        for node in shape.names:
            start_slurmd(lay, node)
        _wait_for(f"{', '.join(shape.names)} to register", lambda: _nodes_ready(lay, shape), timeout=60)
    except BaseException:
        down(root, quiet=True)  # nothing half-made stays behind
        raise
    lines += [f"started slurmctld on {lay.head_addr}:{lay.ctld_port} (bridge {lay.bridge}) and {nodes} slurmd, "
              f"each in its own network namespace: {_shape_words(shape)}",
              f"config:  {lay.conf}   (export SLURM_CONF={lay.conf} to use it)",
              f"profile: {lay.profile}   (its links: {lay.links})", f"logs:    {lay.logs}"]
    return lines + status_lines(lay)


def _shape_words(shape: Shape | None) -> str:
    if shape is None:
        return "nodes on 127.0.0.1, no namespaces"
    link = f"links shaped to {rate_words(shape.link_bps)}" if shape.link_bps else "links unshaped"
    cpus = "each with cores of its own" if shape.cpusets and shape.nodes <= len(host_cpus()) else \
        f"sharing the host's {len(host_cpus())} CPUs"
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
    lines += unmake(lay)
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
    rates = {n: tbf_rate(lay, n) for n in shape.names}
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
        shape_link(lay, node, bps)
        _declare(lay, shape, node, bps)
        lines.append(f"{node}: link shaped to {rate_words(bps)} both ways ({lay.veth(node)} and its {IFACE})")
    if cpu is not None:
        set_quota(lay, node, cpu)
        lines.append(f"{node}: CPU quota {cpu:.0%} of its {len(cpuset_of(lay, node))} CPU(s) (cgroup cpu "
                     f"{lay.cgroup('cpu', node)})")
    return lines


def restore(root: Path, node: str) -> list[str]:
    lay = Layout(Path(root).resolve())
    shape = _known_node(lay, node)
    shape_link(lay, node, shape.link_bps)
    _declare(lay, shape, node, shape.link_bps)
    set_quota(lay, node, None)
    link = rate_words(shape.link_bps) if shape.link_bps else "unshaped"
    return [f"{node}: link back to {link}, CPU quota removed"]


def status_lines(lay: Layout) -> list[str]:
    lines = [f"{name}: {'pid ' + str(pid) if pid else 'not running'}" for name, pid in _daemons(lay).items()]
    shape = read_shape(lay)
    states = _node_states(lay)
    for node in sorted(states):
        extra = ""
        if shape and node in shape.names and lay.netns(node) in made(lay)["namespaces"]:
            bps = tbf_rate(lay, node)
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

