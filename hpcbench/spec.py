"""Sweep files: frozen dataclasses for the TOML, and the one loader that validates them.

Every error names ``file: dotted.key`` and what is allowed, so a user can fix the file
without reading code.
"""

from __future__ import annotations

import difflib
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hpcbench.errors import ConfigError
from hpcbench.workloads.models import DATASET_SHAPES, MODELS

if TYPE_CHECKING:
    from hpcbench.cluster import ClusterProfile

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

BACKENDS = ("gloo", "mpi", "nccl", "oneccl")
FRAMEWORKS = ("ddp", "horovod", "none")
KINDS = ("train", "allreduce")
DEVICES = ("cpu", "cuda")
LAUNCHERS = ("srun", "mpirun", "horovodrun", "torchrun")
DATA = ("synthetic", "mnist", "cifar10")
SCALING = ("weak", "strong")

_TIME_RE = re.compile(r"(\d+-)?\d+(:\d{1,2}){0,2}|\d+-\d+")
_ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


@dataclass(frozen=True)
class SweepInfo:
    name: str
    description: str = ""
    repeats: int = 1


@dataclass(frozen=True)
class SlurmSettings:
    partition: str | None = None
    account: str | None = None
    qos: str | None = None
    gres: str | None = None  # e.g. "gpu:a100:{gpus}"; None asks with --gpus-per-node
    time: str = "00:30:00"
    cpus_per_task: int = 1
    mem: str | None = None
    launcher: str = "srun"
    mpi: str | None = None  # srun --mpi plugin (pmix, pmi2, ...); None: the site's MpiDefault
    cpu_bind: str = "sockets"
    python: str | None = None  # None: the interpreter that runs hpcbench
    module_use: tuple[str, ...] = ()  # `module use` folders, before the loads
    modules: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    sbatch_args: tuple[str, ...] = ()
    launcher_args: tuple[str, ...] = ()  # extra arguments for srun / mpirun, each quoted
    max_jobs_in_queue: int = 0  # 0: no limit; else wait before submitting while this many of the run's jobs are queued
    pack: bool = False  # run the points as job steps inside one allocation of the largest node count


@dataclass(frozen=True, kw_only=True)
class AllreduceSizes:
    """kind = "allreduce": sizes min_bytes, min_bytes*step_factor, ... up to max_bytes. Declared once
    for the sweep file (Workload), the point (plan.Point) and the rank's command line (AllreduceConfig)."""

    min_bytes: int = 8
    max_bytes: int = 1 << 30
    step_factor: int = 2
    dtype: str = "float32"
    warmup_iters: int = 5
    iters: int = 20


@dataclass(frozen=True)
class Workload(AllreduceSizes):
    kind: str = "train"
    framework: str = "ddp"
    model: str = "mlp"
    backend: str = "gloo"
    device: str = "cpu"
    data: str = "synthetic"
    batch_size: int = 32
    steps: int = 20
    warmup_steps: int = 5
    lr: float = 0.01
    # Fault injection, for testing how failures are reported. fail_rank < 0: off.
    fail_rank: int = -1  # this rank fails (ranks beyond the world size never exist, so small points run clean)
    fail_step: int = 1  # ... raising at this step (1-based); 0: it never joins the rendezvous
    init_timeout_s: int = 600  # process-group timeout: a lost peer ends the job instead of hanging it
    # --- training workloads (issue 3) ---
    data_dir: str | None = None  # real data sets: the folder `hpcbench data fetch` filled
    scaling: str = "weak"  # weak: batch_size per rank; strong: global_batch_size split over the ranks
    global_batch_size: int | None = None
    lr_scaling: bool = True  # lr x world size (Goyal et al.; Horovod's examples do the same)
    checkpoint: bool = False  # rank 0 writes checkpoint.pt at the end
    timeline: bool = False  # Horovod timeline (HOROVOD_TIMELINE) into the point folder
    comm_split: bool = True  # also time the steps without gradient exchange (compute-only)


@dataclass(frozen=True)
class Matrix:
    """Ordered axes (name, values). ``excludes`` drop any point matching every key of one entry."""

    axes: tuple[tuple[str, tuple[Any, ...]], ...]
    excludes: tuple[dict[str, tuple[Any, ...]], ...] = ()


@dataclass(frozen=True)
class SweepSpec:
    path: str
    text: str  # the TOML as read, copied into the run directory
    sweep: SweepInfo
    slurm: SlurmSettings
    workload: Workload
    matrix: Matrix = field(default_factory=lambda: Matrix(()))
    cluster: ClusterProfile | None = None


# --- field tables -------------------------------------------------------------------------------
# One table per section: key -> (checker, default). A checker takes (value, where) and returns the
# normalised value or raises ConfigError.

Checker = Callable[[Any, str], Any]


def _fail(where: str, msg: str) -> ConfigError:
    return ConfigError(f"{where}: {msg}")


def _typename(v: Any) -> str:
    return {bool: "boolean", int: "integer", float: "float", str: "string", list: "array", dict: "table"}.get(
        type(v), type(v).__name__
    )


def _int(minimum: int = 0) -> Checker:
    def check(v: Any, where: str) -> int:
        if isinstance(v, bool) or not isinstance(v, int):
            raise _fail(where, f"expected an integer >= {minimum}, got {_typename(v)} {v!r}")
        if v < minimum:
            raise _fail(where, f"expected an integer >= {minimum}, got {v}")
        return v

    return check


def _float(v: Any, where: str) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or v <= 0:
        raise _fail(where, f"expected a positive number, got {_typename(v)} {v!r}")
    return float(v)


_CONTROL_RE = re.compile(r"[\x00-\x1f\x7f]")


def _str(pattern: re.Pattern[str] | None = None, what: str = "") -> Checker:
    def check(v: Any, where: str) -> str:
        if not isinstance(v, str) or not v:
            raise _fail(where, f"expected a non-empty string, got {_typename(v)} {v!r}")
        # These values land on one line of a job script (#SBATCH, module load, the launcher line):
        # a newline there would start a new shell command, so control characters are refused.
        if _CONTROL_RE.search(v):
            raise _fail(where, f"{v!r} contains a newline or control character; write it on one line")
        # fullmatch: '$' in a pattern would let a trailing newline through.
        if pattern is not None and not pattern.fullmatch(v):
            raise _fail(where, f"{v!r} is not {what}")
        return v

    return check


def _text(v: Any, where: str) -> str:
    if not isinstance(v, str):
        raise _fail(where, f"expected a string, got {_typename(v)} {v!r}")
    return v


def _bool(v: Any, where: str) -> bool:
    if not isinstance(v, bool):
        raise _fail(where, f"expected true or false, got {_typename(v)} {v!r}")
    return v


def _choice(choices: tuple[str, ...], noun: str) -> Checker:
    def check(v: Any, where: str) -> str:
        if not isinstance(v, str) or v not in choices:
            shown = repr(v) if isinstance(v, str) else f"{_typename(v)} {v!r}"
            raise _fail(where, f"unknown {noun} {shown} (choose from: {', '.join(choices)})")
        return v

    return check


def _str_list(v: Any, where: str) -> tuple[str, ...]:
    if not isinstance(v, list):
        raise _fail(where, f"expected an array of strings, got {_typename(v)} {v!r}")
    return tuple(_str()(x, f"{where}[{i}]") for i, x in enumerate(v))


def _sbatch_args(v: Any, where: str) -> tuple[str, ...]:
    args = _str_list(v, where)
    for i, a in enumerate(args):
        if not a.startswith("--"):
            raise _fail(f"{where}[{i}]", f"{a!r} is not a long sbatch option (write it as \"--option=value\")")
    return args


def _env(v: Any, where: str) -> tuple[tuple[str, str], ...]:
    if not isinstance(v, dict):
        raise _fail(where, f"expected a table of NAME = \"value\", got {_typename(v)}")
    out = []
    for k, val in v.items():
        if not _ENV_NAME_RE.fullmatch(k):
            raise _fail(f"{where}.{k}", "not a valid environment variable name")
        if isinstance(val, bool) or not isinstance(val, (str, int, float)):
            raise _fail(f"{where}.{k}", f"expected a string or number, got {_typename(val)}")
        if "\x00" in str(val):  # a shell cannot carry NUL; newlines and the like are quoted instead
            raise _fail(f"{where}.{k}", "contains a NUL character")
        out.append((k, str(val)))
    return tuple(out)


# --- allreduce (kind = "allreduce") ---------------------------------------------------------------
DTYPES = ("float32", "float64", "float16", "bfloat16", "int32", "int64")
_SIZE_RE = re.compile(r"^(\d+)\s*([KMGT]?)(i?B)?$", re.IGNORECASE)


def parse_size(v: Any, where: str) -> int:
    """Bytes from an integer or a string such as "64M" or "1G" (binary multiples, as nccl-tests' -b/-e)."""
    if isinstance(v, int) and not isinstance(v, bool) and v >= 1:
        return v
    m = _SIZE_RE.match(v.strip()) if isinstance(v, str) else None
    if not m or int(m.group(1)) < 1:
        raise _fail(where, f"expected a size in bytes such as 8, \"64K\", \"1G\", got {_typename(v)} {v!r}")
    return int(m.group(1)) << (10 * " KMGT".index((m.group(2) or " ").upper()))


_ALLREDUCE_CHECKERS: dict[str, Checker] = {"min_bytes": parse_size, "max_bytes": parse_size, "step_factor": _int(2),
                                           "dtype": _choice(DTYPES, "dtype"), "warmup_iters": _int(0),
                                           "iters": _int(1)}
ALLREDUCE_FIELDS: dict[str, tuple[Checker, Any]] = {
    f.name: (_ALLREDUCE_CHECKERS[f.name], f.default) for f in fields(AllreduceSizes)}


SWEEP_FIELDS: dict[str, tuple[Checker, Any]] = {
    "name": (_str(_NAME_RE, "a name of letters, digits, '.', '_' and '-'"), None),
    "description": (_text, ""),
    "repeats": (_int(1), 1),
}


def _gres(v: Any, where: str) -> str:
    v = _str()(v, where)
    if "{gpus}" not in v:
        raise _fail(where, f"{v!r} has no {{gpus}} placeholder (write it as \"gpu:{{gpus}}\" or \"gpu:a100:{{gpus}}\")")
    return v


SLURM_FIELDS: dict[str, tuple[Checker, Any]] = {
    "partition": (_str(), None),
    "account": (_str(), None),
    "qos": (_str(), None),
    "gres": (_gres, None),
    "time": (_str(_TIME_RE, "a Slurm time limit (MM, HH:MM:SS, D-HH, D-HH:MM:SS)"), "00:30:00"),
    "cpus_per_task": (_int(1), 1),
    "mem": (_str(re.compile(r"^\d+[KMGT]?$"), "a Slurm memory size such as 16G"), None),
    "launcher": (_choice(LAUNCHERS, "launcher"), "srun"),
    "mpi": (_str(re.compile(r"^[A-Za-z0-9_.-]+$"), "an srun MPI plugin name (see: srun --mpi=list)"), None),
    "cpu_bind": (_choice(("sockets", "cores", "none"), "cpu binding"), "sockets"),
    "python": (_str(), None),
    "module_use": (_str_list, ()),
    "modules": (_str_list, ()),
    "env": (_env, ()),
    "sbatch_args": (_sbatch_args, ()),
    "launcher_args": (_str_list, ()),
    "max_jobs_in_queue": (_int(0), 0),
    "pack": (_bool, False),
}

WORKLOAD_FIELDS: dict[str, tuple[Checker, Any]] = {
    "kind": (_choice(KINDS, "workload kind"), "train"),
    "framework": (_choice(FRAMEWORKS, "framework"), "ddp"),
    "model": (_choice(tuple(MODELS), "model"), "mlp"),
    "backend": (_choice(BACKENDS, "backend"), "gloo"),
    "device": (_choice(DEVICES, "device"), "cpu"),
    "data": (_choice(DATA, "data source"), "synthetic"),
    "batch_size": (_int(1), 32),
    "steps": (_int(1), 20),
    "warmup_steps": (_int(0), 5),
    "lr": (_float, 0.01),
    "fail_rank": (_int(-1), -1),
    "fail_step": (_int(0), 1),
    "init_timeout_s": (_int(1), 600),
    "data_dir": (_str(), None),
    "scaling": (_choice(SCALING, "scaling"), "weak"),
    "global_batch_size": (_int(1), None),
    "lr_scaling": (_bool, True),
    "checkpoint": (_bool, False),
    "timeline": (_bool, False),
    "comm_split": (_bool, True),
    **ALLREDUCE_FIELDS,
}

# Matrix axes: name -> checker for one value. Order here is the order of the plan table.
MATRIX_AXES: dict[str, Checker] = {
    "framework": _choice(FRAMEWORKS, "framework"),
    "backend": _choice(BACKENDS, "backend"),
    "model": _choice(tuple(MODELS), "model"),
    "batch_size": _int(1),
    "nodes": _int(1),
    "ranks_per_node": _int(1),
    "gpus_per_node": _int(1),
}

SECTIONS = ("cluster", "sweep", "slurm", "workload", "matrix", "exclude")


def _unknown(where: str, key: str, valid: Any) -> ConfigError:
    valid = sorted(valid)
    close = difflib.get_close_matches(key, valid, n=1)
    hint = f"; did you mean '{close[0]}'?" if close else ""
    return ConfigError(f"{where}: unknown key (valid keys: {', '.join(valid)}){hint}")


def _section(raw: Any, name: str, fields: dict[str, tuple[Checker, Any]], prefix: str) -> dict[str, Any]:
    where = f"{prefix}{name}"
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise _fail(where, f"expected a table [{name}], got {_typename(raw)}")
    out = {}
    for key, value in raw.items():
        if key not in fields:
            raise _unknown(f"{where}.{key}", key, fields)
        out[key] = fields[key][0](value, f"{where}.{key}")
    for key, (_, default) in fields.items():
        out.setdefault(key, default)
    return out


def _axis_values(name: str, raw: Any, where: str) -> tuple[Any, ...]:
    values = raw if isinstance(raw, list) else [raw]
    if not values:
        raise _fail(where, "expected at least one value")
    check = MATRIX_AXES[name]
    out: list[Any] = []
    for i, v in enumerate(values):
        v = check(v, f"{where}[{i}]" if isinstance(raw, list) else where)
        if v in out:
            raise _fail(f"{where}[{i}]", f"duplicate value {v!r}")
        out.append(v)
    return tuple(out)


def _cluster(raw: Any, override: str | None, path: str, p: str, base: Path | None) -> ClusterProfile | None:
    from hpcbench import cluster

    if override:
        return cluster.load(override, path)
    if raw is None:
        return None
    if isinstance(raw, str):
        return cluster.load(raw, path)
    base = base or Path(path).resolve().parent
    return cluster.from_table(raw, f"{p}cluster", f"{path}: [cluster]", base, "inline")


def parse(text: str, path: str = "<sweep>", cluster: str | None = None, base: Path | None = None) -> SweepSpec:
    """Validate TOML text into a SweepSpec. Raises ConfigError naming ``path: key``.

    ``cluster`` names a profile that replaces the sweep's own ``cluster`` key (``--cluster``).
    ``base`` is the folder relative paths are relative to, when not ``path``'s (a run's copy).
    """
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{path}: not valid TOML: {e}", hint="check the line and column named above") from None
    p = f"{path}: "
    for key in raw:
        if key not in SECTIONS:
            raise _unknown(f"{p}{key}", key, SECTIONS)

    sweep = _section(raw.get("sweep"), "sweep", SWEEP_FIELDS, p)
    if sweep["name"] is None:
        stem = Path(path).stem
        sweep["name"] = stem if _NAME_RE.fullmatch(stem) else "sweep"
    profile = _cluster(raw.get("cluster"), cluster, path, p, base)
    slurm = _section(raw.get("slurm"), "slurm", SLURM_FIELDS, p)
    if profile is not None:
        from hpcbench.cluster import merge_slurm

        slurm = merge_slurm(profile, raw.get("slurm") or {}, slurm)
    workload = _section(raw.get("workload"), "workload", WORKLOAD_FIELDS, p)
    matrix = _matrix(raw.get("matrix"), raw.get("exclude"), workload, p)

    spec = SweepSpec(
        path=path,
        text=text,
        sweep=SweepInfo(**sweep),
        slurm=SlurmSettings(**slurm),
        workload=Workload(**workload),
        matrix=matrix,
        cluster=profile,
    )
    _domain_rules(spec, raw.get("matrix"), p)
    return spec


def _matrix(raw: Any, raw_excludes: Any, workload: dict[str, Any], p: str) -> Matrix:
    raw = {} if raw is None else raw
    if not isinstance(raw, dict):
        raise _fail(f"{p}matrix", f"expected a table [matrix], got {_typename(raw)}")
    for key in raw:
        if key not in MATRIX_AXES:
            raise _unknown(f"{p}matrix.{key}", key, MATRIX_AXES)
    if "ranks_per_node" in raw and "gpus_per_node" in raw:
        raise _fail(f"{p}matrix", "give ranks_per_node or gpus_per_node, not both (one rank runs per GPU)")
    if "gpus_per_node" in raw and workload["device"] != "cuda":
        raise _fail(f"{p}matrix.gpus_per_node", 'needs workload.device = "cuda"; use ranks_per_node on CPU')
    defaults = {"nodes": 1, "ranks_per_node": 1, "backend": workload["backend"], "model": workload["model"],
                "batch_size": workload["batch_size"]}
    axes = []
    for name in MATRIX_AXES:
        if name in raw:
            axes.append((name, _axis_values(name, raw[name], f"{p}matrix.{name}")))
        elif name in defaults and not (name == "ranks_per_node" and "gpus_per_node" in raw):
            axes.append((name, (defaults[name],)))
    return Matrix(tuple(axes), _excludes(raw_excludes, p))


def _excludes(raw: Any, p: str) -> tuple[dict[str, tuple[Any, ...]], ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise _fail(f"{p}exclude", "expected an array of tables: write each entry as [[exclude]]")
    out = []
    for i, entry in enumerate(raw):
        where = f"{p}exclude[{i}]"
        if not isinstance(entry, dict) or not entry:
            raise _fail(where, "expected a non-empty table of matrix keys, e.g. { backend = \"mpi\", nodes = 4 }")
        rule = {}
        for key, value in entry.items():
            if key not in MATRIX_AXES:
                raise _unknown(f"{where}.{key}", key, MATRIX_AXES)
            rule[key] = _axis_values(key, value, f"{where}.{key}")
        out.append(rule)
    return tuple(out)


def _domain_rules(spec: SweepSpec, raw_matrix: Any, p: str) -> None:
    w = spec.workload
    if w.kind == "allreduce" and w.min_bytes > w.max_bytes:
        raise _fail(f"{p}workload.max_bytes", f"{w.max_bytes} is smaller than workload.min_bytes = {w.min_bytes}")
    if w.kind == "allreduce" and "none" in dict(spec.matrix.axes).get("framework", (w.framework,)):
        where = "matrix.framework" if isinstance(raw_matrix, dict) and "framework" in raw_matrix else "workload.framework"
        raise _fail(f"{p}{where}", "framework 'none' has no communication to measure; allreduce needs ddp or horovod")
    backends = dict(spec.matrix.axes)["backend"]
    if spec.workload.device == "cpu" and "nccl" in backends:
        # Name the key the user actually wrote: the matrix list, or the workload default.
        if isinstance(raw_matrix, dict) and "backend" in raw_matrix:
            where = f"{p}matrix.backend" + (f"[{backends.index('nccl')}]" if isinstance(raw_matrix["backend"], list) else "")
        else:
            where = f"{p}workload.backend"
        raise _fail(where, "'nccl' needs workload.device = \"cuda\" (NCCL has no CPU path); use gloo or mpi on CPU")
    _data_rules(spec, p)


def _data_rules(spec: SweepSpec, p: str) -> None:
    """Training keys that only make sense together (issue 3)."""
    w = spec.workload
    if w.data != "synthetic":
        if w.data_dir is None:
            raise _fail(f"{p}workload.data_dir", f"data = {w.data!r} reads a folder: set data_dir "
                        f"(fill it with: hpcbench data fetch {w.data} --dest DIR)")
        shape = DATASET_SHAPES[w.data]
        for model in dict(spec.matrix.axes)["model"]:
            if MODELS[model].input_shape != shape:
                fits = ", ".join(m.name for m in MODELS.values() if m.input_shape == shape)
                raise _fail(f"{p}workload.data", f"model {model!r} does not take {w.data} samples "
                            f"{shape} (models that do: {fits})")
    if w.scaling == "strong" and w.global_batch_size is None:
        raise _fail(f"{p}workload.global_batch_size", 'scaling = "strong" needs global_batch_size '
                    "(split over the ranks of each point)")
    if w.scaling == "weak" and w.global_batch_size is not None:
        raise _fail(f"{p}workload.global_batch_size", 'only applies with scaling = "strong" '
                    "(weak scaling keeps batch_size per rank)")


def load(path: str | Path, cluster: str | None = None) -> SweepSpec:
    """Read and validate a sweep file."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such sweep file", hint="give the path of a .toml file, e.g. sweeps/local.toml") from None
    except (IsADirectoryError, PermissionError, UnicodeDecodeError) as e:
        raise ConfigError(f"{path}: cannot read sweep file: {e}") from None
    return parse(text, str(path), cluster)


def time_limit_seconds(limit: str) -> int:
    """Slurm time limit string to seconds: MM, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS."""
    days = 0
    if "-" in limit:
        d, limit = limit.split("-", 1)
        days = int(d)
        parts = [int(x) for x in limit.split(":")]
        parts += [0] * (3 - len(parts))  # D-HH[:MM[:SS]]
        h, m, s = parts
    else:
        parts = [int(x) for x in limit.split(":")]
        if len(parts) == 1:
            h, m, s = 0, parts[0], 0
        elif len(parts) == 2:
            h, m, s = 0, parts[0], parts[1]
        else:
            h, m, s = parts
    return ((days * 24 + h) * 60 + m) * 60 + s
