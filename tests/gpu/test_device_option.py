"""The device option without a GPU: its errors, its entry points and the planning it drives.

CuPy is not installed here.  Its absence is simulated with ``sys.modules["cupy"] =
None`` (``import cupy`` then raises ImportError); a GPU is simulated by a stand-in
``cupy`` module whose arrays are a NumPy subclass, so that tests can see where a
block was moved to the "device" and back, and that the Zarr output of a
``device="cuda"`` run equals the CPU's.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import types
from pathlib import Path

import dask
import numpy as np
import pytest

import distsketch.cli as cli
from distsketch import RandomFourierFeatures
from distsketch.cluster import connect, validate_spec
from distsketch.errors import ConfigError
from distsketch.graph import choose_block_rows, cluster_resources, current_device
from distsketch.graph.devices import device_resources
from distsketch.io import open_array, write_array
from distsketch.ops.device import check_device, require_cupy
from distsketch.workflow import load_workflow_spec, run_workflow

ROOT = Path(__file__).resolve().parents[2]
GiB = 2**30


class GPUArray(np.ndarray):
    """A stand-in for ``cupy.ndarray``: a block of this type was moved to the "GPU"."""


def _fake_cupy(n_devices: int = 1, memory: int = 8 * GiB, fail: Exception | None = None):
    def count() -> int:
        if fail is not None:
            raise fail
        return n_devices

    mod = types.ModuleType("cupy")
    mod.ndarray = GPUArray
    mod.asarray = lambda a: np.asarray(a).view(GPUArray)
    mod.empty = lambda shape, dtype=None: np.empty(shape, dtype).view(GPUArray)
    mod.cuda = types.SimpleNamespace(
        runtime=types.SimpleNamespace(getDeviceCount=count),
        Device=lambda: types.SimpleNamespace(mem_info=(memory // 2, memory)))
    return mod


@pytest.fixture
def no_cupy(monkeypatch):
    monkeypatch.setitem(sys.modules, "cupy", None)


@pytest.fixture
def gpu(monkeypatch):
    monkeypatch.setitem(sys.modules, "cupy", _fake_cupy())


@pytest.fixture
def store(tmp_path):
    X = np.random.default_rng(5).normal(size=(600, 5)).astype(np.float32)
    return write_array(X, tmp_path / "x.zarr", chunk_rows=100), X


# --- names and errors ---------------------------------------------------------------------------

@pytest.mark.parametrize("value", ["gpu", "cuda:0", "", 1])
def test_an_unknown_device_is_a_config_error_naming_both(value, store):
    with pytest.raises(ConfigError, match=r"'cpu'.*'cuda'"):
        check_device(value)
    with pytest.raises(ConfigError, match="is not a device"):
        open_array(store[0], device=value)


def test_device_names_are_normalised():
    assert check_device(" CUDA ") == "cuda" and check_device("cpu") == "cpu"


def test_an_unknown_device_in_the_dask_config_is_refused(store):
    with dask.config.set({"distsketch.device": "tpu"}), \
            pytest.raises(ConfigError, match=r"dask config distsketch\.device = 'tpu'"):
        open_array(store[0])


def test_cuda_without_cupy_names_the_extra(no_cupy, store):
    with pytest.raises(ConfigError, match=r"pip install 'distsketch\[gpu\]'"):
        open_array(store[0], device="cuda")
    with dask.config.set({"distsketch.device": "cuda"}), \
            pytest.raises(ConfigError, match=r"distsketch\[gpu\]"):
        RandomFourierFeatures(n_components=8).fit(store[0])


@pytest.mark.parametrize("fake, says", [
    (_fake_cupy(n_devices=0), "no GPU is visible"),
    (_fake_cupy(fail=RuntimeError("cudaErrorNoDevice")), "cannot reach a GPU"),
])
def test_cupy_without_a_gpu_is_a_config_error(monkeypatch, fake, says, store):
    monkeypatch.setitem(sys.modules, "cupy", fake)
    with pytest.raises(ConfigError, match=says):
        require_cupy()
    with pytest.raises(ConfigError, match=says):
        open_array(store[0], device="cuda")


# --- a path with device="cuda" ------------------------------------------------------------------

def test_blocks_move_to_the_device_in_their_read_task(gpu, store):
    path, X = store
    A = open_array(path, device="cuda", block_rows=200)
    assert type(A._meta) is GPUArray and A.chunks[0] == (200, 200, 200)
    cpu = open_array(path, block_rows=200)
    # the read and the move are one task: the graph is the CPU's, one task per block
    assert len(dict(A.__dask_graph__())) == len(dict(cpu.__dask_graph__()))
    assert len([k for k in dict(A.__dask_graph__()) if isinstance(k, tuple)]) == 3
    block = A.blocks[1].compute()
    assert type(block) is GPUArray
    np.testing.assert_array_equal(np.asarray(block), X[200:400])
    assert type(cpu._meta) is np.ndarray and type(cpu.blocks[1].compute()) is np.ndarray


def test_the_dask_config_is_the_default_device(gpu, store):
    assert current_device() == "cpu"
    with dask.config.set({"distsketch.device": "cuda"}):
        assert current_device() == "cuda"
        assert type(open_array(store[0])._meta) is GPUArray
        # an explicit argument wins over the config
        assert type(open_array(store[0], device="cpu")._meta) is np.ndarray


def test_in_memory_input_moves_to_the_device_too(gpu):
    X = np.arange(12.0).reshape(6, 2)
    A = open_array(X, device="cuda", block_rows=3)
    assert type(A.blocks[0].compute()) is GPUArray
    np.testing.assert_array_equal(np.asarray(A.compute()), X)


def test_numeric_targets_from_a_path_take_the_inputs_device(gpu, store, tmp_path):
    # fit("X.zarr", "y.zarr") on cuda must not mix CuPy rows with NumPy targets
    _, X = store
    y = write_array(X[:, 0].astype(np.float64), tmp_path / "y.zarr", chunk_rows=100)
    labels = write_array(np.where(X[:, 0] > 0, 1, 0).astype(np.int64), tmp_path / "c.zarr",
                         chunk_rows=100)
    with dask.config.set({"distsketch.device": "cuda"}):
        Y = open_array(y, targets=True)
        C = open_array(labels, targets=True)
    assert type(Y._meta) is GPUArray and type(Y.blocks[1].compute()) is GPUArray
    assert type(C._meta) is GPUArray
    np.testing.assert_array_equal(np.asarray(Y.compute()), X[:, 0])
    assert type(open_array(y, targets=True)._meta) is np.ndarray  # the CPU default


def test_a_cuda_path_writes_the_same_zarr_output_as_the_cpu(gpu, store, tmp_path):
    path, X = store
    on_gpu = open_array(path, device="cuda")
    out = write_array(on_gpu, tmp_path / "copy.zarr")
    back = open_array(out).compute()
    assert type(back) is np.ndarray
    np.testing.assert_array_equal(back, X)
    cpu = RandomFourierFeatures(n_components=16, random_state=0).fit(path)
    want = write_array(cpu.transform(path), tmp_path / "cpu.zarr")
    with dask.config.set({"distsketch.device": "cuda"}):
        est = RandomFourierFeatures(n_components=16, random_state=0).fit(path)
        got = write_array(est.transform(path), tmp_path / "gpu.zarr")
    np.testing.assert_array_equal(open_array(got).compute(), open_array(want).compute())


# --- the command line ---------------------------------------------------------------------------

def _cli(capsys, *argv) -> tuple[int, str, str]:
    capsys.readouterr()
    code = cli.main([*map(str, argv)])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("command", ["fit", "transform", "predict", "evaluate", "run"])
def test_every_command_reading_data_takes_device(command):
    parser = cli.build_parser()
    sub = parser._subparsers._group_actions[0].choices[command]
    action = sub._option_string_actions["--device"]
    assert list(action.choices) == ["cpu", "cuda"] and action.default is None


def test_an_unknown_device_on_the_command_line_is_a_usage_error(tmp_path, store, capsys):
    with pytest.raises(SystemExit) as exc:
        cli.main(["fit", str(store[0]), str(tmp_path / "m.zarr"), "--device", "gpu"])
    assert exc.value.code == 2
    assert "invalid choice: 'gpu'" in capsys.readouterr().err


def test_device_cuda_without_cupy_fails_before_reading(no_cupy, tmp_path, store, capsys):
    code, _, err = _cli(capsys, "fit", store[0], tmp_path / "m.zarr", "--device", "cuda",
                        "--cluster", "sync")
    assert code == 2 and "--device cuda needs CuPy" in err and "distsketch[gpu]" in err
    assert not (tmp_path / "m.zarr").exists()


def test_cli_transform_on_cuda_writes_the_cpu_output(gpu, tmp_path, store, capsys):
    path, _ = store
    code, _, err = _cli(capsys, "fit", path, tmp_path / "m.zarr", "--method",
                        "RandomFourierFeatures", "--n-components", "8", "--cluster", "sync")
    assert code == 0, err
    outs = {}
    for device in ("cpu", "cuda"):
        target = tmp_path / f"z-{device}.zarr"
        code, _, err = _cli(capsys, "transform", tmp_path / "m.zarr", path, target,
                            "--device", device, "--cluster", "sync")
        assert code == 0, err
        outs[device] = open_array(target).compute()
    np.testing.assert_array_equal(outs["cuda"], outs["cpu"])


# --- workflow and cluster specs -----------------------------------------------------------------

def _spec(tmp_path, store, **extra) -> dict:
    return {"input": str(store[0]), "method": {"name": "RandomFourierFeatures",
                                               "params": {"n_components": 8}},
            "outputs": {"dir": str(tmp_path / "run"), "features": None, "report": None},
            "cluster": "sync", **extra}


def test_the_workflow_device_field_is_checked_by_its_table(tmp_path, store):
    with pytest.raises(ConfigError, match="key device='gpu' is invalid; it must be cpu or cuda"):
        load_workflow_spec(_spec(tmp_path, store, device="gpu"))
    spec = load_workflow_spec(_spec(tmp_path, store, device="cuda"))
    assert spec.device == "cuda" and spec.as_dict()["device"] == "cuda"
    plain = load_workflow_spec(_spec(tmp_path, store))
    assert plain.device is None and "device" not in plain.as_dict()
    # where blocks are computed is not part of what a stored state depends on
    assert spec.key() == plain.key()


def test_a_cuda_workflow_without_cupy_fails_before_locking(no_cupy, tmp_path, store):
    with pytest.raises(ConfigError, match=r"workflow device 'cuda' needs CuPy"):
        run_workflow(_spec(tmp_path, store, device="cuda"))
    with pytest.raises(ConfigError, match=r"needs CuPy"):
        run_workflow(_spec(tmp_path, store), device="cuda")
    assert not (tmp_path / "run").exists()


def test_a_cuda_workflow_opens_its_input_on_the_device(gpu, tmp_path, store, monkeypatch):
    import distsketch.io.arrays.access as io_arrays

    seen = []
    real = io_arrays.open_array

    def spy(*args, **kwargs):
        out = real(*args, **kwargs)
        seen.append(type(out._meta))
        return out

    monkeypatch.setattr(io_arrays, "open_array", spy)
    monkeypatch.setattr("distsketch.io.open_array", spy)
    result = run_workflow(_spec(tmp_path, store, device="cuda"))
    assert result.rows_after == 600 and seen and set(seen) == {GPUArray}


def test_the_cuda_cluster_kind_is_validated_and_needs_dask_cuda(monkeypatch):
    spec = validate_spec({"kind": "cuda", "n_workers": 2.0, "cuda_visible_devices": [0, 1]})
    assert spec["n_workers"] == 2
    with pytest.raises(ConfigError, match="cuda_visible_devices"):
        validate_spec({"kind": "cuda", "cuda_visible_devices": "0;id"})
    with pytest.raises(ConfigError, match="'CUDA_VISIBLE_DEVICES' is not known for kind 'cuda'"):
        validate_spec({"kind": "cuda", "CUDA_VISIBLE_DEVICES": "0"})
    monkeypatch.setitem(sys.modules, "dask_cuda", None)
    with pytest.raises(ConfigError, match=r"'dask_cuda'.*distsketch\[gpu\]"), \
            connect(ROOT / "clusters" / "cuda.yaml"):
        pass


def test_the_cuda_example_spec_is_packaged():
    from distsketch.data import example_spec

    assert example_spec("clusters/cuda.yaml").read_bytes() == \
        (ROOT / "clusters" / "cuda.yaml").read_bytes()


# --- planning from device memory ----------------------------------------------------------------

def test_blocks_are_planned_from_the_injected_device_memory():
    conf = {"distsketch.device": "cuda", "distsketch.device-memory": "8GiB", "num_workers": 4}
    with dask.config.set(conf):
        res = cluster_resources()
        plan = choose_block_rows(10**7, 400, bytes_per_row=40_000)
    assert res.task_bytes == 8 * GiB * 0.5 / 4 and res.threads == 4
    assert "distsketch.device-memory" in res.source
    # the same rule as for host memory, with the GPU's share as the budget
    want = choose_block_rows(10**7, 400, bytes_per_row=40_000, budget=GiB, n_threads=4)
    assert (plan.block_rows, plan.budget) == (want.block_rows, want.budget)
    with dask.config.set({**conf, "distsketch.device-memory": "16GiB"}):
        assert cluster_resources().task_bytes == 2 * GiB
    # an explicit per-task budget still wins
    with dask.config.set({**conf, "distsketch.task-memory": "100MiB"}):
        assert cluster_resources().task_bytes == 100 * 2**20


def test_the_device_memory_comes_from_cupy_when_not_given(monkeypatch):
    monkeypatch.setitem(sys.modules, "cupy", _fake_cupy(memory=24 * GiB))
    with dask.config.set({"distsketch.device": "cuda", "num_workers": 2}):
        res = cluster_resources()
    assert res.task_bytes == 24 * GiB * 0.5 / 2 and "CuPy mem_info" in res.source
    with dask.config.set({"distsketch.device-memory": "lots"}), \
            pytest.raises(ConfigError, match=r"distsketch\.device-memory='lots' is not a size"):
        device_resources(None, [], 0.5, 1)


def test_each_worker_reports_its_gpu_memory():
    class Client:
        def run(self, func):
            return {"tcp://a:1": 16 * GiB, "tcp://b:1": 12 * GiB}

    workers = [{"nthreads": 1}, {"nthreads": 2}]
    task, threads, source = device_resources(Client(), workers, 0.5, 99)
    # the smallest GPU, shared by the busiest worker's threads
    assert (task, threads) == (12 * GiB * 0.5 / 2, 3) and "workers'" in source


def test_cpu_planning_is_unchanged_by_the_device_memory_key():
    with dask.config.set({"distsketch.device-memory": "1MiB"}):
        with_key = cluster_resources()
    assert with_key == cluster_resources()


# --- nothing imports CuPy on the CPU path --------------------------------------------------------

def test_a_cpu_fit_and_cli_run_never_import_cupy(tmp_path):
    """A finder records every attempt to import ``cupy`` and who made it.

    dask.array itself tries ``import cupy`` when it is first imported (to register
    CuPy's chunk type); no module of distsketch may.
    """
    script = textwrap.dedent(f"""
        import importlib.abc, json, sys, traceback
        attempts = []
        class Spy(importlib.abc.MetaPathFinder):
            def find_spec(self, name, path=None, target=None):
                if name == "cupy" or name.startswith("cupy."):
                    attempts.append([f.filename for f in traceback.extract_stack()
                                     if "importlib" not in f.filename])
                return None
        sys.meta_path.insert(0, Spy())
        import numpy as np
        import distsketch, distsketch.cli
        from distsketch import RandomFourierFeatures, StreamingKernelPCA
        from distsketch.io import write_array
        X = np.random.default_rng(0).normal(size=(300, 4))
        RandomFourierFeatures(n_components=8).fit(X).transform(X)
        path = str(write_array(X, {str(tmp_path / "x.zarr")!r}))
        StreamingKernelPCA(n_components=2, sketch_size=8).fit(path)
        code = distsketch.cli.main(["fit", path, {str(tmp_path / "m.zarr")!r},
                                    "--cluster", "sync", "-q"])
        print(json.dumps({{"code": code, "attempts": attempts,
                          "loaded": "cupy" in sys.modules}}))
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          cwd=tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got["code"] == 0 and not got["loaded"]
    # stack[-1] is the finder, stack[-2] the module whose import statement asked for cupy
    importers = [stack[-2] for stack in got["attempts"]]
    assert [f for f in importers if "/distsketch/" in f] == []
