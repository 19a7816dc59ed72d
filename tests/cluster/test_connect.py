"""connect(): precedence of explicit spec, Dask's configured scheduler and the local default;
clusters it did not start stay up; storage_options as Dask config; the dashboard link."""

from __future__ import annotations

import importlib.util
import socket
import urllib.request

import dask
import numpy as np
import pytest
import yaml
import zarr

from distsketch import cli
from distsketch.cluster import (
    DEFAULT_LOCAL,
    STORAGE_OPTIONS_KEY,
    configured_scheduler_address,
    connect,
    load_spec,
    resolve_spec,
    validate_spec,
)
from distsketch.errors import ClusterError, ConfigError

HAS_BOKEH = importlib.util.find_spec("bokeh") is not None


@pytest.fixture(scope="module")
def foreign():
    """A cluster started by someone else (in-process workers: cheap to start)."""
    from distributed import LocalCluster

    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False,
                      dashboard_address=None) as cluster:
        yield cluster


@pytest.fixture
def clean_env(monkeypatch):
    """No scheduler address from the environment or Dask's config, whatever the CI sets."""
    monkeypatch.delenv("DASK_SCHEDULER_ADDRESS", raising=False)
    with dask.config.set({"scheduler-address": None}):
        yield monkeypatch


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def still_serves(address: str, n_workers: int) -> bool:
    from distributed import Client

    with Client(address, timeout=10) as other:
        return (len(other.scheduler_info()["workers"]) == n_workers
                and other.submit(sum, [1, 2, 3]).result() == 6)


# --- precedence ---------------------------------------------------------------------------

def test_without_any_setting_the_local_default_is_used(clean_env):
    assert configured_scheduler_address() is None
    assert resolve_spec(None) == DEFAULT_LOCAL


def test_environment_address_is_used_and_the_cluster_is_not_shut_down(clean_env, foreign):
    address = foreign.scheduler_address
    clean_env.setenv("DASK_SCHEDULER_ADDRESS", address)
    messages: list[str] = []
    with connect(log=messages.append) as client:
        assert client.scheduler.address == address
        assert client.submit(sum, [1, 2]).result() == 3
    assert messages == [f"using the Dask scheduler at {address} (from DASK_SCHEDULER_ADDRESS)"]
    assert foreign.status.name == "running"
    assert still_serves(address, n_workers=1)


def test_dask_config_scheduler_address_is_used(clean_env, foreign):
    address = foreign.scheduler_address
    with dask.config.set({"scheduler-address": address}):
        assert configured_scheduler_address() == (address, "Dask config scheduler-address")
        with connect() as client:
            assert client.scheduler.address == address
    assert still_serves(address, n_workers=1)


def test_an_explicit_spec_wins_over_the_environment(clean_env, foreign):
    # the environment names a port nobody listens on: using it would fail
    clean_env.setenv("DASK_SCHEDULER_ADDRESS", f"tcp://127.0.0.1:{free_port()}")
    with connect("sync") as client:
        assert client is None
        assert dask.config.get("scheduler") == "synchronous"
    with connect(foreign.scheduler_address) as client:
        assert client.scheduler.address == foreign.scheduler_address
    assert resolve_spec("local") == DEFAULT_LOCAL  # 'local' means the embedded cluster, always
    with connect({"kind": "local", "n_workers": 1, "processes": False}) as client:
        assert client.scheduler.address != foreign.scheduler_address
        assert len(client.scheduler_info()["workers"]) == 1


def test_unreachable_configured_address_uses_dask_connect_timeout(clean_env):
    address = f"tcp://127.0.0.1:{free_port()}"
    clean_env.setenv("DASK_SCHEDULER_ADDRESS", address)
    with dask.config.set({"distributed.comm.timeouts.connect": "1s"}):
        with pytest.raises(ClusterError) as exc, connect():
            pass
    assert f"cannot reach the Dask scheduler at {address} within 1 s" in str(exc.value)
    assert "comes from DASK_SCHEDULER_ADDRESS" in str(exc.value)
    assert "--cluster local" in str(exc.value)


def test_cli_honours_the_environment_address(clean_env, foreign, tmp_path, capsys):
    clean_env.setenv("DASK_SCHEDULER_ADDRESS", foreign.scheduler_address)
    X = np.random.default_rng(0).normal(size=(300, 4)).astype(np.float32)
    arr = zarr.create_array(store=str(tmp_path / "X.zarr"), shape=X.shape, dtype=X.dtype,
                            chunks=(100, 4))
    arr[...] = X
    code = cli.main(["fit", str(tmp_path / "X.zarr"), str(tmp_path / "m.zarr"), "--gamma", "0.5",
                     "--random-state", "0"])
    err = capsys.readouterr().err
    assert code == 0, err
    assert (f"using the Dask scheduler at {foreign.scheduler_address} (from "
            "DASK_SCHEDULER_ADDRESS)") in err
    assert f"connected to Dask at {foreign.scheduler_address} (1 worker(s)" in err
    assert still_serves(foreign.scheduler_address, n_workers=1)


# --- storage_options --------------------------------------------------------------------------

OPTIONS = {"anon": False, "key": "k", "client_kwargs": {"endpoint_url": "http://127.0.0.1:9",
                                                        "region_name": "x"}, "block_size": 5e6,
           "default_cache_type": None}


def test_storage_options_are_set_while_connected_and_restored(clean_env):
    assert dask.config.get(STORAGE_OPTIONS_KEY, None) is None
    with connect({"kind": "sync", "storage_options": OPTIONS}):
        assert dask.config.get(STORAGE_OPTIONS_KEY) == OPTIONS
    assert dask.config.get(STORAGE_OPTIONS_KEY, None) is None
    # a value set before is restored too, also when the block fails
    with dask.config.set({STORAGE_OPTIONS_KEY: {"anon": True}}):
        with pytest.raises(RuntimeError, match="boom"), \
                connect({"kind": "threads", "storage_options": {"anon": False}}):
            assert dask.config.get(STORAGE_OPTIONS_KEY) == {"anon": False}
            raise RuntimeError("boom")
        assert dask.config.get(STORAGE_OPTIONS_KEY) == {"anon": True}
        with connect("sync"):  # a spec without storage_options leaves the value alone
            assert dask.config.get(STORAGE_OPTIONS_KEY) == {"anon": True}


def test_storage_options_of_a_local_cluster_spec_file(clean_env, tmp_path):
    p = tmp_path / "local.yaml"
    # counts may be written as floats
    p.write_text(yaml.safe_dump({"kind": "local", "n_workers": 1.0, "threads_per_worker": 2.0,
                                 "processes": False, "storage_options": OPTIONS}))
    assert load_spec(p)["storage_options"] == OPTIONS
    with connect(str(p)) as client:
        workers = client.scheduler_info()["workers"].values()
        assert [w["nthreads"] for w in workers] == [2]
        assert dask.config.get(STORAGE_OPTIONS_KEY) == OPTIONS
    assert dask.config.get(STORAGE_OPTIONS_KEY, None) is None


@pytest.mark.parametrize("key, value", [("n_workers", 1.5), ("threads_per_worker", 0),
                                        ("threads_per_worker", True), ("n_workers", "2")])
def test_local_counts_must_be_whole_positive_numbers(key, value):
    with pytest.raises(ConfigError, match=f"{key}"):
        validate_spec({"kind": "local", key: value})


@pytest.mark.parametrize("value, needle", [
    ({1: "x"}, "storage_options: key 1 must be a non-empty string"),
    ({"client_kwargs": {"endpoint_url": ["a"]}}, "storage_options.client_kwargs.endpoint_url = "),
    ({"fn": object()}, "not object"),
])
def test_storage_options_must_be_plain_data(value, needle):
    specs = [{"kind": "local"}, {"kind": "slurm", "cores": 1, "memory": "1GB"},
             {"kind": "scheduler", "address": "tcp://127.0.0.1:1"}]
    for spec in specs:
        with pytest.raises(ConfigError) as exc:
            validate_spec(spec | {"storage_options": value})
        assert needle in str(exc.value)
    with pytest.raises(ConfigError) as exc, connect({"kind": "sync", "storage_options": value}):
        pass
    assert needle in str(exc.value)
    assert dask.config.get(STORAGE_OPTIONS_KEY, None) is None


def test_storage_options_must_be_a_mapping():
    with pytest.raises(ConfigError, match=r"option storage_options=\[.*\] of kind 'local' is "
                                          "invalid; it must be dict"):
        validate_spec({"kind": "local", "storage_options": [("anon", True)]})
    # a mapping given to connect() is validated as a spec file is
    with pytest.raises(ConfigError, match="option storage_options='anon=true' of kind 'sync' is "
                                          "invalid; it must be dict"), \
            connect({"kind": "sync", "storage_options": "anon=true"}):
        pass


# --- the dashboard ----------------------------------------------------------------------------

def test_dashboard_address_is_printed_when_the_dashboard_is_on(clean_env):
    messages: list[str] = []
    spec = {"kind": "local", "n_workers": 1, "processes": False,
            "dashboard_address": "127.0.0.1:0"}
    with connect(spec, log=messages.append) as client:
        port = client.scheduler_info()["services"].get("dashboard")
        if HAS_BOKEH:
            assert len(messages) == 1 and messages[0].startswith("Dask dashboard: http://")
            assert messages[0].endswith(f":{port}/status")
            # the printed page is really served
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/status", timeout=30) as page:
                assert page.status == 200 and b"<html" in page.read(4096).lower()
    if not HAS_BOKEH:  # distributed serves no dashboard without bokeh: nothing to print
        assert messages == []
    messages.clear()
    with connect({"kind": "local", "n_workers": 1, "processes": False}, log=messages.append):
        pass
    assert messages == []  # dashboard_address: null turns it off
