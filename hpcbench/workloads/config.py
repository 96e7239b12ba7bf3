"""Rank configs: one frozen dataclass per workload kind, behind each workload's command line (the CLI
is a thin layer over them).

A kind's config has the point's folder, id and label, and every declared parameter (plan/fields.py)
that applies to that kind and reaches the ranks, with the declared default. The classes are written
from the declaration into workloads/_configs.py by ``python -m hpcbench.plan.codegen``; what they do
(the round trip Point -> argv -> config) is workloads/rankconfig.py's RankConfig.
"""

from __future__ import annotations

# CONFIGS and one class per kind (TrainConfig, ...), named as codegen names them: a new kind needs no edit here.
from hpcbench.workloads._configs import *  # noqa: F403
from hpcbench.workloads._configs import __all__ as _CLASSES
from hpcbench.workloads.rankconfig import MODULE, RankConfig

__all__ = [*_CLASSES, "MODULE", "RankConfig"]
