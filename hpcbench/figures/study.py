"""The figures of runs and logs, as both the report and `hpcbench explain` start from them: the inputs read,
their repeats aggregated, and speedup and efficiency against the baseline."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from hpcbench.figures import baseline as baseline_mod
from hpcbench.figures.aggregate import Agg, aggregate
from hpcbench.figures.inputs import Inputs, load


@dataclass
class Study:
    inputs: Inputs
    aggs: list[Agg]
    baseline: baseline_mod.BaselineResult


def study(paths: list[str | Path], cluster: str | None = None, baseline: str = "auto",
          inputs: Inputs | None = None) -> Study:
    """``paths`` read (or ``inputs`` already read), aggregated and given their baselines (mode ``baseline``)."""
    inputs = inputs or load(paths, cluster)
    aggs = aggregate(inputs.samples)
    return Study(inputs, aggs, baseline_mod.apply(aggs, baseline))
