# Generated from hpcbench/plan/fields.py by `python -m hpcbench.plan.codegen`: do not edit; change the declaration
# there and run it again (tests/test_codegen.py checks that this file is what it gives).
"""A report row's parameters (SampleParams: each as a source shows it, else its ``unknown``) and
a point's view of them (PointView: read from its first repeat, the same in every repeat)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # samples.py imports this module
    from hpcbench.figures.samples import Sample


@dataclass(kw_only=True)
class SampleParams:
    """One field per declared parameter."""

    framework: str = "?"
    backend: str = "?"
    model: str | None = "?"
    batch_size: int | None = None
    nodes: int | None = None
    ranks_per_node: int | None = None
    gpus_per_node: int | None = None
    kind: str = "train"
    device: str = "?"
    data: str | None = None
    steps: int | None = None
    warmup_steps: int | None = None
    lr: float | None = None
    repeat: int = 0
    init_timeout_s: int | None = None
    data_dir: str | None = None
    scaling: str | None = "weak"
    global_batch_size: int | None = None
    lr_scaling: bool | None = None
    checkpoint: bool | None = None
    timeline: bool | None = None
    comm_split: bool | None = None
    fail_rank: int | None = None
    fail_step: int | None = None
    slow_rank: int | None = None
    slow_ms: int | None = None
    min_bytes: int | None = None
    max_bytes: int | None = None
    step_factor: int | None = None
    dtype: str | None = None
    warmup_iters: int | None = None
    iters: int | None = None
    collective: str | None = None


class PointView:
    """A point's parameters and origin: its first repeat's."""

    samples: list[Sample]

    @property
    def framework(self) -> str:
        return self.samples[0].framework

    @property
    def backend(self) -> str:
        return self.samples[0].backend

    @property
    def model(self) -> str | None:
        return self.samples[0].model

    @property
    def batch_size(self) -> int | None:
        return self.samples[0].batch_size

    @property
    def nodes(self) -> int | None:
        return self.samples[0].nodes

    @property
    def ranks_per_node(self) -> int | None:
        return self.samples[0].ranks_per_node

    @property
    def gpus_per_node(self) -> int | None:
        return self.samples[0].gpus_per_node

    @property
    def kind(self) -> str:
        return self.samples[0].kind

    @property
    def device(self) -> str:
        return self.samples[0].device

    @property
    def data(self) -> str | None:
        return self.samples[0].data

    @property
    def steps(self) -> int | None:
        return self.samples[0].steps

    @property
    def warmup_steps(self) -> int | None:
        return self.samples[0].warmup_steps

    @property
    def lr(self) -> float | None:
        return self.samples[0].lr

    @property
    def repeat(self) -> int:
        return self.samples[0].repeat

    @property
    def init_timeout_s(self) -> int | None:
        return self.samples[0].init_timeout_s

    @property
    def data_dir(self) -> str | None:
        return self.samples[0].data_dir

    @property
    def scaling(self) -> str | None:
        return self.samples[0].scaling

    @property
    def global_batch_size(self) -> int | None:
        return self.samples[0].global_batch_size

    @property
    def lr_scaling(self) -> bool | None:
        return self.samples[0].lr_scaling

    @property
    def checkpoint(self) -> bool | None:
        return self.samples[0].checkpoint

    @property
    def timeline(self) -> bool | None:
        return self.samples[0].timeline

    @property
    def comm_split(self) -> bool | None:
        return self.samples[0].comm_split

    @property
    def fail_rank(self) -> int | None:
        return self.samples[0].fail_rank

    @property
    def fail_step(self) -> int | None:
        return self.samples[0].fail_step

    @property
    def slow_rank(self) -> int | None:
        return self.samples[0].slow_rank

    @property
    def slow_ms(self) -> int | None:
        return self.samples[0].slow_ms

    @property
    def min_bytes(self) -> int | None:
        return self.samples[0].min_bytes

    @property
    def max_bytes(self) -> int | None:
        return self.samples[0].max_bytes

    @property
    def step_factor(self) -> int | None:
        return self.samples[0].step_factor

    @property
    def dtype(self) -> str | None:
        return self.samples[0].dtype

    @property
    def warmup_iters(self) -> int | None:
        return self.samples[0].warmup_iters

    @property
    def iters(self) -> int | None:
        return self.samples[0].iters

    @property
    def collective(self) -> str | None:
        return self.samples[0].collective

    @property
    def source(self) -> str:
        return self.samples[0].source

    @property
    def label(self) -> str:
        return self.samples[0].label

    @property
    def point_id(self) -> str | None:
        return self.samples[0].point_id

    @property
    def world_size(self) -> int | None:
        return self.samples[0].world_size

    @property
    def cluster(self) -> str | None:
        return self.samples[0].cluster

    @property
    def comm_method(self) -> str | None:
        return self.samples[0].comm_method

    @property
    def layout(self) -> str:
        return self.samples[0].layout

    @property
    def precision(self) -> str | None:
        return self.samples[0].precision

    @property
    def env(self) -> tuple[tuple[str, str], ...]:
        return self.samples[0].env

    @property
    def slurm(self) -> tuple[tuple[str, Any], ...]:
        return self.samples[0].slurm
