"""A throwaway 2-node Slurm on this machine: ``hpcbench minicluster up|down|status`` (root only).

Two slurmd processes (node1, node2) share this host, each on its own port, with NodeAddr=127.0.0.1:
node names do not resolve, which is exactly the case hpcbench's rendezvous code must handle on real
clusters too. Accounting is off (no slurmdbd), so sacct fails; hpcbench reads squeue instead.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from hpcbench import proc
from hpcbench.errors import ClusterError

DEFAULT_DIR = Path(os.environ.get("HPCBENCH_MINICLUSTER_DIR", "/var/tmp/hpcbench-minicluster"))
NODES = ("node1", "node2")
CTLD_PORT = 16817
SLURMD_PORTS = (17001, 17002)
SYSTEM_CONF = Path("/etc/slurm/slurm.conf")
MARK = "# written by hpcbench minicluster"


@dataclass(frozen=True)
class Layout:
    root: Path

    conf = property(lambda self: self.root / "slurm.conf")
    state = property(lambda self: self.root / "state")
    logs = property(lambda self: self.root / "log")
    run = property(lambda self: self.root / "run")
    tmp = property(lambda self: self.root / "tmp")
    munge_mark = property(lambda self: self.root / "run" / "munged.started-by-hpcbench")

    def ctld_pid(self) -> Path:
        return self.run / "slurmctld.pid"

    def slurmd_pid(self, node: str) -> Path:
        return self.run / f"slurmd-{node}.pid"


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


def render_conf(lay: Layout, host: str) -> str:
    sockets, cores, threads = _topology()
    cpus = sockets * cores * threads
    return f"""{MARK}; remove with: hpcbench minicluster down
ClusterName=hpcbench
SlurmctldHost={host}(127.0.0.1)
SlurmctldPort={CTLD_PORT}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
StateSaveLocation={lay.state}
SlurmdSpoolDir={lay.root}/spool/%n
SlurmctldPidFile={lay.ctld_pid()}
SlurmdPidFile={lay.run}/slurmd-%n.pid
SlurmctldLogFile={lay.logs}/slurmctld.log
SlurmdLogFile={lay.logs}/slurmd-%n.log
# No cgroups in containers: track processes by their parent, bind with sched_setaffinity.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/affinity
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
MpiDefault=none
# Both slurmd share one host, so PMIx needs a separate temporary folder per node.
TmpFS={lay.tmp}/%n
ReturnToService=2
SlurmdParameters=config_overrides
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
KillWait=5
MinJobAge=600
NodeName=node[1-2] NodeHostname={host} NodeAddr=127.0.0.1 Port=[{SLURMD_PORTS[0]}-{SLURMD_PORTS[1]}] CPUs={cpus} Sockets={sockets} CoresPerSocket={cores} ThreadsPerCore={threads} RealMemory=1024 State=UNKNOWN
PartitionName=debug Nodes=node[1-2] Default=YES MaxTime=INFINITE State=UP
"""


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
    """Run a command that must succeed (a daemon that forks itself away, mungekey)."""
    proc.check(argv, ClusterError, env=env, hint="see the logs under the minicluster folder")


def _env(lay: Layout) -> dict[str, str]:
    return {**os.environ, "SLURM_CONF": str(lay.conf)}


def _require_root_and_tools() -> None:
    if os.geteuid() != 0:
        raise ClusterError("minicluster needs root (it starts munged, slurmctld and two slurmd)",
                           hint="run it with sudo, or as root in a container")
    missing = [t for t in ("slurmctld", "slurmd", "munged", "scontrol", "sinfo") if not shutil.which(t)]
    if missing:
        raise ClusterError(f"not installed: {', '.join(missing)}",
                           hint="apt-get install slurm-wlm munge (scripts/test.sh does this)")


def _daemons(lay: Layout) -> dict[str, int | None]:
    out = {"slurmctld": _alive(lay.ctld_pid(), "slurmctld")}
    out.update({f"slurmd {n}": _alive(lay.slurmd_pid(n), "slurmd") for n in NODES})
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


def _nodes_ready(lay: Layout) -> bool:
    states = _node_states(lay)
    return len(states) == len(NODES) and all(
        s.rstrip("*~#").lower() in ("idle", "mixed", "allocated") for s in states.values())


def up(root: Path = DEFAULT_DIR) -> list[str]:
    """Start the cluster (idempotent). Returns the lines to print."""
    _require_root_and_tools()
    lay = Layout(Path(root).resolve())
    if all(_daemons(lay).values()) and _ping(lay):
        return [f"minicluster already up; config {lay.conf}, logs {lay.logs}"] + status_lines(lay)
    down(root, quiet=True)
    for d in (lay.state, lay.logs, lay.run, *(lay.tmp / n for n in NODES), *(lay.root / "spool" / n for n in NODES)):
        d.mkdir(parents=True, exist_ok=True)
    for stale in lay.state.iterdir():  # throwaway: a fresh controller state every time
        shutil.rmtree(stale) if stale.is_dir() else stale.unlink()
    lay.conf.write_text(render_conf(lay, socket.gethostname()))
    lines = [_ensure_munge(lay)]
    _link_system_conf(lay, lines)
    env = _env(lay)
    _start(["slurmctld", "-f", str(lay.conf)], env=env)
    _wait_for("slurmctld", lambda: _ping(lay))
    for node in NODES:
        _start(["slurmd", "-f", str(lay.conf), "-N", node], env=env)
    _wait_for("node1 and node2 to register", lambda: _nodes_ready(lay))
    lines += [f"started slurmctld (port {CTLD_PORT}) and slurmd node1, node2 (ports {SLURMD_PORTS[0]}-{SLURMD_PORTS[1]})",
              f"config: {lay.conf}", f"logs:   {lay.logs}"]
    return lines + status_lines(lay)


def _link_system_conf(lay: Layout, lines: list[str]) -> None:
    """Point /etc/slurm/slurm.conf at ours, unless a real configuration is already there."""
    if SYSTEM_CONF.is_symlink() or not SYSTEM_CONF.exists():
        SYSTEM_CONF.parent.mkdir(parents=True, exist_ok=True)
        if SYSTEM_CONF.is_symlink():
            SYSTEM_CONF.unlink()
        SYSTEM_CONF.symlink_to(lay.conf)
        lines.append(f"linked {SYSTEM_CONF} -> {lay.conf}, so sbatch/srun/submitit find it")
    else:
        lines.append(f"{SYSTEM_CONF} exists and is not ours: export SLURM_CONF={lay.conf} before using Slurm")


def _ping(lay: Layout) -> bool:
    ran = proc.run(["scontrol", "ping"], env=_env(lay))
    return ran.ok and "UP" in ran.stdout


def down(root: Path = DEFAULT_DIR, quiet: bool = False) -> list[str]:
    """Stop everything `up` started (idempotent)."""
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
    if lay.munge_mark.exists():
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


def status_lines(lay: Layout) -> list[str]:
    lines = [f"{name}: {'pid ' + str(pid) if pid else 'not running'}" for name, pid in _daemons(lay).items()]
    lines += [f"{node}: {state}" for node, state in sorted(_node_states(lay).items())]
    return lines


def status(root: Path = DEFAULT_DIR) -> tuple[bool, list[str]]:
    lay = Layout(Path(root).resolve())
    is_up = all(_daemons(lay).values()) and _ping(lay)
    head = f"minicluster {'up' if is_up else 'down'} (folder {lay.root})"
    return is_up, [head] + status_lines(lay)
