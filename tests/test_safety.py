"""Hostile sweep values: each is either refused with a clear one-line error, or quoted so that the shell
never runs it. The payloads try to create a file; the tests check that it never appears."""
from __future__ import annotations

import csv
import json
import subprocess
import uuid
from pathlib import Path

import pytest
from conftest import write

from hpcbench.errors import ConfigError
from hpcbench.plan.expand import expand
from hpcbench.plan.spec import parse
from hpcbench.rundir import PointPaths
from hpcbench.submit.render import job_name, render_job, sanitise_job_name


def payloads(target: Path) -> list[str]:
    t = str(target)
    return [f"$(touch {t})", f"`touch {t}`", f"x; touch {t}", f"a\ntouch {t}", f"'; touch {t}; '", f"\"$(touch {t})\""]


def toml_str(v: str) -> str:
    return json.dumps(v)  # a JSON string is a valid TOML basic string


@pytest.mark.parametrize("key", ["partition", "account", "python", "mem", "time"])
def test_newlines_in_one_line_settings_are_refused(key, tmp_path):
    with pytest.raises(ConfigError, match=rf"s.toml: slurm.{key}: .*(newline|is not)"):
        parse(f"[slurm]\n{key} = {toml_str('debug' + chr(10) + 'touch pwned')}\n", "s.toml")


@pytest.mark.parametrize("key", ["modules", "sbatch_args", "launcher_args"])
def test_newlines_in_list_settings_are_refused(key):
    with pytest.raises(ConfigError, match=rf"slurm.{key}\[0\]: .*newline"):
        parse(f"[slurm]\n{key} = [{toml_str('--x=1' + chr(10) + 'touch pwned')}]\n", "s.toml")


def test_sweep_name_with_a_trailing_newline_is_refused():
    # A '$' anchored pattern would accept "ok\n"; every pattern is matched in full.
    with pytest.raises(ConfigError, match="sweep.name"):
        parse('[sweep]\nname = "ok\\n"\n', "s.toml")
    with pytest.raises(ConfigError, match="slurm.env.A"):
        parse('[slurm.env]\n"A\\n" = "1"\n', "s.toml")


def test_refused_value_is_one_line_exit_2_and_creates_nothing(cli, tmp_path):
    target = tmp_path / "pwned"
    sweep = write(tmp_path / "bad.toml", f"[slurm]\nmodules = [{toml_str('gcc' + chr(10) + 'touch ' + str(target))}]\n")
    proc = cli("sweep", str(sweep), "--backend", "local", "--run-dir", str(tmp_path / "run"))
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("error: ") and "slurm.modules[0]" in proc.stderr
    assert not target.exists() and not (tmp_path / "run").exists()


def test_job_names_are_sanitised():
    assert sanitise_job_name("hpcb-a b;$(x)`y`\n") == "hpcb-a_b___x__y__"
    spec = parse("[sweep]\nname = \"s.1_x-y\"\n", "s.toml")
    [p] = expand(spec)
    assert job_name(spec, p) == "hpcb-s.1_x-y-gloo-mlp-b32-n1x1"


def test_quoted_values_reach_the_shell_verbatim_and_run_nothing(tmp_path):
    """The real bash reads the rendered lines back: each env value arrives byte for byte, nothing runs."""
    target = tmp_path / "pwned"
    values = payloads(target)
    env = "\n".join(f"V{i} = {toml_str(v)}" for i, v in enumerate(values))
    mods = ", ".join(toml_str(v) for v in values if "\n" not in v)
    spec = parse(f"[slurm]\nmodules = [{mods}]\nlauncher_args = [{mods}]\npartition = {toml_str(values[0])}\n"
                 f"[slurm.env]\n{env}\n", "s.toml")
    [p] = expand(spec)
    text = render_job(spec, p, PointPaths(tmp_path / "pt"), "/usr/bin/python3", "hpcbench:r:x")
    # Every line bash would run, with `module`, `srun` and `cd` replaced by printers of their arguments.
    body = text.split("set -uo pipefail", 1)[1].rsplit('echo "$rc"', 1)[0]
    prelude = ('module() { printf "module<%s>\\n" "$@"; }\nsrun() { printf "srun<%s>\\n" "$@"; }\n'
               'cd() { :; }\n')
    dump = "".join(f'printf "V{i}<%s>\\n" "$V{i}"\n' for i in range(len(values)))
    out = subprocess.run(["bash", "-c", prelude + body + dump], capture_output=True, text=True, cwd=tmp_path, check=False)
    assert out.returncode == 0, out.stderr
    for i, v in enumerate(values):
        assert f"V{i}<{v}>" in out.stdout
    for v in values:
        if "\n" not in v:
            assert f"module<{v}>" in out.stdout and f"srun<{v}>" in out.stdout
    assert not target.exists()
    # sbatch reads #SBATCH lines itself (no shell); the partition is one quoted word on its line.
    assert f"#SBATCH --partition='{values[0]}'" in text


@pytest.mark.slurm
def test_hostile_values_on_the_real_slurm(cli, tmp_path, slurm_cluster):
    """Through sbatch for real: a job full of hostile (quoted) values completes and creates nothing; a
    partition sbatch refuses is recorded on its point and the sweep goes on."""
    target = Path("/tmp") / f"hpcbench-pwned-{uuid.uuid4().hex}"
    values = [v for v in payloads(target)]
    env = "\n".join(f"V{i} = {toml_str(v)}" for i, v in enumerate(values))
    srun_ok = toml_str(f"--comment={values[0]}{values[1]}")  # srun takes any text as its step comment
    # `module use` of a folder that does not exist succeeds; a `module load` that fails stops the job
    # (issue 7's set -e), so the hostile module path goes through `module use`.
    good = write(tmp_path / "good.toml", f"[slurm]\ntime = \"3\"\nlauncher_args = [{srun_ok}]\n"
                                         f"module_use = [{toml_str(values[2])}]\n[slurm.env]\n{env}\n"
                                         "[workload]\nsteps = 2\nwarmup_steps = 1\n")
    proc = cli("sweep", str(good), "--backend", "sbatch", "--wait", "--poll", "1", "--run-dir", str(tmp_path / "g"))
    [row] = list(csv.DictReader((tmp_path / "g" / "summary.csv").open()))
    assert row["state"] == "COMPLETED", proc.stdout + proc.stderr
    assert not target.exists()

    bad = write(tmp_path / "bad.toml", f"[slurm]\ntime = \"3\"\npartition = {toml_str('debug;touch ' + str(target))}\n"
                                       "[matrix]\nranks_per_node = [1, 2]\n")
    proc = cli("sweep", str(bad), "--backend", "sbatch", "--hold", "--run-dir", str(tmp_path / "b"))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert proc.stdout.count("NOT submitted: sbatch failed:") == 2, proc.stdout
    rows = list(csv.DictReader(cli("summarize", str(tmp_path / "b"), "--format", "csv").stdout.splitlines()))
    assert [r["state"] for r in rows] == ["FAILED", "FAILED"]
    assert all(r["reason"].startswith("not submitted: sbatch failed:") and "partition" in r["reason"].lower()
               for r in rows), rows
    assert not target.exists()
