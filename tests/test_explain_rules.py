"""Adding an explain rule is adding a module: the rules package finds every module that defines RULES, in
ORDER, and explain runs what it finds, with no list to edit."""
from __future__ import annotations

import sys
import textwrap

import pytest
from conftest import REPO

from hpcbench.explain import rules
from hpcbench.report.summarize import make_report

LOG = REPO / "tests" / "data" / "logs" / "horovod_1.log"  # a measured point: every rule reads it


def _module(folder, name: str, body: str) -> None:
    (folder / f"{name}.py").write_text(textwrap.dedent(body))


def test_every_module_with_rules_is_collected_in_its_order(tmp_path, monkeypatch):
    pkg = tmp_path / "rulepkg_for_test"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    _module(pkg, "zeta", "RULES = (len,)\nORDER = 5\n")
    _module(pkg, "alpha", "RULES = (repr, str)\n")  # ORDER left out: after the ordered ones
    _module(pkg, "helpers", "def shared(): pass\n")  # no RULES: a helper module, not a group
    _module(pkg, "logs", "RULES = (abs,)\nORDER = 5\nON_LOGS_ALONE = True\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        found = rules.collect("rulepkg_for_test")
    finally:
        for name in [m for m in sys.modules if m.startswith("rulepkg_for_test")]:
            del sys.modules[name]
    assert [(g.module, g.rules, g.order, g.on_logs_alone) for g in found] == [
        ("rulepkg_for_test.logs", (abs,), 5, True),
        ("rulepkg_for_test.zeta", (len,), 5, False),
        ("rulepkg_for_test.alpha", (repr, str), 100, False)]


def test_the_shipped_rules_keep_their_order():
    """Transports, then placement, then the figures, then the procedure: findings of equal cost are listed in this
    order."""
    assert [(g.module.rsplit(".", 1)[1], g.on_logs_alone) for g in rules.groups()] == [
        ("net", True), ("host", False), ("bandwidth", False), ("excerpt", True), ("stats", False),
        ("procedure", False)]


@pytest.fixture
def extra_rule(tmp_path, monkeypatch):
    """A rule module in a folder of the rules package's path, as a new file in hpcbench/explain/rules/ would be."""
    _module(tmp_path, "zz_test_rule", '''
        from hpcbench.findings import Finding

        def hello(ctx):
            return [Finding("warning", "test-rule", f"{ctx.name} seen, {len(ctx.parsed)} log(s)", subject=ctx.name)]

        RULES = (hello,)
    ''')
    monkeypatch.setattr(rules, "__path__", [*rules.__path__, str(tmp_path)])
    rules.groups.cache_clear()
    yield
    rules.groups.cache_clear()
    sys.modules.pop("hpcbench.explain.rules.zz_test_rule", None)


def test_a_new_rule_module_is_run_by_explain(extra_rule):
    [why] = make_report([LOG]).why
    found = [f for f in why.findings if f.rule == "test-rule"]
    assert [f.claim for f in found] == ["horovod_1.log seen, 1 log(s)"]
    assert rules.groups()[-1].module == "hpcbench.explain.rules.zz_test_rule"


def test_without_it_the_rule_is_not_there():
    assert not any(f.rule == "test-rule" for f in make_report([LOG]).why[0].findings)
