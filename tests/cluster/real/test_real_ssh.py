"""SSH for real: an sshd on 127.0.0.1 with a key made for the test (``.ci/cluster_services.sh``).

A spec made from ``clusters/ssh.yaml`` starts the scheduler and two workers
through asyncssh (``distributed.SSHCluster``); the run's result is bitwise that
of the embedded local cluster, and every process started over SSH is gone
afterwards.  A wrong host key, a refused login and an unreachable host are each
a ``ClusterError`` naming the host, with nothing started.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
import yaml

from distsketch.cluster import connect
from distsketch.errors import ClusterError

pytestmark = [pytest.mark.system, pytest.mark.filterwarnings("ignore::UserWarning"),
              pytest.mark.filterwarnings("ignore::DeprecationWarning")]

REPO = Path(__file__).resolve().parents[3]
CLI = str(Path(sys.executable).parent / "distsketch")


@pytest.fixture(scope="module")
def sshd_pid(sshd: Path) -> int:
    if importlib.util.find_spec("asyncssh") is None:
        from conftest import unavailable  # the folder's conftest, on sys.path under pytest

        unavailable("asyncssh is not installed (SSHCluster needs it): pip install asyncssh")
    return int((sshd / "sshd.pid").read_text())


def ssh_spec(folder: Path, sshd: Path, name: str = "ssh.yaml", **connect_options) -> Path:
    """``clusters/ssh.yaml`` pointed at the test sshd: scheduler and 2 workers on 127.0.0.1."""
    spec = yaml.safe_load((REPO / "clusters" / "ssh.yaml").read_text())
    port = int(next(line.split()[1] for line in (sshd / "sshd_config").read_text().splitlines()
                    if line.startswith("Port ")))
    spec.update({
        "hosts": ["127.0.0.1", "127.0.0.1"],
        "connect_options": {"port": port, "username": "root",
                            "known_hosts": str(sshd / "known_hosts"),
                            "client_keys": [str(sshd / "client_ed25519")],
                            "connect_timeout": 10, **connect_options},
        "worker_options": {"nthreads": 1, "n_workers": 2, "memory_limit": "1GB"},
        "scheduler_options": {"port": 0, "dashboard_address": ":0"},
        "remote_python": sys.executable, "timeout": 30})
    path = folder / name
    path.write_text(yaml.safe_dump(spec))
    return path


def sessions(sshd_pid: int) -> list[psutil.Process]:
    """Processes under the test sshd (its login sessions and what they started)."""
    return psutil.Process(sshd_pid).children(recursive=True)


def no_sessions_left(sshd_pid: int, seconds: float = 30) -> list[str]:
    """Command lines still running under the sshd after ``seconds`` (empty once all ended).

    The sshd's own child for a connection just closed takes a moment to exit: a login
    that started nothing is gone within ``seconds``, a worker it started is not.
    """
    # psutil waits for each of them to exit, at most ``seconds`` in all
    psutil.wait_procs(sessions(sshd_pid), timeout=seconds)
    left = sessions(sshd_pid)
    out = []
    for p in left:
        try:
            out.append(" ".join(p.cmdline())[:200])
        except psutil.NoSuchProcess:
            pass
    return out


def test_run_over_ssh_matches_local_and_leaves_nothing_running(sshd, sshd_pid, workflow,
                                                               same_as_local, tmp_path):
    assert sessions(sshd_pid) == []
    proc = subprocess.run([CLI, "run", str(workflow("out")), "--cluster",
                           str(ssh_spec(tmp_path, sshd))],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    # the scheduler and both workers ran as processes started through the sshd
    assert "distributed.deploy.ssh - INFO" in proc.stderr
    assert proc.stderr.count("Start worker at:") == 2
    same_as_local(tmp_path / "out" / "result")
    assert no_sessions_left(sshd_pid) == []


def test_wrong_host_key_is_a_clear_error_naming_the_host(sshd, sshd_pid, tmp_path):
    key = tmp_path / "other_host"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    port = yaml.safe_load(ssh_spec(tmp_path, sshd).read_text())["connect_options"]["port"]
    known = tmp_path / "known_hosts"
    known.write_text(f"[127.0.0.1]:{port} {' '.join(Path(f'{key}.pub').read_text().split()[:2])}\n")
    with pytest.raises(ClusterError, match=r"ssh host 127\.0\.0\.1 .*host key is not trusted"):
        with connect(ssh_spec(tmp_path, sshd, known_hosts=str(known))):
            pass
    assert no_sessions_left(sshd_pid, seconds=10) == []


def test_refused_login_is_a_clear_error_naming_the_host(sshd, sshd_pid, tmp_path):
    key = tmp_path / "not_authorized"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    with pytest.raises(ClusterError, match=r"ssh host 127\.0\.0\.1 .*refused the login"):
        with connect(ssh_spec(tmp_path, sshd, client_keys=[str(key)])):
            pass
    assert no_sessions_left(sshd_pid, seconds=10) == []


def test_unreachable_host_is_a_clear_error_naming_it_and_nothing_starts(sshd, sshd_pid,
                                                                        tmp_path):
    spec = yaml.safe_load(ssh_spec(tmp_path, sshd).read_text())
    # the scheduler's host is fine; a worker host is a documentation address (RFC 5737)
    spec["hosts"] = ["127.0.0.1", "198.51.100.7"]
    spec["connect_options"]["connect_timeout"] = 5
    path = tmp_path / "unreachable.yaml"
    path.write_text(yaml.safe_dump(spec))
    start = time.monotonic()
    with pytest.raises(ClusterError, match=r"ssh host 198\.51\.100\.7 .*cannot be reached"):
        with connect(path):
            pass
    assert time.monotonic() - start < 5 + 10
    # not even the scheduler was started on the reachable host
    assert no_sessions_left(sshd_pid, seconds=10) == []
