"""The Python API: the results of runs and logs as pandas DataFrames, and their explanation, from the same
code the CLI runs.

    import hpcbench
    df = hpcbench.load("runs/scaling-20261122T101500Z")       # one row per point x repeat (hpcbench summarize)
    logs = hpcbench.load_logs(["nccl-tests/", "hvd.log"])       # logs of jobs hpcbench did not launch, same columns
    why = hpcbench.explain("runs/scaling-20261122T101500Z")    # hpcbench explain: typed findings per point
    why.to_frame()                                              # one row per point x finding

Every declared measurement parameter (plan/fields.py) is a column of ``load``, and so is each environment
variable (env.NAME) and [slurm] setting a sweep varies, next to the state, the reason and the measured figures
(the columns of records.csv). Bad input raises hpcbench.errors.ConfigError (or NoSuchFile), with the message
the CLI prints.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pandas is imported when a frame is made, never at `import hpcbench`
    import pandas as pd

    from hpcbench.explain import PointWhy
    from hpcbench.explain.summary import RunWhy
    from hpcbench.findings import Finding

PathLike = str | Path
# The columns of Explanation.to_frame(), in order: one row per point x finding.
EXPLAIN_COLUMNS = ("point", "rule", "severity", "claim", "evidence", "effect", "fix", "because")


def _frame(samples: Iterable[Any]) -> pd.DataFrame:
    import pandas as pd

    from hpcbench.report.tidy import tidy_columns, tidy_row

    samples = list(samples)
    return pd.DataFrame([tidy_row(s) for s in samples], columns=list(tidy_columns(samples)))


def _paths(paths: PathLike | Iterable[PathLike]) -> list[PathLike]:
    return [paths] if isinstance(paths, (str, Path)) else list(paths)


def load(*paths: PathLike, cluster: str | None = None) -> pd.DataFrame:
    """Run directories, folders of runs, or log files -> a DataFrame, one row per point x repeat.

    Failed, missing and unparsable points are rows too, with their ``state`` and ``reason``.
    """
    from hpcbench.figures.inputs import load as load_inputs

    return _frame(load_inputs(list(paths), cluster).samples)


def load_logs(paths: PathLike | Iterable[PathLike], cluster: str | None = None) -> pd.DataFrame:
    """Logs of jobs hpcbench did not launch (nccl-tests, Horovod, torchrun/DDP with NCCL_DEBUG=INFO; files or
    folders of ``*.log``/``*.out``/``*.err``/``*.txt``) -> a DataFrame with the columns of :func:`load`, one row
    per point a log shows. What had to be inferred is in the ``inferred`` column; ``cluster`` names the cluster
    of logs whose host names do not. A run directory is refused: :func:`load` reads runs."""
    from hpcbench.errors import ConfigError
    from hpcbench.figures.inputs import load as load_inputs

    given = _paths(paths)
    inputs = load_inputs(given, cluster)
    if inputs.run_dirs:
        raise ConfigError(f"{inputs.run_dirs[0].root}: an hpcbench run directory, not a log",
                          hint="read runs with hpcbench.load(...), which takes runs and logs alike")
    return _frame(inputs.samples)


@dataclass(frozen=True)
class Explanation:
    """What ``hpcbench explain`` says, as objects: one PointWhy per point (its Findings, most costly first, and
    for a communication point the peak of the slowest link its traffic crosses)."""

    points: list[PointWhy]

    def __iter__(self) -> Iterator[PointWhy]:
        return iter(self.points)

    def __len__(self) -> int:
        return len(self.points)

    @property
    def findings(self) -> list[tuple[str, Finding]]:
        """(point label, finding) for every finding of every point."""
        return [(w.label, f) for w in self.points for f in w.findings]

    @property
    def run(self) -> RunWhy:
        """What explains the run as a whole: its causes, each once with the points it touches, its caveats and the
        findings many points share (what ``hpcbench explain`` prints first)."""
        from hpcbench.explain.summary import summarize

        return summarize(self.points)

    @property
    def failed(self) -> bool:
        """An error-level finding (Socket while InfiniBand is there, a point without a result): the CLI exits 1."""
        return any(f.fails for w in self.points for f in w.findings)

    def to_frame(self) -> pd.DataFrame:
        """One row per point x finding, the rows of ``hpcbench explain`` (the link peak of a communication point
        included): point, rule, severity, claim, evidence, effect, fix, and ``because``: the root cause a symptom is
        credited to (None for a cause)."""
        import pandas as pd

        from hpcbench.explain.render import rows

        return pd.DataFrame(rows(self.points), columns=list(EXPLAIN_COLUMNS))

    def _repr_html_(self) -> str:  # a notebook shows the table
        return str(self.to_frame()._repr_html_())


def explain(*paths: PathLike, allreduce: PathLike | None = None, baseline: str = "auto",
            cluster: str | None = None) -> Explanation:
    """Why each point of runs and logs scales as it does: the code of ``hpcbench explain PATH...``.

    ``allreduce``: an nccl-tests or hpcbench all_reduce log, the curve the scaling model uses where a run has no
    all_reduce point of the same placement (``--allreduce``); ``baseline``: one of vocab.BASELINES
    (``--baseline``); ``cluster``: the cluster all the logs come from (``--cluster``).
    """
    from hpcbench.explain import explain_paths

    return Explanation(explain_paths(list(paths), baseline=baseline, cluster=cluster, allreduce_file=allreduce))
