"""``fit --progress`` shows every pass of the fit; ``--no-progress`` (and a log) none."""

from __future__ import annotations

import re

import numpy as np
import pytest
import zarr

import distsketch.cli as cli

PASS_LINE = re.compile(r"^SketchedKernelRidgeClassifier: pass \d+ \(.+\): .*in [\d.]+ s$")


@pytest.mark.parametrize("flag", ["--progress", "--no-progress"])
def test_fit_progress_flag(tmp_path, capsys, flag: str) -> None:
    rng = np.random.default_rng(2)
    X = rng.normal(size=(600, 3)).astype(np.float32)
    group = zarr.open_group(str(tmp_path / "d.zarr"), mode="w")
    group.create_array("X", data=X, chunks=(150, 3))
    group.create_array("y", data=(X[:, 0] > 0).astype(np.int64), chunks=(150,))
    code = cli.main(["fit", f"{tmp_path / 'd.zarr'}::X", str(tmp_path / "m.zarr"),
                     "--y", f"{tmp_path / 'd.zarr'}::y", "--n-check", "0",
                     "--method", "SketchedKernelRidgeClassifier", "--cluster", "threads", flag])
    assert code == 0
    passes = [line for line in capsys.readouterr().err.splitlines() if PASS_LINE.match(line)]
    if flag == "--progress":
        assert len(passes) >= 3  # the targets, the standardising pass, the ridge pass
    else:
        assert passes == []
