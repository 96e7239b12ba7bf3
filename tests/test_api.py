"""The Python API: hpcbench.load, load_logs and explain are the CLI's code, as DataFrames and typed objects,
imported only when used; and the example notebook runs in a real Jupyter kernel on a run made here."""
from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from dataclasses import replace

import pytest
from conftest import DATA, REPO
from report_helpers import allreduce_rows, make_run, point, record

import hpcbench
from hpcbench.errors import ConfigError, NoSuchFile
from hpcbench.explain import PointWhy
from hpcbench.findings import Finding
from hpcbench.parse import parse_file
from hpcbench.plan.expand import point_id
from hpcbench.report.tidy import TIDY_COLUMNS

LOGS = DATA / "logs"


def test_import_hpcbench_imports_no_heavy_library():
    code = ("import sys, hpcbench\n"
            "api = (hpcbench.load, hpcbench.load_logs, hpcbench.explain, hpcbench.Explanation)\n"
            "print(sorted(m for m in ('pandas', 'numpy', 'torch', 'matplotlib') if m in sys.modules))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"


def test_load_logs_gives_the_columns_of_load(tmp_path):
    hvd, tests = LOGS / "horovod_1.log", LOGS / "nccltests_allgather-bf16-g2_50.log"
    df = hpcbench.load_logs([hvd, tests])
    assert list(df.columns) == list(hpcbench.load(hvd).columns) == list(TIDY_COLUMNS)
    rows = df.set_index("label")
    assert rows.loc[hvd.name, "throughput"] == parse_file(hvd)["horovod"]["total_img_sec"]
    assert (rows.loc[tests.name, "kind"], rows.loc[tests.name, "collective"]) == ("collective", "all_gather")
    few = [LOGS / f"nccltests_{n}.log" for n in ("alltoall-blankredop_64", "sendrecv-inplace-na_56", "1")]
    assert list(hpcbench.load_logs(few)["label"]) == [f.name for f in few]
    a = point()
    rd = make_run(tmp_path / "run", [(a, record(a, 10.0))])
    with pytest.raises(ConfigError, match=r"an hpcbench run directory, not a log") as e:
        hpcbench.load_logs(rd.root)
    assert "hpcbench.load" in e.value.hint
    with pytest.raises(NoSuchFile):
        hpcbench.load_logs(tmp_path / "nope.log")


def test_explain_is_the_code_of_hpcbench_explain(cli):
    logs = [str(LOGS / "nccl_shm-socket-mixedchanfmt_32.log"), str(LOGS / "nccl_trainer-role-prefix-ifname_72.log")]
    why = hpcbench.explain(*logs)
    assert isinstance(why, hpcbench.Explanation) and len(why) == 2
    assert all(isinstance(w, PointWhy) for w in why) and all(isinstance(f, Finding) for _, f in why.findings)
    df = why.to_frame()
    assert list(df.columns) == ["point", "rule", "severity", "claim", "evidence", "effect", "fix", "because"]
    proc = cli("explain", *logs, "--format", "json")
    doc = json.loads(proc.stdout)
    from_cli = {(d["point"], f["rule"], f["severity"], f["claim"]) for d in doc["points"] for f in d["findings"]}
    ours = {(r.point, r.rule, r.severity, r.claim) for r in df.itertuples() if r.rule != "link-peak"}
    assert ours == from_cli and len(df) == len(from_cli) + sum(d["peak_unknown"] is not None for d in doc["points"])
    assert why.failed == (proc.returncode == 1) and why.failed  # the trainer log failed with ncclInternalError
    assert [s.rule for s in why.run.causes] == [c["rule"] for c in doc["run"]["causes"]]  # the run first, as printed
    table = cli("explain", *logs, "--all").stdout  # the full listing prints the same rows
    assert all(r.claim[:40] in table for r in df.itertuples())
    # the options are the CLI's, with its errors
    gather = LOGS / "nccltests_allgather-bf16-g2_50.log"
    with pytest.raises(ConfigError, match=r"the scaling model needs an all_reduce curve"):
        hpcbench.explain(logs[0], allreduce=gather)
    with pytest.raises(ConfigError, match=r"unknown baseline 'best'"):
        hpcbench.explain(logs[0], baseline="best")
    with pytest.raises(NoSuchFile, match=r"no such allreduce log"):
        hpcbench.explain(logs[0], allreduce="nope.log")


def _notebook_run(root):
    """Two training series (one point failed) and an all_gather point: what the notebook must show."""
    a, b = point(), point(rpn=2)
    h1, h2 = point(framework="horovod", backend="mpi"), point(framework="horovod", backend="mpi", rpn=2)
    ag = point(kind="collective", rpn=2)
    ag = replace(ag, collective="all_gather", id=point_id({**ag.params(), "collective": "all_gather"}))
    rows = [replace(r, collective="all_gather", redop="none") for r in allreduce_rows(2.0)]
    points = [(a, record(a, 100.0)), (b, record(b, 180.0)), (h1, record(h1, 90.0)), (h2, "boom: the ranks lost a peer"),
              (ag, record(ag, 1.0, kind="collective", allreduce=rows))]
    return make_run(root, points), [p for p, _ in points]


def test_the_example_notebook_runs_in_a_jupyter_kernel(tmp_path, monkeypatch):
    import nbclient
    import nbformat

    rd, points = _notebook_run(tmp_path / "run")
    monkeypatch.setenv("HPCBENCH_RUN", str(rd.root))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
    for var, sub in (("JUPYTER_RUNTIME_DIR", "runtime"), ("IPYTHONDIR", "ipython"), ("JUPYTER_DATA_DIR", "data")):
        monkeypatch.setenv(var, str(tmp_path / sub))  # the kernel's files go under tmp, not into $HOME
    nb = nbformat.read(REPO / "examples" / "scaling.ipynb", as_version=4)
    nbclient.NotebookClient(nb, timeout=300, kernel_name="python3",
                            resources={"metadata": {"path": str(tmp_path)}}).execute()
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    text = "".join(o.get("text", "") for o in outputs if o.output_type == "stream" and o.get("name") == "stdout")
    assert f"run: {rd.root}" in text
    assert all(p.label in text for p in points)  # the points table: every point, the failed one with its reason
    assert "boom: the ranks lost a peer" in text
    # the report's tables, the all_gather point in its own, and the findings (the failed point's among them)
    assert "== Intra-node scaling" in text and "== All-gather bandwidth: busbw (algbw) GB/s, time per operation" in text
    assert "no-result" in text
    images = [o for o in outputs if o.output_type == "display_data" and "image/png" in o.get("data", {})]
    assert len(images) == 1 and base64.b64decode(images[0]["data"]["image/png"])[:8] == b"\x89PNG\r\n\x1a\n"
