"""Shipped workflow specs, crontab line, systemd units and the orchestrator example."""

from __future__ import annotations

import configparser
import inspect
import py_compile
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

import distsketch
from distsketch import registry
from distsketch.errors import ConfigError
from distsketch.workflow import load_workflow_spec

ROOT = Path(__file__).resolve().parents[2]
WF = ROOT / "workflows"


def _cron_field_ok(field: str, lo: int, hi: int) -> bool:
    if field == "*":
        return True
    for part in field.split(","):
        base, _, step = part.partition("/")
        if step and not step.isdigit():
            return False
        if base == "*":
            continue
        a, _, b = base.partition("-")
        for v in (a, b or a):
            if not v.isdigit() or not lo <= int(v) <= hi:
                return False
    return True


def test_crontab_line_runs_a_shipped_spec_nightly():
    lines = [ln for ln in (WF / "cron" / "distsketch.crontab").read_text().splitlines()
             if ln.strip() and not ln.lstrip().startswith("#")]
    env = [ln for ln in lines if "=" in ln.split()[0]]
    jobs = [ln for ln in lines if ln not in env]
    assert {e.split("=", 1)[0] for e in env} == {"SHELL", "PATH"}
    assert len(jobs) == 1
    fields = jobs[0].split(None, 5)
    minute, hour, dom, month, dow, command = fields
    for f, lo, hi in ((minute, 0, 59), (hour, 0, 23), (dom, 1, 31), (month, 1, 12), (dow, 0, 7)):
        assert _cron_field_ok(f, lo, hi), f
    assert (dom, month, dow) == ("*", "*", "*") and minute.isdigit() and hour.isdigit()  # daily
    argv = shlex.split(command.split("&&", 1)[1].split(">>")[0])
    assert argv[0].endswith("/distsketch") and argv[1] == "run"
    assert (WF / Path(argv[2]).name).exists() and "--wait" in argv


def _unit(path: Path) -> configparser.ConfigParser:
    cp = configparser.ConfigParser(interpolation=None, strict=True)
    cp.optionxform = str  # systemd keys are case-sensitive
    cp.read_string(path.read_text())
    return cp


def test_systemd_units_parse_and_agree_with_the_crontab(tmp_path):
    svc = _unit(WF / "systemd" / "distsketch-nightly.service")
    timer = _unit(WF / "systemd" / "distsketch-nightly.timer")
    assert svc["Service"]["Type"] == "oneshot"
    exec_start = shlex.split(svc["Service"]["ExecStart"])
    assert exec_start[0].startswith("/") and exec_start[1:3] == ["run", "workflows/skpca.yaml"]
    assert "--wait" in exec_start
    assert timer["Timer"]["Unit"] == "distsketch-nightly.service"
    assert timer["Timer"]["Persistent"] == "true"
    assert timer["Install"]["WantedBy"] == "timers.target"
    cron = next(ln for ln in (WF / "cron" / "distsketch.crontab").read_text().splitlines()
                if ln[:1].isdigit())
    minute, hour = cron.split()[:2]
    assert timer["Timer"]["OnCalendar"] == f"*-*-* {int(hour):02d}:{int(minute):02d}:00"


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze not installed")
def test_systemd_analyze_verify(tmp_path):
    """`systemd-analyze verify` on copies whose ExecStart points at an existing binary."""
    exe = shutil.which("true")
    for name in ("distsketch-nightly.service", "distsketch-nightly.timer"):
        text = (WF / "systemd" / name).read_text()
        text = text.replace("/srv/distsketch/venv/bin/distsketch", exe)
        (tmp_path / name).write_text(text)
    proc = subprocess.run(["systemd-analyze", "verify", str(tmp_path / "distsketch-nightly.timer"),
                           str(tmp_path / "distsketch-nightly.service")],
                          capture_output=True, text=True, timeout=60)
    problems = [ln for ln in proc.stderr.splitlines()
                if "distsketch-nightly" in ln and "Documentation" not in ln]
    assert proc.returncode == 0 and not problems, proc.stderr
    cal = subprocess.run(["systemd-analyze", "calendar", "*-*-* 02:30:00"], capture_output=True,
                         text=True, timeout=60)
    assert cal.returncode == 0 and "Next elapse" in cal.stdout


def _estimator_available(name: str) -> bool:
    try:
        registry.resolve(name)
    except ConfigError:
        return False
    return True


@pytest.mark.parametrize("name", ["skpca", "meka", "krr", "quickstart"])
def test_shipped_workflow_specs_are_valid(name):
    path = WF / f"{name}.yaml"
    import yaml

    raw = yaml.safe_load(path.read_text())
    method = raw["method"]["name"]
    if not _estimator_available(method):
        with pytest.raises(ConfigError, match="not available in this installation"):
            load_workflow_spec(path)
        return
    cfg = load_workflow_spec(path)
    assert Path(cfg.outputs.dir).is_absolute()
    assert cfg.input.startswith(str(ROOT))  # relative to the spec file, inside the repo tree
    cls = getattr(distsketch, method)
    accepted = set(inspect.signature(cls).parameters)
    assert set(cfg.method.params) <= accepted, set(cfg.method.params) - accepted
    cls(**cfg.method.params)._validate_params()  # the values pass the constraint table


def test_orchestrator_example_compiles(tmp_path):
    path = WF / "orchestrators" / "dagster_skpca.py"
    py_compile.compile(str(path), cfile=str(tmp_path / "x.pyc"), doraise=True)
    text = path.read_text()
    assert "run_workflow(" in text and "skpca.yaml" in text


def test_workflows_readme_mentions_every_scheduling_file():
    text = (WF / "README.md").read_text()
    for needle in ("distsketch.crontab", "distsketch-nightly.service", "distsketch-nightly.timer",
                   "dagster_skpca.py", "--full", "--wait", "WorkflowHooks"):
        assert needle in text, needle
