"""Where am I in the job? Rank, world size and the rendezvous address, from the launcher's environment.

Precedence: torchrun's variables, then OpenMPI's (under mpirun, SLURM_PROCID is the orted's, not the rank's), then
PMI/PMIx, then Slurm's. MASTER_ADDR/MASTER_PORT win when set (torchrun, the local backend).
"""

from __future__ import annotations

import os
import re
import socket
from collections.abc import Mapping
from dataclasses import dataclass

from hpcbench import proc

# A job's listening ports live below Linux's default ephemeral range (32768-60999): any process's
# outgoing connections (Gloo pairs, slurmd RPCs) may already hold a port in there, which made a
# rendezvous on 40035 fail with EADDRINUSE. They also stay clear of Slurm's own ports (6817-6819 by
# default; the minicluster's 16817 and 17001-17002). MASTER_PORT is 20000-25999, the side port 26000-31999.
JOB_PORT_BASE = 20000
JOB_PORT_SPAN = 6000
# The same rule for job scripts, which set MASTER_PORT before any Python runs.
JOB_PORT_SHELL = f"$(({JOB_PORT_BASE} + ${{SLURM_JOB_ID:-0}} % {JOB_PORT_SPAN}))"


def job_port(job_id: str | None) -> int:
    """The job's MASTER_PORT, derived from its id so that concurrent jobs sharing a node differ."""
    digits = re.sub(r"\D", "", job_id or "") or "0"
    return JOB_PORT_BASE + int(digits) % JOB_PORT_SPAN


def side_port(master_port: int) -> int:
    """A second listening port for the same job (Horovod's Gloo rendezvous), never equal to master_port."""
    return JOB_PORT_BASE + JOB_PORT_SPAN + master_port % JOB_PORT_SPAN


@dataclass(frozen=True)
class DistEnv:
    rank: int
    local_rank: int
    world_size: int
    node_rank: int
    nnodes: int
    master_addr: str
    master_port: int
    job_id: str | None
    launcher: str  # which variables it came from: torchrun, openmpi, pmi, slurm, single


def expand_hostlist(expr: str) -> list[str]:
    """Expand a Slurm host list such as ``node[1-3,7],gpu-a[01-02]`` (same order as scontrol)."""
    hosts: list[str] = []
    for part in re.findall(r"[^,\[]+(?:\[[^\]]*\])?[^,]*", expr):
        m = re.match(r"^([^\[]*)\[([^\]]*)\](.*)$", part)
        if not m:
            hosts.append(part)
            continue
        prefix, ranges, suffix = m.groups()
        for r in ranges.split(","):
            lo, _, hi = r.partition("-")
            if not hi:
                hosts.append(f"{prefix}{lo}{suffix}")
                continue
            width = len(lo) if lo.startswith("0") else 0
            hosts.extend(f"{prefix}{i:0{width}d}{suffix}" for i in range(int(lo), int(hi) + 1))
    return hosts


def resolve_addr(name: str) -> str:
    """An address for ``name``: DNS first, then the node's NodeAddr from ``scontrol show node``.

    Slurm node names need not resolve (several slurmd on one host, or clusters whose node names
    differ from host names); NodeAddr is what slurmctld itself uses to reach the node.
    """
    try:
        return socket.gethostbyname(name)
    except OSError:
        pass
    ran = proc.run(["scontrol", "show", "node", name], timeout=30)
    if ran.problem:
        raise RuntimeError(f"cannot resolve rendezvous host {name!r}: not in DNS, and {ran.why()}")
    m = re.search(r"\bNodeAddr=(\S+)", ran.stdout)
    if not m:
        raise RuntimeError(f"cannot resolve rendezvous host {name!r}: not in DNS and not a Slurm node")
    addr = m.group(1)
    return addr if re.match(r"^[\d.]+$|:", addr) else socket.gethostbyname(addr)


def _first_int(env: Mapping[str, str], *names: str) -> int | None:
    for n in names:
        if env.get(n, "").strip().lstrip("-").isdigit():
            return int(env[n])
    return None


def from_environ(env: Mapping[str, str] | None = None) -> DistEnv:
    env = os.environ if env is None else env
    if "TORCHELASTIC_RUN_ID" in env:
        # torchrun runs inside one srun task per node, so SLURM_PROCID is the node's, not the rank's.
        launcher = "torchrun"
        rank = int(env["RANK"])
        world = int(env["WORLD_SIZE"])
        local = int(env.get("LOCAL_RANK", 0))
        node_rank = _first_int(env, "GROUP_RANK") or 0
    elif "OMPI_COMM_WORLD_RANK" in env:
        launcher = "openmpi"
        rank = int(env["OMPI_COMM_WORLD_RANK"])
        world = int(env["OMPI_COMM_WORLD_SIZE"])
        local = int(env.get("OMPI_COMM_WORLD_LOCAL_RANK", 0))
        # Not OMPI_COMM_WORLD_NODE_RANK: that is the rank among every process on the node, not the node's index.
        node_rank = rank // max(int(env.get("OMPI_COMM_WORLD_LOCAL_SIZE", 1)), 1)
    elif "PMI_RANK" in env or "PMIX_RANK" in env:
        launcher = "pmi"
        rank = _first_int(env, "PMI_RANK", "PMIX_RANK") or 0
        world = _first_int(env, "PMI_SIZE", "SLURM_NTASKS") or 1
        local = _first_int(env, "MPI_LOCALRANKID", "SLURM_LOCALID") or 0
        node_rank = _first_int(env, "SLURM_NODEID") or 0
    elif "SLURM_PROCID" in env:
        launcher = "slurm"
        rank = int(env["SLURM_PROCID"])
        world = _first_int(env, "SLURM_NTASKS", "SLURM_NPROCS") or 1
        local = _first_int(env, "SLURM_LOCALID") or 0
        node_rank = _first_int(env, "SLURM_NODEID") or 0
    else:
        launcher, rank, world, local, node_rank = "single", 0, 1, 0, 0
    nnodes = _first_int(env, "SLURM_JOB_NUM_NODES", "SLURM_NNODES") or 1
    job_id = env.get("SLURM_JOB_ID") or env.get("HPCBENCH_JOB_ID")

    addr = env.get("MASTER_ADDR")
    if not addr:
        nodelist = env.get("SLURM_JOB_NODELIST") or env.get("SLURM_NODELIST")
        addr = resolve_addr(expand_hostlist(nodelist)[0]) if nodelist else "127.0.0.1"
    port = _first_int(env, "MASTER_PORT")
    if port is None:
        port = job_port(job_id)
    return DistEnv(rank, local, world, node_rank, nnodes, addr, port, job_id, launcher)
