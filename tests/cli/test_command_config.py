"""A command's options reach the graph layer as dask config, only while it runs."""

from __future__ import annotations

import os

import dask
import numpy as np

import distsketch.cli as cli
import distsketch.graph


def test_progress_option_is_dask_config_during_the_command_and_no_environment(
        tmp_path, monkeypatch):
    # --no-progress used to be written to os.environ, where it outlived the command and
    # leaked into every later computation of the process
    np.save(tmp_path / "x.npy", np.ones((50, 3), dtype=np.float32))
    monkeypatch.delenv("DISTSKETCH_PROGRESS", raising=False)
    seen: list[tuple[object, object]] = []
    resolve = distsketch.graph.progress_enabled

    def recording(progress):
        seen.append((dask.config.get("distsketch.progress", None),
                     os.environ.get("DISTSKETCH_PROGRESS")))
        return resolve(progress)

    monkeypatch.setattr(distsketch.graph, "progress_enabled", recording)
    assert cli.main(["ingest", str(tmp_path / "x.npy"), str(tmp_path / "x.zarr"),
                     "--no-progress"]) == 0
    assert seen and seen[0] == (False, None)
    # nothing is left behind once the command has returned
    assert "DISTSKETCH_PROGRESS" not in os.environ
    assert dask.config.get("distsketch.progress", None) is None
