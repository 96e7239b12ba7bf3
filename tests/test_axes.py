"""Any setting as an axis (issue 14): [matrix] keys decided by the declaration (plan/fields.py), [matrix.env],
[[zip]] and [[exclude]] of any axis; what each does to ids, labels, plan.json and job scripts."""
from __future__ import annotations

import re
import shlex
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest
from test_fields import other_value

from hpcbench.errors import ConfigError
from hpcbench.plan.expand import NAMED, Point, expand
from hpcbench.plan.fields import AXES, BY_NAME, JOB_SETTINGS, PARAMS, POINT_SETTINGS, SLURM, STANDING, refusal
from hpcbench.plan.limits import violations
from hpcbench.plan.spec import parse
from hpcbench.rundir import PointPaths, RunDir
from hpcbench.submit.backends.local import Here, local_starts
from hpcbench.submit.launch import plan_launch
from hpcbench.submit.render import render_job

PATH = "sweeps/x.toml"


def err(text: str) -> str:
    with pytest.raises(ConfigError) as e:
        parse(text, PATH)
    return str(e.value)


def plan(text: str) -> list[Point]:
    return expand(parse(text, PATH))


# --- which keys may be axes: walked from the declaration ----------------------------------------------------------
# [slurm] env is never a [matrix] key: there, env is the table of environment variables that are axes.
REFUSED = [p.name for p in PARAMS if p.refuse] + [s.name for s in SLURM if s.axis != "point" and s.name != "env"]


@pytest.mark.parametrize("key", REFUSED)
def test_a_refused_key_names_file_key_and_the_declared_reason(key):
    assert err(f"[matrix]\n{key} = [1, 2]\n") == f"{PATH}: matrix.{key}: {key} cannot be an axis: {refusal(key)}"


def test_every_setting_is_decided_with_a_reason():
    for s in SLURM:
        assert s.axis in ("point", "job", ""), s.name
        assert refusal(s.name) if s.axis != "point" else refusal(s.name) is None, s.name
    assert set(JOB_SETTINGS) == {"partition", "account", "qos", "time", "mem"}
    assert set(POINT_SETTINGS) == {"cpus_per_task", "launcher", "mpi", "cpu_bind", "gpu_bind"}
    for name in ("kind", "device", "scaling", "global_batch_size", "data_dir", "repeat"):
        assert BY_NAME[name].refuse and name not in AXES
    for name in ("steps", "warmup_steps", "lr", "lr_scaling", "comm_split", "data", "init_timeout_s", "min_bytes",
                 "max_bytes", "dtype", "iters"):
        assert name in AXES


SETTING_VALUES = {"cpus_per_task": (1, 2), "launcher": ("srun", "mpirun"), "mpi": ("pmix", "pmi2"),
                  "cpu_bind": ("sockets", "cores")}
ACCEPTED = [n for n in AXES if n not in STANDING] + list(POINT_SETTINGS)


def _two_values(key: str) -> tuple[str, tuple[object, object]]:
    """(the [workload] lines the key needs, two valid values), the parameter's values found by its own check."""
    if key == "gpu_bind":  # it places GPU ranks: a CPU sweep refuses it (next test)
        return 'device = "cuda"\nbackend = "nccl"\n', ("block", "none")
    if key in SETTING_VALUES:
        return "", SETTING_VALUES[key]
    p = BY_NAME[key]
    kind = "train" if p.applies("train") else "collective"
    extra = f'kind = "{kind}"\n' + ('data_dir = "/scratch/data"\n' if key == "data" else "")
    return extra, (p.default, other_value(p, p.default))


def _toml(v: object) -> str:
    return {True: "true", False: "false"}.get(v, repr(v)) if isinstance(v, bool) else repr(v)


@pytest.mark.parametrize("key", ACCEPTED)
def test_every_accepted_key_is_an_axis_in_the_id_and_the_label(key):
    workload, (a, b) = _two_values(key)
    points = plan(f"[workload]\n{workload}[matrix]\n{key} = [{_toml(a)}, {_toml(b)}]\n")
    assert len(points) == 2 and points[0].id != points[1].id
    if key in NAMED:  # the label's own words name it (ddp-gloo-all_gather-n1x1)
        assert len({p.label for p in points}) == 2 and f"-{b}-" in points[1].label, [p.label for p in points]
    else:
        assert [f"-{key}" in p.label for p in points] == [True, True], [p.label for p in points]
    one = plan(f"[workload]\n{workload}[matrix]\n{key} = [{_toml(a)}]\n")[0]
    assert f"-{key}" not in one.label  # an axis of one value tells no points apart


def test_gpu_bind_on_cpu_is_refused():
    assert err("[matrix]\ngpu_bind = [\"block\", \"none\"]\n") == (
        f"{PATH}: matrix.gpu_bind: places each rank on its GPU's socket; with workload.device = 'cpu' its points "
        "would repeat")


def test_a_parameter_that_does_not_apply_to_the_kind_is_refused():
    assert err('[workload]\nkind = "collective"\n[matrix]\nsteps = [1, 2]\n') == (
        f"{PATH}: matrix.steps: does not apply to workload.kind = 'collective' (only to: train), so its points "
        "would repeat")


# --- [matrix.env] ---------------------------------------------------------------------------------------------------
ENV_ERRORS = [
    ('[matrix.env]\n"BAD-NAME" = ["1"]\n', "matrix.env.BAD-NAME", "not a valid environment variable name"),
    ('[matrix.env]\nOMP_NUM_THREADS = ["1", "2"]\n', "matrix.env.OMP_NUM_THREADS",
     "OMP_NUM_THREADS cannot be an axis: set from cpus_per_task: make cpus_per_task the axis"),
    ('[matrix.env]\nNCCL_DEBUG = ["WARN"]\n', "matrix.env.NCCL_DEBUG", "NCCL_DEBUG cannot be an axis: always INFO"),
    ('[matrix.env]\nSLURM_X = ["1"]\n', "matrix.env.SLURM_X", "set for each rank by Slurm or hpcbench"),
    ('[matrix.env]\nHPCBENCH_ENV_AXES = ["1"]\n', "matrix.env.HPCBENCH_ENV_AXES", "set for each rank by Slurm"),
    ('[slurm.env]\nNCCL_ALGO = "Ring"\n[matrix.env]\nNCCL_ALGO = ["Tree"]\n', "matrix.env.NCCL_ALGO",
     "NCCL_ALGO is also set in [slurm.env]; give it in one place"),
    ("[matrix.env]\nNCCL_ALGO = [true]\n", "matrix.env.NCCL_ALGO[0]", "expected a string or number, got boolean"),
    ('[matrix.env]\nX = ["a\\u0000b"]\n', "matrix.env.X[0]", "contains a NUL character"),
    ('[matrix.env]\nX = [1, "1"]\n', "matrix.env.X[1]", "duplicate value '1'"),
    ("[matrix.env]\nX = []\n", "matrix.env.X", "expected at least one value"),
    ("[matrix]\nenv = 3\n", "matrix.env", "expected a table of NAME = [\"value\", ...], got integer"),
    ('[[exclude]]\nenv.NCCL_IB_DISABLE = "1"\n', "exclude[0].env.NCCL_IB_DISABLE",
     "not an environment variable this sweep varies (its env axes: none)"),
]


def test_env_axis_values_are_strings_in_the_id_and_label():
    points = plan('[matrix.env]\nNCCL_IB_DISABLE = [0, 1]\nNCCL_ALGO = ["Ring", "Tree"]\n')
    assert [p.env for p in points] == [(("NCCL_ALGO", a), ("NCCL_IB_DISABLE", d))
                                       for d in "01" for a in ("Ring", "Tree")]
    assert points[-1].label == "gloo-mlp-b32-n1x1-NCCL_IB_DISABLE1-NCCL_ALGO_Tree"
    assert len({p.id for p in points}) == 4
    # one value: not in the label, but it reaches the ranks, so it is in the id
    [one] = plan('[matrix.env]\nNCCL_IB_DISABLE = "0"\n')
    [none] = plan("")
    assert one.label == none.label and one.id != none.id


# --- [[zip]] --------------------------------------------------------------------------------------------------------
ZIP_ERRORS = [
    ('[[zip]]\nnodes = [1, 2]\ntime = ["10"]\n', "zip[0].time",
     "1 value, but zip[0].nodes has 2 values: the keys of a [[zip]] move together"),
    ('[matrix]\nnodes = [1, 2]\n[[zip]]\nnodes = [1, 2]\ntime = ["10", "20"]\n', "zip[0].nodes",
     "also in matrix.nodes; a key is crossed ([matrix]) or zipped (in one [[zip]]), never both"),
    ('[[zip]]\nnodes = [1, 2]\ntime = ["10", "20"]\n[[zip]]\nnodes = [3]\n', "zip[1].nodes", "also in zip[0].nodes"),
    ("[[zip]]\nnodez = [1, 2]\n", "zip[0].nodez", "unknown key (valid keys: account,"),
    ('[[zip]]\nkind = ["train"]\n', "zip[0].kind", "kind cannot be an axis: the workload kind decides"),
    ("[[zip]]\nnodes = 2\n", "zip[0].nodes", "expected a non-empty array, got integer 2"),
    ("[zip]\nnodes = [1]\n", "zip", "expected an array of tables: write each entry as [[zip]]"),
    ("zip = [1]\n", "zip[0]", "expected a non-empty table of keys with one list each"),
    ('[[zip]]\ntime = ["10", "20"]\npartition = ["a", "b"]\n', "zip[0]",
     "moves only scheduler settings (time, partition), which never enter a point's id"),
    ('[[zip]]\nnodes = [1, 1]\ntime = ["10", "20"]\n', "zip[0]",
     "rows 0 and 1 (counting from 0) are the same point (nodes = 1)"),
    ('[[zip]]\nnodes = [1, 0]\ntime = ["10", "20"]\n', "zip[0].nodes[1]", "expected an integer from 1"),
    ('[[zip]]\nnodes = [1, 2]\ntime = ["10", "soon"]\n', "zip[0].time[1]", "is not a Slurm time limit"),
    ('[[zip]]\nnodes = [1, 2]\nenv = { "A-B" = ["x", "y"] }\n', "zip[0].env.A-B",
     "not a valid environment variable name"),
    ('[matrix]\nranks_per_node = [1]\n[workload]\ndevice = "cuda"\n[[zip]]\ngpus_per_node = [1, 2]\nnodes = [1, 2]\n',
     "zip[0].gpus_per_node", "give ranks_per_node or gpus_per_node, not both"),
    ("[[zip]]\ngpus_per_node = [1, 2]\nnodes = [1, 2]\n", "zip[0].gpus_per_node", 'needs workload.device = "cuda"'),
    ("[[zip]]\nbackend = ['gloo', 'nccl']\nnodes = [1, 2]\n", "zip[0].backend[1]", "'nccl' needs workload.device"),
]


@pytest.mark.parametrize("text, where, allowed", ENV_ERRORS + ZIP_ERRORS)
def test_env_and_zip_errors_name_file_key_and_what_is_allowed(text, where, allowed):
    """[matrix.env] is checked like [slurm.env]; [[zip]] like [matrix], and its lists must move together."""
    msg = err(text)
    assert msg.startswith(f"{PATH}: {where}: ") and allowed in msg, msg


ZIPPED = """
[slurm]
time = "00:30:00"
[workload]
steps = 5
[matrix]
ranks_per_node = [1, 2]
steps = [5, 10]
[matrix.env]
NCCL_IB_DISABLE = ["0", "1"]
[[zip]]
nodes = [1, 2]
time = ["00:05:00", "00:10:00"]
env.NCCL_ALGO = ["Ring", "Tree"]
[[exclude]]
env.NCCL_IB_DISABLE = "1"
steps = 10
"""


def test_product_times_zip_minus_exclude():
    points = plan(ZIPPED)
    # 2 ranks x 2 steps x 2 env values x 2 zip rows = 16, minus (IB off, 10 steps) x 2 ranks x 2 rows = 12
    assert len(points) == 12 and len({p.id for p in points}) == 12
    rows = {(p.nodes, dict(p.job)["time"], dict(p.env)["NCCL_ALGO"]) for p in points}
    assert rows == {(1, "00:05:00", "Ring"), (2, "00:10:00", "Tree")}  # zipped keys move together
    assert not [p for p in points if dict(p.env)["NCCL_IB_DISABLE"] == "1" and p.steps == 10]
    # the standing axes run first, as they always did; then the others
    assert [(p.nodes, p.ranks_per_node) for p in points[:3]] == [(1, 1)] * 3


def test_a_zipped_time_limit_never_changes_an_id_and_exclude_may_name_any_axis():
    zipped = plan('[[zip]]\nnodes = [1, 2]\ntime = ["00:05:00", "00:10:00"]\n')
    crossed = plan("[matrix]\nnodes = [1, 2]\n")
    assert [p.id for p in zipped] == [p.id for p in crossed] and [p.label for p in zipped] == [p.label for p in crossed]
    assert [p.job for p in zipped] == [(("time", "00:05:00"),), (("time", "00:10:00"),)]
    # an exclude of a scheduler setting the sweep does not vary matches its [slurm] value
    assert [p.nodes for p in plan('[slurm]\npartition = "a"\n[matrix]\nnodes = [1, 2]\n'
                                  '[[exclude]]\npartition = "a"\nnodes = 2\n')] == [1]
    crossed = plan("[matrix]\ncpus_per_task = [1, 2]\nsteps = [3, 4]\n[[exclude]]\ncpus_per_task = 2\nsteps = 4\n")
    assert [(dict(p.slurm)["cpus_per_task"], p.steps) for p in crossed] == [(1, 3), (2, 3), (1, 4)]  # declared order


# Frozen here with the ids hpcbench gave before axes beyond the standing ones existed: they must never change.
OLD = """
[sweep]
repeats = 2
[slurm]
time = "00:10:00"
cpus_per_task = 4
[workload]
steps = 7
init_timeout_s = 60
[matrix]
framework = ["ddp", "horovod", "none"]
backend = ["gloo", "mpi"]
nodes = [1, 2]
ranks_per_node = [1, 2]
[[exclude]]
framework = "none"
nodes = 2
[[exclude]]
framework = "none"
ranks_per_node = 2
"""
OLD_IDS = [
    "47e5c90ea7", "1664063041", "551bd7c947", "fd9ec8d614", "3a13786593", "6d52ef59af", "4f56433679", "a90097e919",
    "b3f275cfd0", "a76c878e3f", "d3ede024af", "7d3d5702f5", "8d900c6afb", "9b09eb024d", "a72462abae", "21f80cf848",
    "d2976b0571", "db1c1464a1", "26f99e1c0b", "3001d8fbbc", "fb08c14e35", "cb048d5e75", "ba10f6252a", "df7cd0fbc8",
    "bdf91cc4bf", "7a4b345fac", "c7bacef56c", "878ee351c2", "b0881d97ff", "4da0558f79", "bbfe21baa7", "520aac12af",
    "42ef29902a", "cd65cc565e",
]


def test_a_sweep_without_new_axes_keeps_every_id_label_and_plan_entry():
    points = plan(OLD)
    assert [p.id for p in points] == OLD_IDS
    assert points[0].label == "gloo-mlp-b32-n1x1-r0"
    assert all(not (p.env or p.slurm or p.job) for p in points)
    assert not {"env", "slurm", "job"} & set(points[0].to_dict())  # plan.json as before


def test_a_time_limit_lengthened_in_the_sweep_copy_applies_to_the_next_submission():
    from hpcbench.plan.expand import current_jobs

    first = plan('[[zip]]\nnodes = [1, 2]\ntime = ["00:05:00", "00:10:00"]\n')
    spec = parse('[[zip]]\nnodes = [1, 2]\ntime = ["00:05:00", "01:00:00"]\n', PATH)
    now = current_jobs(spec, first)
    assert [p.id for p in now] == [p.id for p in first] and [p.job for p in now] == [
        (("time", "00:05:00"),), (("time", "01:00:00"),)]
    assert now[0] is first[0]  # unchanged points are not copied
    unzipped = current_jobs(parse("[matrix]\nnodes = [1, 2]\n", PATH), first)
    assert [p.job for p in unzipped] == [(), ()] and [p.id for p in unzipped] == [p.id for p in first]


def test_ids_differ_per_axis_value_and_the_same_value_keeps_its_id():
    a = plan("[matrix]\ncpus_per_task = [1, 2]\n")
    b = plan("[matrix]\ncpus_per_task = [2, 4]\n")
    assert a[0].id != a[1].id and a[1].id == b[0].id and a[1].slurm == (("cpus_per_task", 2),)
    assert plan("[matrix]\nsteps = [20, 30]\n")[0].id == plan("")[0].id  # steps = 20 is the default: the same point


def test_labels_are_folder_names_whatever_the_values(tmp_path):
    text = '[matrix.env]\nNCCL_IB_HCA = ["mlx5_0:1,mlx5_1:1", "a/../b c$(id)\\n"]\n'
    points = plan(text)
    assert [p.label for p in points] == ["gloo-mlp-b32-n1x1-NCCL_IB_HCA_mlx5_0_1_mlx5_1_1",
                                         "gloo-mlp-b32-n1x1-NCCL_IB_HCA_a_.._b_c__id__"]
    rd = RunDir.create(tmp_path / "run", text, "x", points)
    assert [p.dir.parent for p in map(rd.point, points)] == [rd.points_root] * 2
    assert RunDir.open(rd.root).points() == points  # plan.json keeps env, slurm and job


# --- job scripts ----------------------------------------------------------------------------------------------------
HOSTILE = """
[slurm]
time = "00:30:00"
[slurm.env]
SAFE = "first"
[matrix]
cpus_per_task = [1, 2]
[matrix.env]
NCCL_ALGO = ["it's $HOME and `id`", "two\\nlines"]
[[zip]]
nodes = [1, 2]
time = ["00:05:00", "01:00:00"]
"""


def test_job_scripts_carry_each_points_settings_and_quoted_env(tmp_path):
    spec = parse(HOSTILE, PATH)
    points = expand(spec)
    assert len(points) == 8
    for p in points:
        text = render_job(spec, p, PointPaths(tmp_path / p.dirname), "/py")
        s = p.settings(spec.slurm)
        assert f"#SBATCH --cpus-per-task={s.cpus_per_task}\n" in text and f"#SBATCH --time={s.time}\n" in text
        assert s.time == {1: "00:05:00", 2: "01:00:00"}[p.nodes] and s.cpus_per_task == dict(p.slurm)["cpus_per_task"]
        subprocess.run(["bash", "-n"], input=text, text=True, check=True)
        # [slurm.env] first, then the point's own variables, then their names for the ranks' records
        setup = text[text.index("export "):text.index("\ncd ")]
        exports = [line for line in setup.splitlines() if line.startswith("export ")]
        assert exports[2] == "export SAFE=first" and exports[-1] == "export HPCBENCH_ENV_AXES=NCCL_ALGO"
        script = setup + '\nprintf "%s|%s" "$NCCL_ALGO" "$HPCBENCH_ENV_AXES"'
        out = subprocess.run(["bash", "-c", script], capture_output=True, text=True, cwd=tmp_path, check=True).stdout
        assert out == f"{dict(p.env)['NCCL_ALGO']}|NCCL_ALGO"


def test_the_local_backend_gives_each_point_its_env_and_cpus():
    spec = parse(HOSTILE, PATH)
    p = next(p for p in expand(spec) if p.slurm == (("cpus_per_task", 2),) and "two" in dict(p.env)["NCCL_ALGO"])
    [start] = local_starts(plan_launch(spec, replace(p, nodes=1), "/d", "/py"), "local1", Here({}, "h", 1, False))
    env = start.env
    assert (env["NCCL_ALGO"], env["SAFE"], env["HPCBENCH_ENV_AXES"]) == ("two\nlines", "first", "NCCL_ALGO")
    assert env["OMP_NUM_THREADS"] == env["SLURM_CPUS_PER_TASK"] == "2"


def test_submitit_gets_each_points_settings_and_env(tmp_path):
    """submitit's executor is given the point's own cpus, time and exports (built without submitit or a cluster)."""
    from hpcbench.submit.backends.submitit import SubmititBackend, executor_parameters

    spec = parse(HOSTILE, PATH)
    for p in expand(spec):
        kw = executor_parameters(spec, p, plan_launch(spec, p, str(tmp_path / p.dirname), "/py"), None)
        assert (kw["cpus_per_task"], kw["time"]) == (dict(p.slurm)["cpus_per_task"], {1: 5, 2: 60}[p.nodes])
        exports = "\n".join(kw["setup"])
        assert exports.index("export SAFE=first") < exports.index("export NCCL_ALGO=")
        assert f"export NCCL_ALGO={shlex.quote(dict(p.env)['NCCL_ALGO'])}" in exports
    with pytest.raises(ConfigError, match=r"x.toml: matrix.launcher: 'mpirun' cannot be used with --backend submitit"):
        SubmititBackend().check(parse('[matrix]\nlauncher = ["srun", "mpirun"]\n', PATH))


def test_cluster_limits_read_each_points_time_and_cpus():
    text = ('[cluster]\nname = "small"\nmax_time = "00:30:00"\nmax_cpus_per_node = 2\n' + HOSTILE
            .replace("[matrix]\n", "[matrix]\nranks_per_node = [2]\n"))
    spec = parse(text, PATH)
    bad = violations(spec, expand(spec))
    assert len(bad) == 6 and not any(b.startswith("slurm.time") for b in bad)  # 8 points; 2 fit
    assert any("time = 01:00:00 exceeds max_time = 00:30:00" in b and "x cpus_per_task = 2 x 2 = 4" in b for b in bad)


def test_pack_passes_env_per_step_and_refuses_per_point_settings(tmp_path):
    from hpcbench.submit.pack import render_pack

    spec = parse('[slurm]\npack = true\n[matrix]\nnodes = [1, 2]\n[matrix.env]\nNCCL_ALGO = ["Ring", "Tree"]\n', PATH)
    points = expand(spec)
    rd = RunDir.create(tmp_path / "run", spec.text, "x", points)
    text = render_pack(spec, rd, 1, points, "/py")
    assert text.count("env NCCL_ALGO=Ring HPCBENCH_ENV_AXES=NCCL_ALGO srun ") == 2
    subprocess.run(["bash", "-n"], input=text, text=True, check=True)
    spec = parse('[slurm]\npack = true\n[matrix]\ncpus_per_task = [1, 2]\n', PATH)
    with pytest.raises(ConfigError, match="points set their own cpus_per_task"):
        render_pack(spec, RunDir.create(tmp_path / "run2", "", "x", expand(spec)), 1, expand(spec), "/py")


def test_the_documented_sweep_example_plans():
    from conftest import REPO

    text = (REPO / "docs" / "howto" / "sweeps.md").read_text()
    start = text.index("```toml\n") + len("```toml\n")
    points = plan(text[start:text.index("```", start)])
    assert {dict(p.job)["time"] for p in points} == {"00:10:00", "00:20:00", "00:40:00"}
    assert {dict(p.env)["NCCL_ALGO"] for p in points} == {"Ring", "Tree"} and len(points) == 4 * 3 * 3 * 2 - 2 * 2


def test_shipped_ib_vs_tcp_plans():
    from conftest import REPO

    spec = parse((REPO / "sweeps" / "ib_vs_tcp.toml").read_text(), "sweeps/ib_vs_tcp.toml")
    points = expand(spec)
    assert {dict(p.env)["NCCL_IB_DISABLE"] for p in points} == {"0", "1"}
    assert {(p.nodes, p.gpus_per_node) for p in points} == {(1, 8), (2, 8)}
    assert all(re.fullmatch(r"nccl-resnet50-b64-n[12]x8-NCCL_IB_DISABLE[01]", p.label) for p in points)
    assert len({p.id for p in points}) == len(points) == 4
    assert Path(REPO / "docs" / "howto" / "sweeps.md").read_text().count("ib_vs_tcp.toml") >= 1
