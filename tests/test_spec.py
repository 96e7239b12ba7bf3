from __future__ import annotations

import pytest
from conftest import REPO, write

from hpcbench.errors import ConfigError
from hpcbench.plan.checks import time_seconds
from hpcbench.plan.spec import load, parse

MINIMAL = "[matrix]\nranks_per_node = [1, 2]\n"


def err(text: str) -> str:
    with pytest.raises(ConfigError) as e:
        parse(text, "sweeps/x.toml")
    return str(e.value)


def test_defaults_fill_every_section():
    spec = parse(MINIMAL, "sweeps/x.toml")
    assert spec.sweep.name == "x"
    assert spec.workload.backend == "gloo" and spec.slurm.launcher == "srun"
    assert dict(spec.matrix.axes) == {"framework": ("ddp",), "backend": ("gloo",), "model": ("mlp",),
                                      "batch_size": (32,), "nodes": (1,), "ranks_per_node": (1, 2)}


def test_unknown_key_lists_valid_keys_and_suggests():
    msg = err("[slurm]\npartiton = 'gpu'\n")
    assert msg.startswith("sweeps/x.toml: slurm.partiton: unknown key (valid keys: account, cpu_bind,")
    assert "partition" in msg and "did you mean 'partition'?" in msg


def test_unknown_section_and_matrix_axis():
    assert "unknown key (valid keys: cluster, exclude, matrix, slurm, sweep, workload, zip)" in err("[slurmm]\n")
    assert "matrix.gpus: unknown key" in err("[matrix]\ngpus = [1]\n")


@pytest.mark.parametrize("text, where, allowed", [
    ("[workload]\nsteps = 'ten'\n", "workload.steps", "expected an integer >= 1, got string 'ten'"),
    ("[matrix]\nbackend = ['gloo', 'ncl']\n", "matrix.backend[1]", "unknown backend 'ncl' (choose from: gloo, mpi, nccl, oneccl)"),
    ("[matrix]\nnodes = [1, 0]\n", "matrix.nodes[1]", "expected an integer from 1 to 2147483647, got 0"),
    ("[matrix]\nnodes = [100000000000000000000]\n", "matrix.nodes[0]", "expected an integer from 1 to 2147483647"),
    ("[matrix]\nnodes = []\n", "matrix.nodes", "expected at least one value"),
    ("[matrix]\nnodes = [2, 2]\n", "matrix.nodes[1]", "duplicate value 2"),
    ("[slurm]\ntime = '20 minutes'\n", "slurm.time", "is not a Slurm time limit"),
    ("[slurm]\nmodules = 'cuda'\n", "slurm.modules", "expected an array of strings"),
    ("[slurm]\nenv = { 'BAD-NAME' = 'x' }\n", "slurm.env.BAD-NAME", "not a valid environment variable name"),
    ("[slurm]\nsbatch_args = ['-N 2']\n", "slurm.sbatch_args[0]", "not a long sbatch option"),
    ("[workload]\nmodel = 'resnet9000'\n", "workload.model", "unknown model 'resnet9000' (choose from: mlp, mnist_cnn,"),
    ("[matrix]\nbackend = ['gloo', 'nccl']\n", "matrix.backend[1]", "'nccl' needs workload.device = \"cuda\""),
    ("[matrix]\nbackend = ['nccl']\n", "matrix.backend[0]", "'nccl' needs workload.device = \"cuda\""),
    ("[matrix]\nbackend = 'nccl'\n", "matrix.backend", "'nccl' needs workload.device = \"cuda\""),
    ("[workload]\nbackend = 'nccl'\n", "workload.backend", "'nccl' needs workload.device = \"cuda\""),
    ("[matrix]\ngpus_per_node = [1]\n", "matrix.gpus_per_node", "needs workload.device = \"cuda\""),
    ("[[exclude]]\nbackendd = 'gloo'\n", "exclude[0].backendd", "unknown key"),
    ("[sweep]\nrepeats = 0\n", "sweep.repeats", "expected an integer from 1 to"),
])
def test_wrong_values_name_file_key_and_what_is_allowed(text, where, allowed):
    msg = err(text)
    assert msg.startswith(f"sweeps/x.toml: {where}: "), msg
    assert allowed in msg


def test_invalid_toml_names_file():
    assert err("[matrix\n").startswith("sweeps/x.toml: not valid TOML:")


def test_missing_file(tmp_path):
    with pytest.raises(ConfigError, match="no such sweep file"):
        load(tmp_path / "nope.toml")


@pytest.mark.parametrize("limit, seconds", [("30", 1800), ("10:30", 630), ("01:00:00", 3600),
                                            ("2-00", 172800), ("1-02:03:04", 93784)])
def test_time_limits(limit, seconds):
    assert time_seconds(limit) == seconds


@pytest.mark.parametrize("name", ["local", "ci", "scaling"])
def test_shipped_sweeps_validate(name):
    spec = load(REPO / "sweeps" / f"{name}.toml")
    assert spec.sweep.name == name


def test_cli_config_error_is_one_line_exit_2_without_traceback(cli, tmp_path):
    f = write(tmp_path / "bad.toml", "[slurm]\npartiton = 'gpu'\n")
    proc = cli("sweep", str(f), "--dry-run")
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {f}: slurm.partiton: unknown key")
    assert "Traceback" not in proc.stderr
    debug = cli("sweep", str(f), "--dry-run", "--debug")
    assert debug.returncode == 2 and "Traceback" in debug.stderr
