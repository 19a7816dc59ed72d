"""Cluster specs start workers and nothing else.

The three payloads of the adversarial pass (a ``--preload`` worker argument, an
``extra.worker_command``, an ``extra.shebang``) and the environment / interpreter
ones are rendered into a job script; were one accepted, the script is run as a
batch system runs it (executed, so its shebang counts) and must create no marker
file.  Each is refused with a ``ConfigError`` naming the field.
"""

from __future__ import annotations

import http.server
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from distsketch.cluster import render_job_script, validate_spec
from distsketch.errors import ConfigError

SLURM = {"kind": "slurm", "cores": 1, "memory": "1GB", "walltime": "00:10:00"}
WALLTIME_S = 30  # the run's limit: a worker that started is killed after it


def touch_code() -> str:
    """Python source creating ``PWNED`` in the job's directory, as ``bytes([...])`` (as reported)."""
    src = "open('PWNED','w').close()"
    return "bytes([" + ",".join(str(b) for b in src.encode()) + "]).decode()"


def run_like_a_batch_system(script: str, cwd: Path) -> None:
    """Execute the job script as SLURM does (its shebang chooses the interpreter).

    A worker that starts connects to the scheduler of the test and runs until the
    walltime, when it is killed with its process group (as the batch system would).
    """
    job = cwd / "job.sh"
    job.write_text(script)
    job.chmod(0o700)
    proc = subprocess.Popen([str(job)], cwd=cwd, start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        proc.wait(timeout=WALLTIME_S)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def render_or_run(cfg: dict, tmp_path: Path) -> ConfigError:
    """Render ``cfg``; if it is accepted, run the script against a scheduler, then fail."""
    try:
        render_job_script(cfg)
    except ConfigError as exc:
        return exc
    from distributed import LocalCluster

    with LocalCluster(n_workers=0, processes=False, protocol="tcp://", host="127.0.0.1",
                      dashboard_address=None) as cluster:
        run_like_a_batch_system(render_job_script(cfg, cluster.scheduler_address), tmp_path)
    pytest.fail(f"the spec was accepted; marker created: {(tmp_path / 'PWNED').exists()}")


@pytest.fixture
def evil_server(tmp_path):
    """An HTTP server on 127.0.0.1 serving ``evil.py``, which creates the marker."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "evil.py").write_text(f"exec({touch_code()})\n")

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, directory=str(site), **kwargs)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Quiet)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/evil.py"
    server.shutdown()
    thread.join()
    server.server_close()


# --- the three payloads of the report ---------------------------------------------------------

def test_preload_worker_argument_is_refused(evil_server, tmp_path):
    exc = render_or_run(SLURM | {"worker_extra_args": ["--preload", evil_server]}, tmp_path)
    assert "worker_extra_args" in str(exc) and "'--preload'" in str(exc)
    assert not (tmp_path / "PWNED").exists()


def test_worker_command_override_is_refused(tmp_path):
    command = f'timeit -n1 -s "exec({touch_code()})" pass #'
    exc = render_or_run(SLURM | {"extra": {"worker_command": command}}, tmp_path)
    assert "extra.worker_command" in str(exc) and "worker command" in str(exc)
    assert not (tmp_path / "PWNED").exists()


def test_shebang_override_is_refused(tmp_path):
    shebang = f"#!/usr/bin/env -S {sys.executable} -c exec({touch_code()})"
    exc = render_or_run(SLURM | {"extra": {"shebang": shebang}}, tmp_path)
    assert "extra.shebang" in str(exc)
    assert not (tmp_path / "PWNED").exists()


# --- environment and interpreter ---------------------------------------------------------------

def test_pythonpath_in_env_is_refused(tmp_path):
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(f"exec({touch_code()})\n")
    exc = render_or_run(SLURM | {"env": {"PYTHONPATH": str(site)}}, tmp_path)
    assert "env PYTHONPATH" in str(exc) and "job_script_prologue" in str(exc)
    assert not (tmp_path / "PWNED").exists()


@pytest.mark.parametrize("key", ["LD_PRELOAD", "LD_LIBRARY_PATH", "LD_AUDIT", "BASH_ENV", "ENV",
                                 "PYTHONSTARTUP", "PYTHONHOME", "PYTHONINSPECT", "PYTHONWARNINGS",
                                 "PERL5OPT", "PATH", "HOME", "DASK_CONFIG",
                                 "DASK_DISTRIBUTED__WORKER__PRELOAD",
                                 "DASK_DISTRIBUTED__NANNY__PRELOAD_ARGV",
                                 "dask_distributed__worker__preload", "DASK_DISTRIBUTED__WORKER"])
def test_environment_that_loads_code_is_refused(key, tmp_path):
    exc = render_or_run(SLURM | {"env": {key: str(tmp_path / "evil")}}, tmp_path)
    assert f"env {key}" in str(exc)
    assert not (tmp_path / "PWNED").exists()


def test_python_that_is_not_a_python_interpreter_is_refused(tmp_path):
    # /bin/sh -m FILE runs FILE: the job's working directory holds one
    (tmp_path / "distributed.cli.dask_worker").write_text("touch PWNED\n")
    exc = render_or_run(SLURM | {"python": "/bin/sh"}, tmp_path)
    assert "python = '/bin/sh'" in str(exc)
    assert not (tmp_path / "PWNED").exists()


@pytest.mark.parametrize("python, needle", [
    ("python3", "an absolute path"),
    ("/nonexistent/bin/python3", "does not exist"),
    ("/usr/bin/../bin/python3", "an absolute path"),
    ("/usr/bin/env", "named python"),
])
def test_python_must_be_an_absolute_existing_interpreter(python, needle):
    with pytest.raises(ConfigError) as exc:
        validate_spec(SLURM | {"python": python})
    assert f"python = {python!r}" in str(exc.value) and needle in str(exc.value)


def test_python_writable_by_others_is_refused(tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    fake = shared / "python3"
    fake.write_text("#!/bin/sh\n")
    fake.chmod(0o755)
    shared.chmod(0o777)
    with pytest.raises(ConfigError, match="writable by other users"):
        validate_spec(SLURM | {"python": str(fake)})


def test_an_existing_interpreter_is_accepted_and_runs_the_worker():
    script = render_job_script(SLURM | {"python": sys.executable})
    worker = next(ln for ln in script.splitlines() if "dask_worker" in ln)
    assert worker.startswith(f"{sys.executable} -m distributed.cli.dask_worker ")
    assert script.splitlines()[0] == "#!/usr/bin/env bash"


# --- line breaks through the value patterns, on every batch kind ---------------------------------
# `\s?` in the duration and memory patterns matched a line break, so the rest of a value
# became a line of its own in the script, which bash runs.  The payloads below are
# what those patterns accepted: a bare word after the line break.  Stand-in commands of
# those names on PATH create the marker, so a payload that reached bash would show.

@pytest.fixture
def stand_in_commands(tmp_path, monkeypatch):
    """Executables ``pwned`` and ``GB`` on PATH that create ``PWNED`` in the job's folder."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in ("pwned", "GB"):
        (bin_dir / name).write_text("#!/bin/sh\ntouch PWNED\n")
        (bin_dir / name).chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    return bin_dir


BATCH = {"slurm": SLURM, "pbs": SLURM | {"kind": "pbs"}, "sge": SLURM | {"kind": "sge"},
         "lsf": SLURM | {"kind": "lsf", "walltime": "00:10"}}
LINE_BREAKS = [
    ("worker_extra_args", ["--lifetime", "2\npwned"], "worker_extra_args = '2\\npwned'"),
    ("worker_extra_args", ["--memory-limit=4\nGB"], "worker_extra_args = '4\\nGB'"),
    ("extra", {"death_timeout": "2\npwned"}, "death_timeout = '2\\npwned'"),
]


@pytest.mark.parametrize("kind", list(BATCH))
@pytest.mark.parametrize("field, value, named", LINE_BREAKS)
def test_a_line_break_in_a_value_never_reaches_bash(kind, field, value, named, tmp_path,
                                                    stand_in_commands):
    exc = render_or_run(BATCH[kind] | {field: value}, tmp_path)
    assert named in str(exc)
    assert not (tmp_path / "PWNED").exists()


def test_a_line_break_in_job_mem_never_reaches_bash(tmp_path, stand_in_commands):
    exc = render_or_run(SLURM | {"job_mem": "4\nGB"}, tmp_path)
    assert "job_mem = '4\\nGB'" in str(exc)
    assert not (tmp_path / "PWNED").exists()


def test_worker_arguments_reach_the_worker_as_given(tmp_path):
    """Arguments bash would split or glob are quoted: bash hands the worker each one whole."""
    args = ["--listen-address", "tcp://[::1]:0", "--lifetime", "1 h", "--memory-limit=4 GB"]
    script = render_job_script(SLURM | {"worker_extra_args": args})
    worker = next(ln for ln in script.splitlines() if "dask_worker" in ln)
    words = worker.split(" -m distributed.cli.dask_worker ", 1)[1]
    # files a glob such as [::1] would match, in the job's folder
    (tmp_path / "1").write_text("")
    (tmp_path / ":").write_text("")
    res = subprocess.run(["bash", "-c", f"printf '%s\\0' {words}"], cwd=tmp_path,
                         capture_output=True, text=True, check=True)
    assert res.stdout.split("\0")[-len(args) - 1:-1] == args


# --- the last line of defence: what reaches dask-jobqueue and what it renders -------------------

@pytest.mark.parametrize("kind", list(BATCH))
@pytest.mark.parametrize("field, value", [
    ("walltime", "01:00:00\ntouch PWNED"), ("queue", "q\rid"), ("job_extra_directives", ["-x\nid"]),
    ("python", f"{sys.executable} ; touch PWNED"), ("local_directory", "/tmp/$(touch PWNED)"),
    ("name", "w`id`"),
])
def test_values_that_slipped_past_validation_are_refused_before_a_job_exists(kind, field, value,
                                                                            tmp_path):
    """A spec handed straight to ``jobqueue_cluster``, as if a check had let a value through."""
    from distsketch.cluster.job_scripts import jobqueue_cluster

    with pytest.raises(ConfigError) as exc:
        cluster = jobqueue_cluster({**BATCH[kind], field: value}, n_workers=0)
        cluster.close()
    assert f"{field} = {value!r}" in str(exc.value)
    assert not (tmp_path / "PWNED").exists()


@pytest.mark.parametrize("kind", list(BATCH))
def test_a_rendered_script_with_an_unexpected_line_is_refused(kind):
    from distsketch.cluster.job_scripts import check_rendered_script

    cfg = BATCH[kind] | {"job_script_prologue": ["echo ready"], "env": {"OMP_NUM_THREADS": 1},
                         "job_extra_directives": []}
    script = render_job_script(cfg)
    prologue = ["export OMP_NUM_THREADS=1", "echo ready"]
    check_rendered_script(script, kind, prologue, [])  # as rendered: accepted
    lines = script.split("\n")
    for i, injected in [(3, "touch PWNED"), (len(lines) - 2, "touch PWNED #"),
                        (len(lines) - 3, "echo extra")]:
        broken = "\n".join([*lines[:i], injected, *lines[i:]])
        with pytest.raises(ConfigError, match=f"unexpected line {injected!r}"):
            check_rendered_script(broken, kind, prologue, [])
    with pytest.raises(ConfigError, match="first line must be"):
        check_rendered_script(script.replace("#!/usr/bin/env bash", "#!/bin/sh -x", 1), kind,
                              prologue, [])


# --- an interpreter another user may replace --------------------------------------------------

def test_python_planted_under_a_shared_sticky_folder_by_another_user_is_refused(tmp_path,
                                                                                monkeypatch):
    """``/tmp/x/bin/python3`` made by someone else: its folders are not world-writable,
    but they are that user's, so the interpreter is theirs to change before the job runs."""
    shared = tmp_path / "shared"           # like /tmp: world-writable and sticky
    shared.mkdir()
    shared.chmod(0o1777)
    bin_dir = shared / "mallory" / "bin"
    bin_dir.mkdir(parents=True)
    fake = bin_dir / "python3"
    fake.write_text(f"#!/bin/sh\nexec {sys.executable} \"$@\"\n")
    fake.chmod(0o755)
    if os.getuid() == 0:  # make "mallory" another user's, as that user would have made it
        for path in (shared / "mallory", bin_dir, fake):
            os.chown(path, 65534, 65534)
    else:                 # or look at the same files as another user would
        real_uid = os.getuid()
        monkeypatch.setattr(os, "getuid", lambda: real_uid + 1)
    exc = render_or_run(SLURM | {"python": str(fake)}, tmp_path)
    assert f"python = {str(fake)!r}" in str(exc) and "belongs to another user" in str(exc)
    assert "every user may write to" in str(exc)
    assert not (tmp_path / "PWNED").exists()
    monkeypatch.undo()
    # this user's own interpreter in the same kind of folder is accepted
    mine = shared / "me" / "bin"
    mine.mkdir(parents=True)
    (mine / "python3").symlink_to(sys.executable)
    assert validate_spec(SLURM | {"python": str(mine / "python3")})["python"] == \
        str(mine / "python3")


# --- the Kubernetes operator joins an existing cluster of the same name --------------------------

def test_kubernetes_always_creates_its_own_cluster(monkeypatch):
    """``KubeCluster`` connects to an existing DaskCluster of that name by default: whoever
    made it would run the scheduler that the tasks go to and the results come from."""
    import enum
    import types

    from distsketch.cluster import start_cluster
    from distsketch.errors import ClusterError

    seen: dict = {}

    class CreateMode(enum.Enum):
        CREATE_ONLY = "CREATE_ONLY"
        CREATE_OR_CONNECT = "CREATE_OR_CONNECT"

    class KubeCluster:
        def __init__(self, **kwargs):
            seen.update(kwargs)
            raise RuntimeError("stand-in: no Kubernetes here")

    operator = types.ModuleType("dask_kubernetes.operator")
    operator.KubeCluster, operator.CreateMode = KubeCluster, CreateMode
    KubeCluster.__module__ = operator.__name__
    package = types.ModuleType("dask_kubernetes")
    package.operator = operator
    monkeypatch.setitem(sys.modules, "dask_kubernetes", package)
    monkeypatch.setitem(sys.modules, "dask_kubernetes.operator", operator)
    cfg = {"kind": "kubernetes", "image": "ghcr.io/o/ds:1", "name": "shared-name",
           "env": {"OMP_NUM_THREADS": 1}}
    with pytest.raises(ClusterError, match="stand-in: no Kubernetes here"), start_cluster(cfg):
        pass
    assert seen["create_mode"] is CreateMode.CREATE_ONLY
    assert seen["name"] == "shared-name" and seen["env"] == {"OMP_NUM_THREADS": "1"}


# --- scheduler files: read as data, within the timeout -------------------------------------------

def connect_within(spec: dict, seconds: float = 30) -> BaseException | None:
    """Run ``connect(spec)`` in a thread; fail if it has not returned after ``seconds``.

    Returns the exception it raised, or None when it connected."""
    from distsketch.cluster import connect

    outcome: dict = {}

    def attempt():
        try:
            with connect(spec):
                outcome["connected"] = True
        except BaseException as exc:  # the outcome is what the test looks at
            outcome["error"] = exc

    thread = threading.Thread(target=attempt, daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), f"connect({spec!r}) did not return within {seconds} s"
    assert ("connected" in outcome) != ("error" in outcome)
    return outcome.get("error")


@pytest.mark.parametrize("make, named", [
    (lambda p: os.mkfifo(p), "is not a regular file"),          # open() blocked for ever
    (lambda p: p.write_text("[1, 2]"), "is not a scheduler file"),   # TypeError
    (lambda p: p.write_text('{"address": 5}'), "is not a scheduler file"),
    (lambda p: p.write_bytes(b" " * (2 << 20)), "larger than"),
])
def test_a_scheduler_file_that_is_not_one_is_a_config_error(tmp_path, make, named):
    path = tmp_path / "scheduler.json"
    make(path)
    exc = connect_within({"kind": "scheduler", "scheduler_file": str(path), "timeout": 5})
    assert isinstance(exc, ConfigError) and named in str(exc) and str(path) in str(exc)
    assert path.exists()  # read, never replaced


def test_a_device_as_scheduler_file_is_a_config_error():
    # /dev/zero would be read until memory runs out; /dev/null is the same check, safely
    exc = connect_within({"kind": "scheduler", "scheduler_file": "/dev/null", "timeout": 5})
    assert isinstance(exc, ConfigError) and "is not a regular file" in str(exc)


def test_a_missing_scheduler_file_is_waited_for_only_until_the_timeout(tmp_path):
    from distsketch.errors import ClusterError

    path = tmp_path / "scheduler.json"
    exc = connect_within({"kind": "scheduler", "scheduler_file": str(path), "timeout": 0.3})
    assert isinstance(exc, ClusterError) and "does not exist after 0.3 s" in str(exc)
    assert not path.exists()
    # the file as `dask scheduler --scheduler-file` writes it is read
    import json

    from distributed import LocalCluster

    with LocalCluster(n_workers=0, processes=False, dashboard_address=None) as cluster:
        path.write_text(json.dumps({"type": "Scheduler", "address": cluster.scheduler_address,
                                    "id": "Scheduler-x", "services": {}, "workers": {}}))
        assert connect_within({"kind": "scheduler", "scheduler_file": str(path),
                               "timeout": 20}) is None
