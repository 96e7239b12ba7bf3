"""`hpcbench hunt`: one Slurm allocation, rounds of job steps in it, and the decision.

The hunt pays one queue wait: it takes the allocation it runs in (SLURM_JOB_ID), or makes one with
``salloc --no-shell`` (the nodes named, or a count in a partition) and releases it at the end. Each round
starts every pair's step at once (``srun --jobid J --nodelist a,b``, disjoint nodes) plus, in round 0, one
compute probe per node (after the pairs; nodes sharing CPUs of one kernel take turns); round 0 is
the test over all nodes, and the hunt stops there when it is healthy.
"""

from __future__ import annotations

import json
import os
import re
import sys
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hpcbench import proc
from hpcbench.errors import ConfigError, SchedulerError
from hpcbench.hunt.decide import PairTest, Probe, Verdict, confirm, confirm_pairs, decide, round0_healthy
from hpcbench.hunt.schedule import ROUNDS, Pair, rounds
from hpcbench.workloads.distenv import JOB_PORT_BASE, JOB_PORT_SPAN, expand_hostlist, resolve_addr
from hpcbench.workloads.pairtest import PREFIX


@dataclass(frozen=True)
class HuntSettings:
    nodes: tuple[str, ...] = ()  # the nodes to hunt among (empty: the allocation's, or --nodes-count of them)
    count: int | None = None
    partition: str | None = None
    rounds: int = ROUNDS
    nbytes: int = 8 << 20
    iters: int = 4
    repeats: int = 3
    backend: str = "auto"
    time_limit: str = "00:30:00"
    env: tuple[tuple[str, str], ...] = ()  # the cluster profile's [env] (interfaces, MPI settings)
    seed: int = 0
    python: str = sys.executable


@dataclass(frozen=True)
class Allocation:
    job_id: str
    nodes: tuple[str, ...]
    own: bool  # made by the hunt, released by it


@dataclass
class Hunt:
    settings: HuntSettings
    allocation: Allocation
    verdict: Verdict
    tests: list[PairTest] = field(default_factory=list)
    probes: list[Probe] = field(default_factory=list)
    rounds_used: int = 0
    round_seconds: list[float] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)  # steps that gave no figure, with why
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)  # how the measurement was adapted (probes that took turns)


def _salloc_argv(s: HuntSettings) -> list[str]:
    argv = ["salloc", "--no-shell", "--job-name", "hpcbench-hunt", "--time", s.time_limit,
            "--ntasks-per-node", "1", "--exclusive"]
    if s.nodes:
        argv += ["--nodes", str(len(s.nodes)), "--nodelist", ",".join(s.nodes)]
    else:
        argv += ["--nodes", str(s.count)]
    return argv + (["--partition", s.partition] if s.partition else [])


def allocate(s: HuntSettings, environ: Mapping[str, str] = os.environ) -> Allocation:
    """The allocation to hunt in: the one we are inside, else a new one (one queue wait)."""
    job = environ.get("SLURM_JOB_ID")
    if job and not s.count:
        mine = tuple(expand_hostlist(environ.get("SLURM_JOB_NODELIST", "")))
        missing = sorted(set(s.nodes) - set(mine))
        if missing:
            raise ConfigError(f"--nodes names {', '.join(missing)}, outside this allocation (job {job}: "
                               f"{', '.join(mine)})", "hunt among the allocation's nodes, or run outside it")
        return Allocation(job, s.nodes or mine, own=False)
    if not s.nodes and not s.count:
        raise ConfigError("no nodes to hunt among", "give --nodes node[1-8], or --nodes-count N --partition P, "
                           "or run inside an allocation")
    ran = proc.run(_salloc_argv(s), timeout=3600)
    m = re.search(r"Granted job allocation (\d+)", ran.stderr + ran.stdout)
    if not m:
        raise SchedulerError(f"salloc gave no allocation: {ran.why() or ran.output[-200:]}",
                             "check the node names and partition with sinfo")
    job = m.group(1)
    listed = proc.run(["squeue", "--noheader", "--jobs", job, "--format", "%N"], timeout=60).stdout.strip()
    return Allocation(job, tuple(expand_hostlist(listed)) if listed else s.nodes, own=True)


def _step(alloc: Allocation, nodes: Sequence[str], argv: Sequence[str], env: Mapping[str, str],
          timeout: float) -> proc.Ran:
    cmd = ["srun", "--jobid", alloc.job_id, "--overlap", "--nodes", str(len(nodes)), "--ntasks", str(len(nodes)),
           "--ntasks-per-node", "1", "--nodelist", ",".join(nodes), "--kill-on-bad-exit=1", *argv]
    return proc.run(cmd, timeout=timeout, env=env)


def _records(ran: proc.Ran) -> list[dict[str, Any]]:
    return [json.loads(line[len(PREFIX):]) for line in ran.stdout.splitlines() if line.startswith(PREFIX)]


class Runner:
    """Runs the steps of one hunt and keeps what they measured."""

    def __init__(self, s: HuntSettings, alloc: Allocation) -> None:
        self.s, self.alloc = s, alloc
        root = str(Path(__file__).resolve().parents[2])  # this hpcbench, for the ranks (a shared file system)
        self.env = {**os.environ, **dict(s.env), "PYTHONPATH": os.pathsep.join(
            [root, *filter(None, [os.environ.get("PYTHONPATH")])])}
        self.module = [s.python, "-m", "hpcbench.workloads.pairtest"]
        self.failures: list[str] = []
        self.notes: list[str] = []
        self.shared = False  # the probes found nodes sharing CPUs of one kernel
        self.timeout = 120 + 30 * s.repeats * s.iters

    def pairs(self, pairs: Sequence[Pair], rnd: int) -> list[PairTest]:
        def one(i: int, pair: Pair) -> PairTest | None:
            port = JOB_PORT_BASE + (int(self.alloc.job_id) * 97 + rnd * 131 + i) % JOB_PORT_SPAN
            env = {**self.env, "MASTER_ADDR": resolve_addr(pair[0]), "MASTER_PORT": str(port)}
            ran = _step(self.alloc, pair, [*self.module, "pair", "--bytes", str(self.s.nbytes), "--iters",
                                           str(self.s.iters), "--repeats", str(self.s.repeats), "--backend",
                                           self.s.backend], env, self.timeout)
            got = [r for r in _records(ran) if r.get("kind") == "pair"]
            if not got:
                self.failures.append(f"round {rnd} pair {pair[0]}-{pair[1]}: {ran.why() or 'no figure printed'}")
                return None
            r = got[0]
            return PairTest(r["a"], r["b"], tuple(r["bandwidth"]), tuple(r["latency"]), rnd)

        with ThreadPoolExecutor(max_workers=max(1, len(pairs))) as pool:
            done = list(pool.map(lambda ip: one(*ip), enumerate(pairs)))
        return [t for t in done if t is not None]

    def probes(self, nodes: Sequence[str]) -> list[Probe]:
        """One compute probe per node, in one step. Probes of nodes sharing CPUs of one kernel take turns
        (pairtest._own_cpus): together they would measure each other; the hunt says so."""
        ran = _step(self.alloc, nodes, [*self.module, "probe", "--repeats", str(self.s.repeats)], self.env,
                    self.timeout)
        got = [r for r in _records(ran) if r.get("kind") == "probe"]
        if share_cpus(got):
            self.shared = True
            self.notes.append(f"compute probes: {shared_words(got)}: probed one at a time; pairs judged by "
                              "bandwidth only (a small message's time is the shared CPUs' scheduler's)")
        lost = sorted(set(nodes) - {p["node"] for p in got})
        if lost:
            self.failures.append(f"probe on {', '.join(lost)}: {ran.why() or 'no figure printed'}")
        return [Probe(p["node"], tuple(p["seconds"])) for p in got]


def share_cpus(probes: Sequence[dict[str, Any]]) -> bool:
    """Whether two of the probes ran on CPUs in common of one kernel (one pass: hunts reach thousands of nodes)."""
    seen: dict[str, set[int]] = {}
    for p in probes:
        if not p.get("host"):  # an older hpcbench's probe says nothing of where it ran
            continue
        cpus, mine = set(p.get("cpus") or ()), seen.setdefault(str(p["host"]), set())
        if cpus & mine:
            return True
        mine |= cpus
    return False


def shared_words(probes: Sequence[dict[str, Any]]) -> str:
    """'node1, node3 share CPU 0 of one host; ...'"""
    groups: dict[tuple[str, tuple[int, ...]], list[str]] = {}
    for p in probes:
        groups.setdefault((str(p.get("host")), tuple(p.get("cpus") or ())), []).append(str(p["node"]))
    said = [f"{', '.join(sorted(n))} share CPU{'s' * (len(cpus) > 1)} {','.join(map(str, cpus))} of one host"
            for (_, cpus), n in sorted(groups.items(), key=lambda kv: sorted(kv[1])) if len(n) > 1]
    return "; ".join(said) or "nodes of one host share CPUs"


def hunt(s: HuntSettings) -> Hunt:
    """Allocate, run round 0 and the probes, the other rounds if round 0 is not healthy, a confirming round
    if there are suspects; decide; release the allocation."""
    t0 = time.monotonic()
    alloc = allocate(s)
    try:
        run = Runner(s, alloc)
        nodes = list(alloc.nodes)
        sched = rounds(nodes, s.rounds, s.seed)
        if not sched:
            raise ConfigError(f"a hunt needs 2 nodes or more; the allocation has {', '.join(nodes)}",
                               "name more nodes")
        times = []
        tick = time.monotonic()
        # The probes after the pairs, not beside them: a node busy with a fast pair probes slow.
        tests = run.pairs(sched[0], 0)
        probes = run.probes(nodes)
        times.append(time.monotonic() - tick)
        stop = round0_healthy(tests, probes, latency=not run.shared)
        for r, pairs in enumerate(sched[1:], 1):
            if stop:
                break
            tick = time.monotonic()
            tests += run.pairs(pairs, r)
            times.append(time.monotonic() - tick)
        verdict = decide(tests, probes, latency=not run.shared)
        if not verdict.healthy:
            tick = time.monotonic()
            again = run.pairs(confirm_pairs(verdict, nodes), len(sched))
            reprobe = run.probes([x.node for x in verdict.suspects if x.kind == "compute"]) if any(
                x.kind == "compute" for x in verdict.suspects) else []
            times.append(time.monotonic() - tick)
            verdict, tests = confirm(verdict, again, reprobe), tests + again
        return Hunt(s, alloc, verdict, tests, probes, len(times), times, run.failures, time.monotonic() - t0,
                    run.notes)
    finally:
        if alloc.own:
            proc.run(["scancel", alloc.job_id], timeout=60)
