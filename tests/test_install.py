"""hpcbench installed the ways users install it, outside the checkout: `python -m build` makes the sdist and the
wheel; the wheel carries every file the package reads and the site's data (modules, profiles, sweeps); and the
login-node verbs run on a real run directory and on corpus logs from three installs:

- core:  a fresh venv, `pip install hpcbench-*.whl` with no extra (no torch), the C scanner built;
- nocc:  the wheel built from the sdist with no compiler on PATH, installed into a fresh venv: the pure engine;
- full:  the test venv itself (editable, every extra, torch and Horovod).

The fresh venvs install offline (--no-index) from the wheelhouse scripts/venv.sh fills with the core
dependencies ($HPCBENCH_WHEELHOUSE, default: the test venv's wheelhouse/): nothing downloads while tests run.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from conftest import DATA, REPO, write

from hpcbench import __version__

WHEELHOUSE = Path(os.environ.get("HPCBENCH_WHEELHOUSE") or Path(sys.prefix) / "wheelhouse")
LOGS = DATA / "logs"
# A real run (ranks on this machine): 1 and 2 ranks, so that the report has a speedup and its plots.
SWEEP = """[sweep]
name = "install"
[workload]
framework = "ddp"
model = "mlp"
device = "cpu"
batch_size = 16
steps = 6
warmup_steps = 1
[matrix]
backend = ["gloo"]
nodes = [1]
ranks_per_node = [1, 2]
"""
SHARE = f"hpcbench-{__version__}.data/data/share/hpcbench/"
DATA_DIRS = ("modules", "clusters", "sweeps")  # installed under PREFIX/share/hpcbench (setup.cfg data_files)


def run(argv: list[str], env: dict[str, str] | None = None, cwd: Path | None = None, timeout: float = 300,
        ok: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([str(a) for a in argv], capture_output=True, text=True, env=env, cwd=cwd, timeout=timeout,
                          check=False)
    if ok:
        assert proc.returncode == 0, f"{' '.join(map(str, argv))}:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc


def clean_env(path: str, **extra: str) -> dict[str, str]:
    """The user's environment without the test venv's PYTHONPATH, with ``path`` as PATH and no compiler chosen."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "CC", "CXX", "VIRTUAL_ENV")}
    return {**env, "PATH": path, **extra}


def tracked(*tops: str) -> list[str]:
    out = run(["git", "ls-files", *tops], cwd=REPO).stdout.split()
    assert out, f"git ls-files {tops} names nothing"
    return out


@pytest.fixture(scope="module")
def dist(tmp_path_factory) -> dict[str, Path]:
    """The sdist and wheel `python -m build` makes from a copy of the checkout (the build writes into its source),
    and the wheel pip builds from that sdist where no compiler is on PATH."""
    tmp = tmp_path_factory.mktemp("dist")
    src = tmp / "src"
    src.mkdir()
    files = run(["git", "ls-files", "-co", "--exclude-standard"], cwd=REPO).stdout.split()
    for f in files:
        if (REPO / f).is_file():
            (src / f).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / f, src / f)
    run([sys.executable, "-m", "build", "--no-isolation", "--outdir", tmp / "out", src])
    (sdist,) = (tmp / "out").glob("*.tar.gz")
    (wheel,) = (tmp / "out").glob("*.whl")
    # no gcc/cc anywhere on PATH: only this interpreter's folder (python, pip)
    nocc = run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-index", "--find-links", WHEELHOUSE,
                "-w", tmp / "nocc", sdist], env=clean_env(str(Path(sys.executable).parent)))
    (pure,) = (tmp / "nocc").glob("*.whl")
    assert nocc.returncode == 0
    return {"sdist": sdist, "wheel": wheel, "pure": pure}


def venv(root: Path, wheel: Path, path_extra: str = "/usr/bin:/bin") -> Path:
    """A fresh venv under ``root`` with ``wheel`` and the core dependencies only, installed offline."""
    run([sys.executable, "-m", "venv", root])
    proc = run([root / "bin" / "python", "-m", "pip", "install", "-q", "--no-index", "--find-links", WHEELHOUSE, wheel],
               env=clean_env(f"{root / 'bin'}:{path_extra}"), ok=False)
    assert proc.returncode == 0, (f"offline install from {WHEELHOUSE} failed (scripts/venv.sh fills it):\n"
                                  f"{proc.stderr[-3000:]}")
    return root / "bin" / "python"


@pytest.fixture(scope="module")
def installs(dist, tmp_path_factory) -> dict[str, Path]:
    """name -> the python of each install of the matrix."""
    tmp = tmp_path_factory.mktemp("venvs")
    return {"core": venv(tmp / "core", dist["wheel"]), "nocc": venv(tmp / "nocc", dist["pure"], ""),
            "full": Path(sys.executable)}


@pytest.fixture(scope="module")
def real_run(tmp_path_factory) -> Path:
    """A real run, made by the full venv's local backend (its ranks need torch)."""
    tmp = tmp_path_factory.mktemp("run")
    sweep = write(tmp / "install.toml", SWEEP)
    run([sys.executable, "-m", "hpcbench", "sweep", sweep, "--backend", "local", "--run-dir", tmp / "run"],
        cwd=tmp, timeout=600)
    return tmp / "run"


def names(whl: Path) -> set[str]:
    with zipfile.ZipFile(whl) as z:
        return set(z.namelist())


def test_the_sdist_and_the_wheel_carry_every_file(dist):
    wheel, pure = names(dist["wheel"]), names(dist["pure"])
    package = tracked("hpcbench")
    data = [SHARE + f for f in tracked(*DATA_DIRS)]
    for got in (wheel, pure):
        missing = sorted(set(package) - got) + sorted(set(data) - got)
        assert not missing, f"not in the wheel: {missing}"
        assert f"hpcbench-{__version__}.dist-info/entry_points.txt" in got
    assert {f for f in package if not f.endswith(".py")} >= {
        "hpcbench/submit/templates/job.sh.j2", "hpcbench/submit/templates/pack.sh.j2", "hpcbench/explain/links.toml"}
    scanner = [n for n in wheel if n.startswith("hpcbench/parse/_scan.") and n.endswith(".so")]
    assert len(scanner) == 1, sorted(wheel)  # built where a compiler is
    assert not any(n.endswith(".so") for n in pure), sorted(pure)  # and left out where none is, the build going on
    with zipfile.ZipFile(dist["wheel"]) as z:
        meta = z.read(f"hpcbench-{__version__}.dist-info/METADATA").decode()
    assert "Requires-Dist: matplotlib" in meta and 'Requires-Dist: torch; extra == "train"' in meta
    import tarfile

    with tarfile.open(dist["sdist"]) as t:
        inside = {n.split("/", 1)[1] for n in t.getnames() if "/" in n}
    assert {"setup.py", "setup.cfg", "pyproject.toml", "hpcbench/parse/_scan.c", *package, *tracked(*DATA_DIRS)} <= inside


# Each line: a verb a login node runs, and what its output must say. {run}, {logs}, {out}, {db} are filled in.
# explain exits 1 where a finding is an error (that is its verdict, not a failure of the install).
VERBS = (
    (["plan", "{sweep}", "--runs-root", "{out}/planned"], "nothing submitted", (0,)),
    (["summarize", "{run}", "--out", "{out}/report", "--history", "{db}"], "report: {out}/report/report.md", (0,)),
    (["summarize", "{logs}/horovod_1.log", "{logs}/nccltests_1.log", "--out", "{out}/logs", "--history", "{db}"],
     "history: {db}", (0,)),
    (["explain", "{run}"], "n1x2", (0, 1)),
    (["explain", "{logs}/nccl_gdrdma-mpiprefix_04.log"], "network IB", (0, 1)),
    (["history", "--history", "{db}"], "trend plot: {out}/history.png", (0,)),
    (["parse", "{logs}/nccl_gdrdma-mpiprefix_04.log"], "NET/IB/GDRDMA", (0,)),
    (["check", "{logs}/nccl_gdrdma-mpiprefix_04.log"], "1 files checked: 0 errors", (0,)),
    (["status", "{run}"], "2 points: 2 COMPLETED", (0,)),
    (["env"], "which framework/backend/device runs here", (0,)),
)


@pytest.mark.parametrize("name", ["core", "nocc", "full"])
def test_the_login_node_verbs_run_from_each_install(name, installs, real_run, tmp_path):
    python = installs[name]
    out = tmp_path
    fill = {"run": str(real_run), "logs": str(LOGS), "out": str(out), "db": str(out / "history.sqlite"),
            "sweep": str(real_run / "sweep.toml")}
    # the full install is the test venv as the tests run it (its PYTHONPATH kept); the fresh ones see none
    env = ({**os.environ, "PATH": f"{python.parent}:/usr/bin:/bin"} if name == "full"
           else clean_env(f"{python.parent}:/usr/bin:/bin"))
    env["HPCBENCH_HISTORY"] = str(out / "unused.sqlite")
    where = run([python, "-c", "import hpcbench; print(hpcbench.__file__)"], env=env, cwd=tmp_path).stdout.strip()
    assert ("site-packages" not in where if name == "full" else "site-packages" in where), where
    if name != "full":  # every file of the package, installed (templates, links.toml, gpus.toml, the stub, ...)
        site = Path(where).parent.parent
        assert not [f for f in tracked("hpcbench") if not (site / f).is_file()]
        assert not [f for f in tracked(*DATA_DIRS) if not (python.parent.parent / "share" / "hpcbench" / f).is_file()]
    for argv, says, rcs in VERBS:
        proc = run([python, "-m", "hpcbench", *(a.format(**fill) for a in argv)], env=env, cwd=tmp_path, ok=False)
        assert proc.returncode in rcs and says.format(**fill) in proc.stdout + proc.stderr, \
            (name, argv, proc.returncode, proc.stdout[-2000:], proc.stderr)
        assert "Traceback" not in proc.stderr, (name, argv, proc.stderr)
    pngs = sorted(p.name for p in (out / "report").glob("*.png"))
    assert "scalability.png" in pngs or len(pngs) >= 2, pngs  # summarize drew its plots with the core install
    assert (out / "history.png").read_bytes()[:4] == b"\x89PNG"
    code = f"import hpcbench; df = hpcbench.load({str(real_run)!r}); print(type(df).__name__, len(df), sorted(set(df.state)))"
    api = run([python, "-c", code], env=env, cwd=tmp_path)
    assert api.stdout.split() == ["DataFrame", "2", "['COMPLETED']"], api.stdout
    doctor = run([python, "-m", "hpcbench", "doctor", "--no-job"], env=env, cwd=tmp_path, ok=False)
    assert "Traceback" not in doctor.stderr and "ok       python: " in doctor.stdout, doctor.stdout + doctor.stderr
    if name == "nocc":
        assert "log scanner: not built" in doctor.stdout and "the pure-Python engine reads the logs" in doctor.stdout
    else:
        assert "ok       log scanner: C scanner built" in doctor.stdout, doctor.stdout
    if name == "full":
        assert "ok       torch: torch" in doctor.stdout
    else:  # the ranks would run this interpreter: doctor says so, and which extra to install
        assert "error    torch: torch is not importable" in doctor.stdout and "'hpcbench[train]'" in doctor.stdout
        assert doctor.returncode == 1
        # a verb that needs an extra's package: one line, exit 2, the extra named
        fetch = run([python, "-m", "hpcbench", "data", "fetch", "mnist", "--dest", tmp_path / "d"], env=env,
                    cwd=tmp_path, ok=False)
        assert fetch.returncode == 2 and fetch.stdout == "", fetch.stdout + fetch.stderr
        (line,) = fetch.stderr.splitlines()
        assert line == (f"error: hpcbench data: torchvision is needed, and {python} cannot import it (hint: install "
                        f"it: {python} -m pip install 'hpcbench[train]' (the train extra))"), line
        local = run([python, "-m", "hpcbench", "sweep", real_run / "sweep.toml", "--backend", "local", "--runs-root",
                     tmp_path / "refused"], env=env, cwd=tmp_path, ok=False)
        assert local.returncode == 2 and "torch is needed" in local.stderr and "hpcbench[train]" in local.stderr
        assert len(local.stderr.splitlines()) == 1 and not (tmp_path / "refused").exists(), local.stderr


def test_the_site_module_and_hpcbench_prefix_work_with_a_wheel_install(installs, tmp_path):
    """`module use PREFIX/share/hpcbench/modules`: the wheel's own copy finds its prefix, or HPCBENCH_PREFIX's."""
    prefix = installs["core"].parent.parent
    base = {"HOME": os.environ.get("HOME", "/root"), "PATH": "/usr/bin:/bin", "USER": "root", "LOGNAME": "root"}
    script = (f"module use {prefix}/share/hpcbench/modules && module load hpcbench && command -v hpcbench && "
              "hpcbench --version && python -c 'import hpcbench; print(hpcbench.__file__)' && echo $HPCBENCH_PREFIX")
    for extra in ({}, {"HPCBENCH_PREFIX": str(prefix)}):
        proc = run(["bash", "-lc", script], env={**base, **extra}, cwd=tmp_path)
        exe, version, where, said = proc.stdout.splitlines()
        assert exe == f"{prefix}/bin/hpcbench" and version == f"hpcbench {__version__}", proc.stdout
        assert said == str(prefix), proc.stdout
        assert where.startswith(str(prefix)) and "site-packages" in where, where
    # the profiles and sweeps pip installed are found by name from anywhere
    proc = run([installs["core"], "-m", "hpcbench", "plan", f"{prefix}/share/hpcbench/sweeps/local.toml", "--cluster",
                "minicluster", "--runs-root", tmp_path / "runs"], env=clean_env(f"{prefix}/bin:/usr/bin:/bin"),
               cwd=tmp_path)
    assert "nothing submitted" in proc.stdout
    (planned,) = (tmp_path / "runs").iterdir()
    assert (planned / "cluster.txt").read_text().strip() == f"{prefix}/share/hpcbench/clusters/minicluster.toml"
    job = next((planned / "points").glob("*/job.sh")).read_text()
    assert f"module use {prefix}/share/hpcbench/modules" in job and "module load hpcbench" in job, job


def test_a_core_install_submits_to_slurm_and_follows_the_run(installs, slurm_cluster, tmp_path):
    """The login node's core install submits (held jobs, so nothing runs), shows status, cancels and resubmits;
    the ranks would run the full venv (slurm.python), as on a cluster whose compute nodes hold torch."""
    python = installs["core"]
    sweep = write(tmp_path / "held.toml", SWEEP.replace('[workload]', f'[slurm]\npartition = "debug"\n'
                                                         f'python = "{sys.executable}"\n[workload]'))
    env = clean_env(f"{python.parent}:/usr/bin:/bin")
    hv = ["--backend", "sbatch", "--hold"]
    sub = run([python, "-m", "hpcbench", "sweep", sweep, *hv, "--run-dir", tmp_path / "run"], env=env, cwd=tmp_path)
    assert "submitted 2, refused 0" in sub.stdout, sub.stdout
    try:
        st = run([python, "-m", "hpcbench", "status", tmp_path / "run"], env=env, cwd=tmp_path)
        assert "2 points: 2 PENDING" in st.stdout, st.stdout
        run([python, "-m", "hpcbench", "cancel", tmp_path / "run"], env=env, cwd=tmp_path)
        again = run([python, "-m", "hpcbench", "resubmit", tmp_path / "run", "--state", "CANCELLED,PENDING",
                     "--hold"], env=env, cwd=tmp_path)
        assert "submitted 2, refused 0" in again.stdout, again.stdout
    finally:
        run([python, "-m", "hpcbench", "cancel", tmp_path / "run"], env=env, cwd=tmp_path, ok=False)
