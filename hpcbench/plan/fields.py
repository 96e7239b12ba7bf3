"""THE declaration of every measurement parameter, and of the sweep's scheduler settings.

A measurement parameter is declared once, here: its name, default, check, which workloads it means
something for, whether it is a standing axis of the matrix or may not be an axis at all (and why),
whether it reaches the ranks' command line, and how the report groups by it. Everything else is
derived from this table: the [workload] checks, the [matrix], [[zip]] and [[exclude]] checks (axes.py)
and defaults (spec.py), the Point and its id (expand.py), the ranks' configs and argv
(workloads/config.py), the record reader and the report's grouping keys (report/). The classes a type
checker reads (the Point, the settings, the rank configs) are written from it as source by
``python -m hpcbench.plan.codegen``. Adding a parameter is one entry here, that command, and its use
in a workload.

The rule that ties them: a parameter is part of a point's id exactly when it reaches that point's
ranks (or shapes its job: counts, the workload kind, the repeat), so an id never changes for a value
that has no effect, and a value that has an effect always changes the id. The [slurm] settings say the
same of themselves (Setting.axis): those that change what is measured may be axes and are then in the
point's id; the scheduler's own may move in a [[zip]] and never are.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from typing import Any

from hpcbench.plan import checks as c
from hpcbench.vocab import (
    BACKENDS,
    COLLECTIVES,
    CPU_BINDS,
    DATA,
    DEVICES,
    DTYPES,
    FIRST_NAMES,
    FRAMEWORKS,
    GPU_BINDS,
    KINDS,
    LAUNCHERS,
    MODELS,
    ORDERS,
    RENAMED,
    SCALING,
)

ALL_KINDS = frozenset(KINDS)
TRAIN = frozenset({"train"})
COLLECTIVE = frozenset({"collective"})


@dataclass(frozen=True)
class Param:
    name: str
    default: Any
    check: c.Checker
    doc: str
    type: type = str  # how the ranks' command line reads it: int, float, bool or str
    optional: bool = False  # None (unset) is a value
    kinds: frozenset[str] = ALL_KINDS  # the workloads it means something for: only there is it in the id and argv
    where: str = "workload"  # a [workload] key (an axis too unless refused); "matrix": an axis only; "derived"
    standing: bool = False  # always an axis of the product, in this order (one value when the sweep does not vary it)
    refuse: str = ""  # why it may not be a [matrix] or [[zip]] axis; empty: it may
    ranks: bool = True  # on the ranks' command line; False: the job itself uses it (counts, module, repeat)
    # Added after the first release: in the id and on the command line only when not at its default,
    # so that every point of an older sweep keeps its id and plain job scripts stay short.
    quiet: bool = False
    # How the report groups: "series" (what a curve is of), "layout" (where on the curve),
    # "procedure" (how it was measured), "repeat".
    role: str = "procedure"
    column: str | None = None  # header in the plan table, when it is shown there
    unknown: Any = None  # what a report row takes when its source (a foreign log) does not show it

    def applies(self, kind: str) -> bool:
        return kind in self.kinds

    def stated(self, value: Any) -> bool:
        """Whether ``value`` goes into the id and the command line (a quiet key at its default does not)."""
        return not (self.quiet and value == self.default)

    @property
    def annotation(self) -> Any:
        return self.type | None if self.optional else self.type


PARAMS: tuple[Param, ...] = (
    # The axes first, in the order the matrix product runs through them.
    Param("framework", "ddp", c.choice(FRAMEWORKS, "framework"), "ddp | horovod | none", standing=True, role="series",
          unknown="?"),
    Param("backend", "gloo", c.choice(BACKENDS, "backend"), "communication backend", standing=True, role="series",
          column="backend", unknown="?"),
    Param("model", "mlp", c.choice(MODELS, "model"), "what trains",
          kinds=TRAIN, standing=True, role="series", column="model", unknown="?"),
    Param("batch_size", 32, c.integer(1), "samples per rank and step", type=int, kinds=TRAIN, standing=True,
          role="series", column="batch_size"),
    Param("nodes", 1, c.integer(1), "servers", type=int, where="matrix", standing=True, role="layout", column="nodes"),
    Param("ranks_per_node", 1, c.integer(1), "processes per server", type=int, where="matrix", standing=True,
          role="layout", column="ranks_per_node"),
    Param("gpus_per_node", 0, c.integer(1), "GPUs per server: one rank per GPU (0 on CPU)", type=int,
          where="matrix", standing=True, ranks=False, role="layout"),
    Param("kind", "train", c.choice(KINDS, "workload kind", RENAMED), "which workload runs", ranks=False,
          role="series", unknown="train", refuse="the workload kind decides which keys mean anything and which "
          "tables a point is in; write one sweep per kind"),
    Param("device", "cpu", c.choice(DEVICES, "device"), "cpu | cuda (one rank per GPU)", role="series", unknown="?",
          refuse="cpu and cuda points are counted differently (ranks_per_node, gpus_per_node) and take other "
          "backends; write one sweep per device"),
    Param("data", "synthetic", c.choice(DATA, "data source"), "synthetic or a real data set", kinds=TRAIN,
          role="series"),
    Param("steps", 20, c.integer(1), "timed steps", type=int, kinds=TRAIN),
    Param("warmup_steps", 5, c.integer(0), "steps run first, not timed", type=int, kinds=TRAIN),
    Param("lr", 0.01, c.positive, "learning rate (before lr_scaling)", type=float, kinds=TRAIN),
    Param("repeat", 0, c.integer(0), "which of [sweep] repeats", type=int, where="derived", ranks=False,
          role="repeat", unknown=0, refuse="repeats are not settings: set [sweep] repeats = N"),
    Param("init_timeout_s", 600, c.integer(1), "start-up and collective timeout: a lost peer ends the job, "
          "never hangs it", type=int, quiet=True),
    Param("data_dir", None, c.string(), "the folder `hpcbench data fetch` filled", optional=True, kinds=TRAIN,
          quiet=True, refuse="where the data is read from, not what is measured; vary `data` instead"),
    Param("scaling", "weak", c.choice(SCALING, "scaling"), "weak: batch_size per rank; strong: global_batch_size "
          "split over the ranks", kinds=TRAIN, quiet=True, role="series", unknown="weak",
          refuse="weak and strong scaling pair with different batch keys and are never compared; write one sweep "
          "per scaling mode"),
    Param("global_batch_size", None, c.integer(1), "strong scaling's batch over all ranks", type=int, optional=True,
          kinds=TRAIN, quiet=True, role="series",
          refuse='it pairs with scaling = "strong" and must split evenly over every world size; write one sweep '
          "per global batch"),
    Param("lr_scaling", True, c.boolean, "lr x world size", type=bool, kinds=TRAIN, quiet=True),
    Param("checkpoint", False, c.boolean, "rank 0 writes checkpoint.pt at the end", type=bool, kinds=TRAIN,
          quiet=True, refuse="written after the timed steps, so it changes no measurement"),
    Param("timeline", False, c.boolean, "Horovod timeline into the point folder", type=bool, kinds=TRAIN, quiet=True),
    Param("comm_split", True, c.boolean, "also time the steps without gradient exchange", type=bool, kinds=TRAIN,
          quiet=True),
    Param("fail_rank", -1, c.integer(-1), "fault injection: this rank fails (< 0: off)", type=int, kinds=TRAIN,
          quiet=True, refuse="fault injection tests hpcbench itself, not the cluster; set it in [workload]"),
    Param("fail_step", 1, c.integer(0), "... at this step (1-based; 0: before the rendezvous)", type=int,
          kinds=TRAIN, quiet=True, refuse="fault injection tests hpcbench itself, not the cluster; set it in "
          "[workload]"),
    Param("slow_rank", -1, c.integer(-1), "straggler injection: this rank sleeps slow_ms in every step (< 0: off)",
          type=int, kinds=TRAIN, quiet=True, refuse="straggler injection tests explain itself; set it in [workload]"),
    Param("slow_ms", 100, c.integer(0), "... milliseconds per step, timed and compute-only steps alike", type=int,
          kinds=TRAIN, quiet=True, refuse="straggler injection tests explain itself; set it in [workload]"),
    Param("min_bytes", 8, c.size, "smallest message (nccl-tests -b)", type=int, kinds=COLLECTIVE),
    Param("max_bytes", 1 << 30, c.size, "largest message (-e)", type=int, kinds=COLLECTIVE),
    Param("step_factor", 2, c.integer(2), "size factor between messages (-f)", type=int, kinds=COLLECTIVE),
    Param("dtype", "float32", c.choice(DTYPES, "dtype"), "element type", kinds=COLLECTIVE, role="series"),
    Param("warmup_iters", 5, c.integer(0), "untimed operations per size (-w)", type=int, kinds=COLLECTIVE),
    Param("iters", 20, c.integer(1), "timed operations per size (-n)", type=int, kinds=COLLECTIVE),
    Param("collective", "all_reduce", c.choice(COLLECTIVES, "collective"), "which collective (nccl-tests' name)",
          kinds=COLLECTIVE, quiet=True, role="series", column="collective"),
)
BY_NAME: dict[str, Param] = {p.name: p for p in PARAMS}
NAMES = tuple(BY_NAME)
WORKLOAD_KEYS = tuple(p.name for p in PARAMS if p.where == "workload")
STANDING = tuple(p.name for p in PARAMS if p.standing)  # the product's first axes, always there
AXES = tuple(p.name for p in PARAMS if not p.refuse)  # the parameters a [matrix] or [[zip]] may vary


@cache  # once per kind: rendering 10,000 job scripts asks 10,000 times
def rank_params(kind: str) -> tuple[Param, ...]:
    """The declared parameters a rank of ``kind`` is given (its config's fields), in declaration order."""
    return tuple(p for p in PARAMS if p.applies(kind) and p.ranks)


def names(*roles: str) -> tuple[str, ...]:
    return tuple(p.name for p in PARAMS if p.role in roles)


SERIES = names("series")  # what a curve is of: same values, same curve
LAYOUT = names("layout")  # where on the curve
POINT_KEY = (*SERIES, *LAYOUT)  # what a point measures: --compare matches points on these (and on what varies)
# Every parameter but the repeat: points that differ in any (steps, lr, ...) are never repeats of one another,
# nor on one curve (with the point's env and [slurm] axes, figures/aggregate.point_key and figures/baseline.series_key).
MEASURED = names("series", "layout", "procedure")
CURVE = names("series", "procedure")


def id_params(values: dict[str, Any]) -> dict[str, Any]:
    """The values a point's id hashes: each parameter that applies to its kind, unless quiet at its default
    (a parameter ``values`` leaves out counts as its default), and the point's own environment variables
    and measured [slurm] settings (its axes of those kinds) when it has any: a sweep without such axes
    keeps every id it had."""
    kind = RENAMED.get(values["kind"], values["kind"])
    given = {p.name: values.get(p.name, p.default) for p in PARAMS if p.applies(kind)}
    out = {n: v for n, v in given.items() if BY_NAME[n].stated(v)}
    out["kind"] = FIRST_NAMES.get(kind, kind)  # a renamed kind keeps its points' ids
    for extra in ("env", "slurm"):
        if values.get(extra):
            out[extra] = dict(values[extra])
    return out


# --- sweep and scheduler settings: not measured, so never part of a point's id -----------------------------------
@dataclass(frozen=True)
class Setting:
    name: str
    default: Any
    check: c.Checker
    doc: str
    type: Any = str
    # "point": changes what is measured, so it may be a [matrix] axis, and then is part of the point (its id,
    # label and job script); "job": the scheduler's alone, it may move with measured keys in a [[zip]] (time
    # with nodes) and then differs per job script, never in an id; "": never an axis, for ``refuse``'s reason.
    axis: str = ""
    refuse: str = ""

    @property
    def why_not(self) -> str:
        return self.refuse or SAME_FOR_ALL


SAME_FOR_ALL = "how the sweep is submitted, the same for all its points"
JOB_ONLY = ("a scheduler setting, never part of a point's id, so as a [matrix] axis it would repeat every point; "
            "move it in a [[zip]] with a measured key (nodes = [1, 2] with time = [\"00:10:00\", \"00:20:00\"])")
SOFTWARE = ("the software stack is one per sweep (each record names its versions); compare two runs with "
            "`hpcbench summarize --compare OLD NEW`")


SWEEP = (
    # "" (no name can be empty) stands for the file's name, which parse() puts in: a parsed name is a str.
    Setting("name", "", c.string(c.NAME_RE, "a name of letters, digits, '.', '_' and '-'"),
            "run directories are runs/<name>-<UTC time>; default: the file's name", str),
    Setting("description", "", c.text, "what the study is for"),
    Setting("repeats", 1, c.integer(1), "each point runs this many times (separate jobs, separate ids)", int),
    Setting("order", "shuffled", c.choice(ORDERS, "run order"), "the order the points are submitted (and so run) "
            "in: shuffled (by seed; repeats in rounds that each hold every point once, so a machine's drift falls "
            "on every backend alike) or declared (the matrix's own order)"),
    Setting("seed", 1, c.integer(0), "seed of the shuffled order: the same seed, the same order (kept in plan.json)",
            int),
)

SLURM = (
    Setting("partition", None, c.string(), "sbatch --partition", str | None, axis="job"),
    Setting("account", None, c.string(), "sbatch --account", str | None, axis="job"),
    Setting("qos", None, c.string(), "sbatch --qos", str | None, axis="job"),
    Setting("gres", None, c.gres, "the site's GPU request, e.g. gpu:a100:{gpus}; unset: --gpus-per-node", str | None,
            refuse="the site's syntax for asking for GPUs, one per cluster; vary gpus_per_node"),
    Setting("time", "00:30:00", c.slurm_time, "time limit per point", axis="job"),
    Setting("cpus_per_task", 1, c.integer(1), "cores per rank; also OMP_NUM_THREADS and torch's threads", int,
            axis="point"),
    Setting("mem", None, c.string(re.compile(r"\d+[KMGT]?"), "a Slurm memory size such as 16G"), "sbatch --mem",
            str | None, axis="job"),
    Setting("launcher", "srun", c.choice(LAUNCHERS, "launcher"), "what starts the ranks", axis="point"),
    Setting("mpi", None, c.string(re.compile(r"[A-Za-z0-9_.-]+"), "an srun MPI plugin name (see: srun --mpi=list)"),
            "srun --mpi plugin; unset: the site's MpiDefault", str | None, axis="point"),
    Setting("cpu_bind", "sockets", c.choice(CPU_BINDS, "cpu binding"), "srun --cpu-bind / mpirun --bind-to",
            axis="point"),
    Setting("gpu_bind", "block", c.choice(GPU_BINDS, "gpu binding"), "GPU points: put each rank on its GPU's socket "
            "(block: srun --distribution=block:block / mpirun --rank-by core; closest: srun --gpu-bind=single:1)",
            axis="point"),
    Setting("python", None, c.string(), "the ranks' interpreter; unset: the one running hpcbench", str | None,
            refuse=SOFTWARE),
    Setting("module_use", (), c.str_list, "`module use` folders, before the loads", tuple[str, ...], refuse=SOFTWARE),
    Setting("modules", (), c.str_list, "one `module load` line each, in order", tuple[str, ...], refuse=SOFTWARE),
    Setting("env", (), c.env_table, "exported in the job; NCCL_DEBUG=INFO is always set", tuple[tuple[str, str], ...],
            refuse='environment variables vary as [matrix.env], e.g. NCCL_ALGO = ["Ring", "Tree"]'),
    Setting("sbatch_args", (), c.sbatch_args, "extra #SBATCH lines (long options only)", tuple[str, ...],
            refuse="raw options hpcbench does not read, so no report could tell their points apart; vary the "
            "[slurm] key that says the same (partition, mem, cpus_per_task, ...)"),
    Setting("exclude", (), c.str_list, "nodes kept out of every job (sbatch --exclude), e.g. the suspects of a hunt; "
            "`--exclude-nodes @hunt.json` adds to it", tuple[str, ...],
            refuse="which nodes may run the jobs, the same for every point; a node to compare is a [matrix] of "
            "its own sweep"),
    Setting("launcher_args", (), c.str_list, "extra launcher arguments, each quoted", tuple[str, ...],
            refuse="raw options hpcbench does not read, so no report could tell their points apart; vary "
            "launcher, cpu_bind or mpi, or an environment variable in [matrix.env]"),
    Setting("max_jobs_in_queue", 0, c.integer(0), "wait while this many of the run's jobs are queued (0: no limit)",
            int),
    Setting("pack", False, c.boolean, "run the points as job steps inside one allocation", bool),
    Setting("max_retries", 0, c.integer(0), "resubmit a point the cluster failed (node failure, preemption, a lost "
            "peer) up to this many times while --wait runs; a workload's own error is never retried", int),
)
SLURM_BY_NAME = {s.name: s for s in SLURM}
POINT_SETTINGS = tuple(s.name for s in SLURM if s.axis == "point")  # [slurm] keys a [matrix] may vary: in the point
JOB_SETTINGS = tuple(s.name for s in SLURM if s.axis == "job")  # [slurm] keys a [[zip]] may move: the job only
ENV_AXIS = "env"  # [matrix.env] NAME = [...]; elsewhere (in [[zip]], [[exclude]]) the key env.NAME


def refusal(key: str) -> str | None:
    """Why ``key`` may not be a [matrix] axis, or None when it may (or is no key at all)."""
    if key in BY_NAME:
        return BY_NAME[key].refuse or None
    if key in SLURM_BY_NAME:
        s = SLURM_BY_NAME[key]
        return None if s.axis == "point" else (JOB_ONLY if s.axis == "job" else s.why_not)
    return None
