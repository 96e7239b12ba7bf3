"""The hunt at scale, on paper: hpcbench.hunt's own schedule and decision fed synthetic pair timings. Prints
figures; not a test.

    .venv/bin/python benchmarks/hunt_scale.py [--nodes 64,1024,16384] [--trials 20] [--noise-cv 0.05]
                                              [--round-seconds 3.0] [--rounds 3,4,5]

Each trial draws every pair's bandwidth and latency and every node's compute probe as the median of
``--repeats`` draws around 1 with relative noise ``--noise-cv`` (lognormal). Bad nodes are of two kinds,
drawn half and half: a slow link (every pair of the node at ``--link-factor`` of the bandwidth, latency
times 1/factor) and slow compute (probe at 1/``--cpu-factor`` of the time; the pairs slow down too, by
half, as a CPU-bound socket transport does). A hunt is what `hpcbench hunt` does: round 0 of disjoint pairs
and every node's probe is the test over all nodes (stop if healthy), then the other rounds, then one
confirming round that pairs each suspect with a node found healthy (a pair suspect: the pair again; a
compute suspect: its probe again); a suspect stays named only if it is slow again there.

Detection: bad nodes named / bad nodes. Kind right: of those, named with the right kind. False alarms:
healthy nodes named / healthy nodes (and the share of trials with any). Wall time: rounds used times
``--round-seconds`` (measure it on the namespaced cluster with `hpcbench hunt`, which prints it).

Bisection, for comparison, halves the set and tests each half (an allreduce over it) until single nodes:
ceil(log2 N) + 1 rounds for any number of bad nodes, with every half tested in parallel; its tests grow
with the group (a 8,192-node allreduce is not a pair test), and a group test cannot tell a link from
compute or a bad pair from a bad node.
"""

from __future__ import annotations

import argparse
import math
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from hpcbench.hunt.decide import (PairTest, Probe, Verdict, confirm, confirm_pairs, decide,  # noqa: E402
                                  round0_healthy)
from hpcbench.hunt.schedule import rounds  # noqa: E402


class World:
    def __init__(self, n: int, bad: int, args: argparse.Namespace, rng: random.Random) -> None:
        self.nodes = [f"n{i:05d}" for i in range(n)]
        chosen = rng.sample(self.nodes, bad)
        self.kind = {node: ("link" if i % 2 == 0 else "compute") for i, node in enumerate(chosen)}
        self.args, self.rng = args, rng

    def _noisy(self, x: float) -> tuple[float, ...]:
        cv = self.args.noise_cv
        return tuple(x * math.exp(self.rng.gauss(0.0, cv)) for _ in range(self.args.repeats))

    def _factor(self, node: str) -> float:
        kind = self.kind.get(node)
        return self.args.link_factor if kind == "link" else 0.5 if kind == "compute" else 1.0

    def pair(self, a: str, b: str, rnd: int) -> PairTest:
        f = min(self._factor(a), self._factor(b))
        return PairTest(a, b, self._noisy(1e9 * f), self._noisy(50e-6 / f), rnd)

    def probe(self, node: str) -> Probe:
        return Probe(node, self._noisy(1.0 / (self.args.cpu_factor if self.kind.get(node) == "compute" else 1.0)))



def hunt(world: World, n_rounds: int, seed: int) -> tuple[Verdict, int]:
    """One hunt of ``world`` as `hpcbench hunt` runs it (hpcbench.hunt.run.plan_rounds): round 0 and the probes
    are the test over all nodes; the other rounds follow only if it is not healthy; then a confirming round."""
    probes = [world.probe(n) for n in world.nodes]
    sched = rounds(world.nodes, n_rounds, seed)
    tests = [world.pair(a, b, 0) for a, b in sched[0]]
    if round0_healthy(tests, probes):
        return decide(tests, probes), 1
    tests += [world.pair(a, b, r) for r, pairs in enumerate(sched[1:], 1) for a, b in pairs]
    first = decide(tests, probes)
    if first.healthy:
        return first, len(sched)
    again = [world.pair(a, b, len(sched)) for a, b in confirm_pairs(first, world.nodes)]
    probes_again = [world.probe(s.node) for s in first.suspects if s.kind == "compute"]
    return confirm(first, again, probes_again), len(sched) + 1


def _bad_counts(n: int, spec: str) -> int:
    return max(1, round(n * float(spec[:-1]) / 100)) if spec.endswith("%") else int(spec)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nodes", default="64,1024,16384")
    ap.add_argument("--bad", default="0,1,1%")
    ap.add_argument("--rounds", default="4", help="pair rounds per hunt; a list compares them")
    ap.add_argument("--trials", type=int, default=20)
    ap.add_argument("--repeats", type=int, default=3, help="measurements per pair and probe")
    ap.add_argument("--noise-cv", type=float, default=0.05,
                    help="relative noise of one measurement (measure it: hunt.json's pairs on a healthy cluster)")
    ap.add_argument("--link-factor", type=float, default=0.2, help="a bad link's share of the bandwidth")
    ap.add_argument("--cpu-factor", type=float, default=0.3, help="a bad node's share of compute (its cfs quota)")
    ap.add_argument("--round-seconds", type=float, default=3.0, help="measured wall time of one round")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    print(f"noise cv {args.noise_cv:.3f} per measurement, {args.repeats} repeats; bad link at "
          f"{args.link_factor:.0%} bandwidth, bad compute at {args.cpu_factor:.0%}; {args.trials} trials per row; "
          f"{args.round_seconds:g} s per round")
    head = (f"{'nodes':>6} {'bad':>5} {'rounds':>6} {'detect':>7} {'kind ok':>7} {'false al.':>9} "
            f"{'trials w/ FA':>12} {'rounds used':>11} {'wall s':>7} {'bisect rounds':>13} {'sim s':>6}")
    print(head)
    print("-" * len(head))
    for n in (int(x) for x in args.nodes.split(",")):
        for spec in args.bad.split(","):
            bad = 0 if spec == "0" else _bad_counts(n, spec)
            for n_rounds in (int(x) for x in args.rounds.split(",")):
                _row(n, bad, n_rounds, args)


def _row(n: int, bad: int, n_rounds: int, args: argparse.Namespace) -> None:
    t0 = time.perf_counter()
    found = right = fa = fa_trials = 0
    used = []
    for trial in range(args.trials):
        rng = random.Random(args.seed * 1_000_003 + trial * 7919 + n + bad)
        world = World(n, bad, args, rng)
        verdict, r = hunt(world, n_rounds, seed=trial)
        named = set(verdict.excluded)
        kinds = {s.node: s.kind for s in verdict.suspects}
        hits = named & world.kind.keys()
        found += len(hits)
        right += sum(1 for node in hits if kinds.get(node) == world.kind[node])
        wrong = len(named - world.kind.keys())
        fa += wrong
        fa_trials += wrong > 0
        used.append(r)
    det = f"{found / (bad * args.trials):.1%}" if bad else "-"
    kind = f"{right / found:.1%}" if found else "-"
    rounds_used = statistics.mean(used)
    bisect = math.ceil(math.log2(n)) + 1 if bad else 1
    print(f"{n:>6} {bad:>5} {n_rounds:>6} {det:>7} {kind:>7} {fa / ((n - bad) * args.trials):>9.3%} "
          f"{fa_trials:>5}/{args.trials:<6} {rounds_used:>11.1f} {rounds_used * args.round_seconds:>7.0f} "
          f"{bisect:>13} {time.perf_counter() - t0:>6.1f}")


if __name__ == "__main__":
    main()
