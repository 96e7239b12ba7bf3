from __future__ import annotations

import subprocess
import sys

from conftest import REPO

from hpcbench import __version__


def test_version_and_help(cli):
    v = cli("--version")
    assert v.returncode == 0 and v.stdout.strip() == f"hpcbench {__version__}"
    h = cli("--help")
    assert h.returncode == 0
    for verb in ("sweep", "plan", "summarize", "minicluster"):
        assert verb in h.stdout


def test_console_script_is_installed():
    exe = subprocess.run([sys.executable, "-c", "import shutil,sys,os; print(os.path.join(os.path.dirname(sys.executable), 'hpcbench'))"],
                         capture_output=True, check=False, text=True).stdout.strip()
    proc = subprocess.run([exe, "--version"], capture_output=True, check=False, text=True)
    assert proc.stdout.strip() == f"hpcbench {__version__}"


def test_python_m_sweep_is_hpcbench_sweep(cli, tmp_path):
    a = cli("sweep", "sweeps/scaling.toml", "--dry-run", "--run-dir", str(tmp_path / "a"))
    b = cli("sweeps/scaling.toml", "--dry-run", "--run-dir", str(tmp_path / "b"), module="hpcbench.sweep")
    c = cli("plan", "sweeps/scaling.toml", "--run-dir", str(tmp_path / "c"))
    assert a.returncode == b.returncode == c.returncode == 0, a.stderr + b.stderr + c.stderr
    strip = lambda out, d: out.replace(str(tmp_path / d), "RUN")
    assert strip(a.stdout, "a") == strip(b.stdout, "b") == strip(c.stdout, "c")
    assert "23 points" in a.stdout and "nothing submitted" in a.stdout
    scripts = sorted(p.parent.name for p in (tmp_path / "a" / "points").glob("*/job.sh"))
    assert len(scripts) == 23
    assert scripts == sorted(p.parent.name for p in (tmp_path / "b" / "points").glob("*/job.sh"))
    assert (tmp_path / "a" / "sweep.toml").read_text() == (REPO / "sweeps" / "scaling.toml").read_text()


def test_planning_imports_no_heavy_library(tmp_path):
    code = (
        "import sys, hpcbench.cli as c\n"
        f"assert c.main(['plan', 'sweeps/scaling.toml', '--run-dir', {str(tmp_path / 'r')!r}]) == 0\n"
        "print(sorted(m for m in ('torch', 'pandas', 'matplotlib', 'submitit', 'numpy') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=True).stdout
    assert out.strip().splitlines()[-1] == "[]"


def test_existing_run_dir_takes_the_same_sweep_only(cli, tmp_path):
    # The same sweep again is a re-run (it submits only what is missing); another sweep is refused.
    assert cli("plan", "sweeps/local.toml", "--run-dir", str(tmp_path / "r")).returncode == 0
    again = cli("plan", "sweeps/local.toml", "--run-dir", str(tmp_path / "r"))
    assert again.returncode == 0, again.stderr
    other = cli("plan", "sweeps/ci.toml", "--run-dir", str(tmp_path / "r"))
    assert other.returncode == 2 and "holds a run of a different sweep" in other.stderr


def test_summarize_csv_format_and_bad_dir(cli, tmp_path):
    from report_helpers import make_run, point

    # two points whose jobs left nothing behind: rows with their state and reason, never dropped
    make_run(tmp_path / "r", [(point(), None), (point(rpn=2), None)])
    out = cli("summarize", str(tmp_path / "r"), "--format", "csv")
    assert out.returncode == 0
    lines = out.stdout.splitlines()
    assert lines[0].startswith("point_id,label,backend") and len(lines) == 3
    assert all(",MISSING," in l for l in lines[1:]), lines
    assert cli("summarize", str(tmp_path / "r"), "--strict").returncode == 1
    # The folder holding the run: the run is read as a run (its own .txt files are not foreign logs),
    # beside a loose log of someone else's.
    (tmp_path / "theirs.log").write_text("Total img/sec on 2 GPU(s): 100.0 +-1.0\n")
    both = cli("summarize", str(tmp_path), "--format", "csv", "--out", str(tmp_path / "report"))
    assert both.returncode == 0, both.stderr
    rows = both.stdout.splitlines()[1:]
    assert len(rows) == 3 and sum(",MISSING," in r for r in rows) == 2 and "theirs.log" in rows[2]
    (tmp_path / "empty").mkdir()
    bad = cli("summarize", str(tmp_path / "empty"))
    assert bad.returncode == 2 and "not an hpcbench run directory" in bad.stderr
    # a planned run is a dry run: said in one line (tests/test_dry_run.py), not a row per point
    assert cli("plan", "sweeps/local.toml", "--run-dir", str(tmp_path / "p")).returncode == 0
    dry = cli("summarize", str(tmp_path / "p"), "--format", "csv")
    assert dry.returncode == 2 and "a dry run ('hpcbench plan')" in dry.stderr and dry.stdout == ""


def test_auto_backend_runs_locally_without_sbatch(cli, tmp_path):
    # No sbatch on PATH: --backend auto (the default) must fall back to the local backend.
    sweep = tmp_path / "tiny.toml"
    sweep.write_text("[workload]\nsteps = 2\nwarmup_steps = 0\n")
    proc = cli("sweep", str(sweep), "--run-dir", str(tmp_path / "r"), env={"PATH": "/nonexistent"}, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "submitting with backend local" in proc.stdout
    ledger = (tmp_path / "r" / "ledger.jsonl").read_text()
    assert '"backend": "local"' in ledger and '"exit_code": "0"' in ledger


def test_auto_backend_picks_sbatch_when_it_is_on_path(slurm_cluster):
    from hpcbench.submit.registry import create

    assert create("auto").name == "sbatch"
