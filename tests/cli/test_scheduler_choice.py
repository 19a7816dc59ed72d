"""Without --cluster, a small input runs on threads in the CLI's process; a large one, or a
configured scheduler, gets a cluster — and the log says which."""

from __future__ import annotations

import dask
import numpy as np
import pytest

import distsketch.cli as cli
from distsketch.cli.common import SMALL_INPUT_BYTES, default_cluster
from distsketch.errors import ConfigError


class Shape:
    def __init__(self, shape, dtype="float32"):
        self.shape, self.dtype = shape, np.dtype(dtype)


@pytest.fixture(autouse=True)
def no_scheduler(monkeypatch):
    monkeypatch.delenv("DASK_SCHEDULER_ADDRESS", raising=False)
    with dask.config.set({"scheduler-address": None}):
        yield


def test_small_inputs_take_threads_large_ones_a_cluster():
    rows = SMALL_INPUT_BYTES // (4 * 16)
    assert default_cluster(Shape((rows, 16))) == "threads"  # exactly the limit
    assert default_cluster(Shape((rows + 1, 16))) is None
    assert default_cluster(Shape((rows, 16), "float64")) is None  # bytes, not rows
    assert default_cluster(None) is None  # no input to size: the LocalCluster
    with dask.config.set({"distsketch.cli.threads-below": "1KiB"}):
        assert default_cluster(Shape((16, 16))) == "threads"
        assert default_cluster(Shape((17, 16))) is None
    with dask.config.set({"distsketch.cli.threads-below": 0}):
        assert default_cluster(Shape((1, 1))) is None
    with dask.config.set({"distsketch.cli.threads-below": "lots"}), \
            pytest.raises(ConfigError, match="threads-below"):
        default_cluster(Shape((1, 1)))


def test_a_configured_scheduler_wins_over_threads(monkeypatch):
    monkeypatch.setenv("DASK_SCHEDULER_ADDRESS", "tcp://127.0.0.1:1")
    assert default_cluster(Shape((10, 2))) is None


def test_cli_fit_of_a_small_input_starts_no_cluster(tmp_path, monkeypatch, caplog):
    import distributed

    def refuse(*args, **kwargs):
        raise AssertionError("a LocalCluster was started for a small input")

    monkeypatch.setattr(distributed, "LocalCluster", refuse)
    np.save(tmp_path / "x.npy", np.random.default_rng(0).normal(size=(500, 4)))
    assert cli.main(["ingest", str(tmp_path / "x.npy"), str(tmp_path / "x.zarr")]) == 0
    with caplog.at_level("INFO", logger="distsketch.cli"):
        code = cli.main(["fit", "--method", "RandomFourierFeatures", str(tmp_path / "x.zarr"),
                         str(tmp_path / "m.zarr"), "--n-components", "8", "--no-progress"])
    assert code == 0 and (tmp_path / "m.zarr").is_dir()
    assert "running on threads in this process, no cluster" in caplog.text
