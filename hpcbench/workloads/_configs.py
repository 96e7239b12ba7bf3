# Generated from hpcbench/plan/fields.py by `python -m hpcbench.plan.codegen`: do not edit; change the declaration
# there and run it again (tests/test_codegen.py checks that this file is what it gives).
"""Each workload kind's rank config: the point's folder, id and label (RankConfig), and every
declared parameter that applies to the kind and reaches its ranks."""

from __future__ import annotations

from dataclasses import dataclass

from hpcbench.workloads.rankconfig import RankConfig


@dataclass(frozen=True)
class TrainConfig(RankConfig):
    """What each rank of a point of kind "train" runs with."""

    kind = "train"

    framework: str = "ddp"
    backend: str = "gloo"
    model: str = "mlp"
    batch_size: int = 32
    nodes: int = 1
    ranks_per_node: int = 1
    device: str = "cpu"
    data: str = "synthetic"
    steps: int = 20
    warmup_steps: int = 5
    lr: float = 0.01
    init_timeout_s: int = 600
    data_dir: str | None = None
    scaling: str = "weak"
    global_batch_size: int | None = None
    lr_scaling: bool = True
    checkpoint: bool = False
    timeline: bool = False
    comm_split: bool = True
    fail_rank: int = -1
    fail_step: int = 1
    slow_rank: int = -1
    slow_ms: int = 100


@dataclass(frozen=True)
class CollectiveConfig(RankConfig):
    """What each rank of a point of kind "collective" runs with."""

    kind = "collective"

    framework: str = "ddp"
    backend: str = "gloo"
    nodes: int = 1
    ranks_per_node: int = 1
    device: str = "cpu"
    init_timeout_s: int = 600
    min_bytes: int = 8
    max_bytes: int = 1073741824
    step_factor: int = 2
    dtype: str = "float32"
    warmup_iters: int = 5
    iters: int = 20
    collective: str = "all_reduce"


CONFIGS: dict[str, type[RankConfig]] = {"train": TrainConfig, "collective": CollectiveConfig}
__all__ = ["CONFIGS", "TrainConfig", "CollectiveConfig"]
