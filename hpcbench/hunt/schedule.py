"""Which pairs of nodes a hunt measures, round by round.

Each round is a set of disjoint pairs that run at the same time (one job step per pair), so a round costs
one pair test whatever the node count. The rounds are the first ``count`` rounds of the circle method's
round-robin over a shuffled node order: every node is in one pair per round (one sits out when the count
is odd) and no pair repeats. All N-1 rounds cover every pair; a few rounds already give every node several
different partners, which is what tells a bad node (slow with every partner) from a bad pairing (slow with
one). Why a few rounds and not bisection: benchmarks/hunt_scale.py (bisection needs log2 N rounds for one
bad node and more for several; random rounds find any number of bad nodes in a constant number).
"""

from __future__ import annotations

import random
from collections.abc import Sequence

Pair = tuple[str, str]

# Enough partners per node to outvote one bad partner: a healthy node paired once with a bad node has
# 1 slow pair out of ROUNDS. The simulation (benchmarks/hunt_scale.py) shows detection and false alarms
# at 3, 4 and 5.
ROUNDS = 4


def rounds(nodes: Sequence[str], count: int = ROUNDS, seed: int = 0) -> list[list[Pair]]:
    """``count`` rounds of disjoint pairs over ``nodes`` (at most N-1 rounds: then every pair once)."""
    order = list(dict.fromkeys(nodes))
    if len(order) < 2:
        return []
    random.Random(seed).shuffle(order)
    ring: list[str | None] = [*order, None] if len(order) % 2 else list(order)  # None: sits this round out
    n = len(ring)
    out: list[list[Pair]] = []
    for r in range(min(count, n - 1)):
        # Circle method: ring[0] stays, the rest turn by one place each round.
        turned = [ring[0], *(ring[1 + (i + r) % (n - 1)] for i in range(n - 1))]
        pairs = [(turned[i], turned[n - 1 - i]) for i in range(n // 2)]
        out.append([(a, b) if a < b else (b, a) for a, b in pairs if a is not None and b is not None])
    return out


def confirm_round(suspects: Sequence[str], healthy: Sequence[str]) -> list[Pair]:
    """One round that pairs each suspect with a node already found healthy, so that a suspect's slowness is
    seen against a partner that cannot be the cause (fewer healthy nodes than suspects: the rest wait)."""
    return [(s, h) if s < h else (h, s) for s, h in zip(suspects, healthy)]
