"""One clear message for: a full disk, a bad --chunk-rows, ``::`` in directory
names, legitimately absent chunks, missing chunks by grid index, and NaN/Inf
about to be written."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import dask.array as da
import numpy as np
import pytest
import zarr

import distsketch.cli as cli
from distsketch import RandomFourierFeatures
from distsketch.errors import ConfigError, InputError, StoreError
from distsketch.io import ingest, open_array, write_array
from distsketch.io.arrays.access import split_array_path

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

X = np.random.default_rng(7).normal(size=(40, 4)).astype(np.float32)


def leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if ".tmp-" in p.name or ".old-" in p.name)


# ------------------------------------------------------------ a full disk

ENOSPC = OSError(errno.ENOSPC, "No space left on device")


def _fill_disk(monkeypatch, where: str) -> None:
    if where == "chunk":
        import zarr.storage._local as local

        real = local._put

        def put(path, value, *args, **kwargs):  # zarr 3.1.0 also passes start=
            if "/c/" in str(path):
                raise OSError(errno.ENOSPC, "No space left on device")
            return real(path, value, *args, **kwargs)

        monkeypatch.setattr(local, "_put", put)
    elif where == "manifest":
        import distsketch.io.commit.manifest as manifest

        def write_text(self, *a, **k):
            raise OSError(errno.ENOSPC, "No space left on device")

        monkeypatch.setattr(manifest.Path, "write_text", write_text)
    else:  # the commit rename
        real_replace = os.replace

        def replace(src, dst, *a, **k):
            if ".tmp-" in str(src):
                raise OSError(errno.ENOSPC, "No space left on device")
            return real_replace(src, dst, *a, **k)

        monkeypatch.setattr(os, "replace", replace)


@pytest.mark.parametrize("where", ["chunk", "manifest", "commit"])
@pytest.mark.parametrize("how", ["write_array", "ingest", "cli-ingest"])
def test_full_disk_is_one_clear_error_and_leaves_nothing(tmp_path, monkeypatch, capsys, where, how):
    np.save(tmp_path / "x.npy", X)
    out = tmp_path / "out.zarr"
    _fill_disk(monkeypatch, where)
    if how == "cli-ingest":
        assert cli.main(["ingest", str(tmp_path / "x.npy"), str(out), "--chunk-rows", "10"]) == 2
        msg = capsys.readouterr().err
        assert "unexpected error" not in msg
    else:
        with pytest.raises(StoreError) as info:
            if how == "write_array":
                write_array(X, out, chunk_rows=10)
            else:
                ingest(tmp_path / "x.npy", out, chunk_rows=10)
        msg = str(info.value)
    assert f"no space left on device writing {out}" in msg
    assert "free space or choose another output" in msg
    assert not out.exists() and leftovers(tmp_path) == []


def test_full_disk_when_replacing_keeps_the_old_output(tmp_path, monkeypatch):
    out = write_array(X, tmp_path / "out.zarr", chunk_rows=10)
    _fill_disk(monkeypatch, "commit")
    with pytest.raises(StoreError, match="no space left on device"):
        write_array(2 * X, out, chunk_rows=10, overwrite=True)
    monkeypatch.undo()
    np.testing.assert_array_equal(open_array(str(out)).compute(), X)
    assert leftovers(tmp_path) == []


def test_full_disk_outside_a_store_write_is_one_clear_cli_error(tmp_path, monkeypatch, capsys):
    import distsketch.io

    target = str(tmp_path / "report.json")

    def full(*a, **k):
        raise OSError(errno.ENOSPC, "No space left on device", target)

    monkeypatch.setattr(distsketch.io, "ingest", full)
    np.save(tmp_path / "x.npy", X)
    assert cli.main(["ingest", str(tmp_path / "x.npy"), str(tmp_path / "o.zarr")]) == 2
    err = capsys.readouterr().err
    assert f"distsketch: error: no space left on device writing {target}" in err
    assert "free space or choose another output" in err and "unexpected" not in err


# ------------------------------------------------------------ --chunk-rows


@pytest.mark.parametrize("value", ["0", "-5", "ten"])
@pytest.mark.parametrize("cmd", ["ingest", "transform", "fit-block-rows"])
def test_non_positive_chunk_rows_is_refused_by_the_cli(tmp_path, capsys, value, cmd):
    np.save(tmp_path / "x.npy", X)
    argv = {"ingest": ["ingest", "x.npy", "o.zarr", "--chunk-rows", value],
            "transform": ["transform", "m.zarr", "x.zarr", "o.zarr", "--chunk-rows", value],
            "fit-block-rows": ["fit", "x.zarr", "o.zarr", "--block-rows", value]}[cmd]
    with pytest.raises(SystemExit) as info:
        cli.main([str(tmp_path / a) if a.endswith((".npy", ".zarr")) else a for a in argv])
    err = capsys.readouterr().err
    assert info.value.code == 2
    option = "--block-rows" if cmd.startswith("fit") else "--chunk-rows"
    assert f"argument {option}" in err and "positive integer" in err and value in err
    assert sorted(os.listdir(tmp_path)) == ["x.npy"]


def test_non_positive_chunk_rows_is_refused_by_the_api(tmp_path):
    np.save(tmp_path / "x.npy", X)
    for bad in (0, -3):
        with pytest.raises(InputError, match=rf"chunk_rows must be a positive integer.*{bad}"):
            write_array(X, tmp_path / "o.zarr", chunk_rows=bad)
        with pytest.raises(ConfigError, match=rf"chunk_rows={bad}"):
            ingest(tmp_path / "x.npy", tmp_path / "o.zarr", chunk_rows=bad)
    assert sorted(os.listdir(tmp_path)) == ["x.npy"]


# ------------------------------------------------------------ "::" in directory names


@pytest.mark.parametrize(("text", "expected"), [
    ("/nowhere/s.zarr::X", ("/nowhere/s.zarr", "X")),
    ("/nowhere/a::b/x.zarr", ("/nowhere/a::b/x.zarr", None)),      # right side has a '/'
    ("/nowhere/a::b/x.zarr::y", ("/nowhere/a::b/x.zarr", "y")),    # the last '::' splits
    ("/nowhere/s.zarr::", ("/nowhere/s.zarr::", None)),            # no array name
    ("::X", ("::X", None)),                                        # no path
    ("s3://bucket/a.zarr::X", ("s3://bucket/a.zarr", "X")),
    ("plain.zarr", ("plain.zarr", None)),
])
def test_split_array_path_rule(text, expected):
    assert split_array_path(text) == expected


def test_double_colon_directory_names_are_paths(tmp_path, capsys):
    folder = tmp_path / "a::b"
    folder.mkdir()
    RandomFourierFeatures(n_components=8, random_state=0).fit(X).save(tmp_path / "m.zarr")
    np.save(folder / "x.npy", X)
    assert cli.main(["ingest", str(folder / "x.npy"), str(folder / "x.zarr")]) == 0
    np.testing.assert_array_equal(open_array(str(folder / "x.zarr")).compute(), X)
    np.testing.assert_array_equal(open_array(f"{folder / 'x.zarr'}::X").compute(), X)
    # a store whose own name ends in ::b exists as written, so it is a path
    write_array(X, tmp_path / "odd.zarr::b", chunk_rows=10)
    np.testing.assert_array_equal(open_array(str(tmp_path / "odd.zarr::b")).compute(), X)
    with pytest.raises(StoreError, match="does not exist") as info:
        open_array(str(tmp_path / "c::d" / "x.zarr"))
    assert str(tmp_path / "c::d" / "x.zarr") in str(info.value)
    assert cli.main(["transform", str(tmp_path / "m.zarr"), f"{folder / 'x.zarr'}::X",
                     str(folder / "f.zarr"), "--cluster", "sync"]) == 0, capsys.readouterr().err
    ref = RandomFourierFeatures(n_components=8, random_state=0).fit(X).transform(X)
    np.testing.assert_allclose(open_array(str(folder / "f.zarr")).compute(), ref, rtol=1e-5,
                               atol=1e-6)


# ------------------------------------------------------------ absent chunks


def foreign_store(path: Path, data: np.ndarray, chunks: tuple, shards: tuple | None = None) -> None:
    """A store as other tools write it: all-fill chunks are not written."""
    arr = zarr.create_array(store=str(path), shape=data.shape, dtype=data.dtype, chunks=chunks,
                            shards=shards, fill_value=0, config={"write_empty_chunks": False})
    arr[...] = data


def test_absent_chunks_are_refused_by_default_and_accepted_with_the_option(tmp_path, capsys):
    data = X.copy()
    data[10:20] = 0  # chunk (1, 0) is never written
    foreign_store(tmp_path / "f.zarr", data, (10, 4))
    assert not (tmp_path / "f.zarr" / "c" / "1" / "0").exists()
    with pytest.raises(StoreError) as info:
        open_array(str(tmp_path / "f.zarr"))
    msg = str(info.value)
    assert "missing chunk (1, 0) (rows 10..20)" in msg and "f.zarr" in msg
    assert "fill value 0" in msg and "allow_missing_chunks=True" in msg
    np.testing.assert_array_equal(
        open_array(str(tmp_path / "f.zarr"), allow_missing_chunks=True).compute(), data)
    # the CLI: refused, then accepted with --allow-missing-chunks
    RandomFourierFeatures(n_components=8, random_state=0).fit(data).save(tmp_path / "m.zarr")
    argv = ["transform", str(tmp_path / "m.zarr"), str(tmp_path / "f.zarr"),
            str(tmp_path / "o.zarr"), "--cluster", "sync"]
    assert cli.main(argv) == 2
    assert "--allow-missing-chunks" in capsys.readouterr().err
    assert cli.main([*argv, "--allow-missing-chunks"]) == 0
    ref = RandomFourierFeatures(n_components=8, random_state=0).fit(data).transform(data)
    np.testing.assert_allclose(open_array(str(tmp_path / "o.zarr")).compute(), ref,
                               rtol=1e-5, atol=1e-6)


def test_absent_chunk_of_a_distsketch_store_is_lost_even_with_the_option(tmp_path):
    out = write_array(X, tmp_path / "d.zarr", chunk_rows=10)
    (out / "X" / "c" / "2" / "0").unlink()
    for allow in (False, True):
        with pytest.raises(StoreError, match=r"missing chunk \(2, 0\) \(rows 20\.\.30\).*lost"):
            open_array(str(out), allow_missing_chunks=allow)


def test_missing_chunks_are_named_by_their_grid_index(tmp_path):
    data = X.copy()
    data[10:20, 2:4] = 0
    foreign_store(tmp_path / "cols.zarr", data, (10, 2))
    with pytest.raises(StoreError, match=r"missing chunk \(1, 1\) \(rows 10\.\.20\)"):
        open_array(str(tmp_path / "cols.zarr"))
    data = X.copy()
    data[20:40] = 0
    foreign_store(tmp_path / "sh.zarr", data, (5, 4), shards=(20, 4))
    with pytest.raises(StoreError, match=r"missing shard \(1, 0\) \(rows 20\.\.40\)"):
        open_array(str(tmp_path / "sh.zarr"))
    data = X.copy()
    data[0:10] = 0
    data[30:40] = 0
    foreign_store(tmp_path / "two.zarr", data, (10, 4))
    with pytest.raises(StoreError, match=r"missing chunks \(0, 0\) \(rows 0\.\.10\), \(3, 0\)"):
        open_array(str(tmp_path / "two.zarr"))


# ------------------------------------------------------------ NaN/Inf about to be written


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
@pytest.mark.parametrize("lazy", [False, True])
def test_non_finite_block_is_refused_before_the_commit(tmp_path, bad, lazy):
    data = X.copy()
    data[37, 1] = bad
    src = da.from_array(data, chunks=(8, 4)) if lazy else data
    with pytest.raises(InputError) as info:
        write_array(src, tmp_path / "o.zarr", chunk_rows=10, stage="kernel PCA embedding")
    msg = str(info.value)
    assert "kernel PCA embedding" in msg and "rows 30..40" in msg and "first bad row 37" in msg
    assert sorted(os.listdir(tmp_path)) == []


def test_non_finite_values_are_written_when_allowed(tmp_path):
    data = X.copy()
    data[3, 0] = np.nan
    out = write_array(data, tmp_path / "o.zarr", chunk_rows=10, allow_nonfinite=True)
    np.testing.assert_array_equal(open_array(str(out), block_rows=10).compute(), data)


# ------------------------------------------------------------ memory, named as memory (issue 26)


def _one_error_line(err: str) -> str:
    lines = [ln for ln in err.splitlines() if ln.startswith("distsketch: error:")]
    assert len(lines) == 1 and "unexpected" not in err and "Traceback" not in err, err
    return lines[0]


@pytest.fixture
def small_budget():
    """A 64 KiB per-task budget: the honest stand-in for a small worker or a 2 GB line."""
    import dask

    with dask.config.set({"distsketch.task-memory": 64 * 2**10}):
        yield 64 * 2**10


@pytest.mark.parametrize("newline", [True, False])
@pytest.mark.parametrize("how", ["api", "cli"])
def test_a_line_longer_than_the_budget_allows_is_refused_after_reading_the_limit(
        tmp_path, capsys, small_budget, how, newline):
    from distsketch.errors import MemoryBudgetError
    from distsketch.io.readers.lines import max_line_chars

    limit = max_line_chars()
    assert limit == small_budget // 8
    src = tmp_path / "one-line.csv"
    src.write_text("1,2,3\n" + "1," * (4 * limit) + ("1\n" if newline else "1"))
    out = tmp_path / "o.zarr"
    if how == "api":
        with pytest.raises(MemoryBudgetError) as info:
            ingest(src, out)
        msg = str(info.value)
    else:
        assert cli.main(["ingest", str(src), str(out)]) == 2
        msg = _one_error_line(capsys.readouterr().err)
    assert f"one-line.csv, line 2: longer than {limit} characters" in msg
    assert "distsketch.task-memory" in msg
    assert not out.exists() and leftovers(tmp_path) == []


def test_lines_within_the_limit_are_read(tmp_path, small_budget):
    from distsketch.io.readers.lines import max_line_chars

    width = max_line_chars() // 4  # "1.0," is 4 characters: just within the limit
    src = tmp_path / "wide.csv"
    src.write_text(("1.0," * (width - 1) + "1.0\n") * 3)
    with __import__("dask").config.set({"distsketch.task-memory": 2**30}):
        ingest(src, tmp_path / "o.zarr")
    assert open_array(str(tmp_path / "o.zarr")).shape == (3, width)


def _fit_rff_kpca(src: str) -> None:
    from distsketch import StreamingKernelPCA

    StreamingKernelPCA(n_components=2, n_random_features=16, sketch_size=4, gamma=0.1,
                       random_state=0).fit(src)


@pytest.mark.parametrize("how", ["api", "cli"])
def test_a_store_chunk_larger_than_a_task_may_use_is_refused_by_the_planner(
        tmp_path, capsys, how):
    import dask

    from distsketch.errors import MemoryBudgetError

    data = np.random.default_rng(0).normal(size=(400, 1000)).astype(np.float32)
    src = write_array(data, tmp_path / "big-chunks.zarr", chunk_rows=400)  # one 1.5 MiB chunk
    # the operators fit the 1 MiB budget, and so would blocks of a few rows: only the chunk,
    # which every task decodes whole, does not
    with dask.config.set({"distsketch.task-memory": 2**20}):
        if how == "api":
            with pytest.raises(MemoryBudgetError) as info:
                _fit_rff_kpca(str(src))
            msg = str(info.value)
        else:
            assert cli.main(["fit", str(src), str(tmp_path / "m.zarr"), "--cluster", "sync",
                             "--n-components", "2", "--n-random-features", "16",
                             "--sketch-size", "4", "--gamma", "0.1"]) == 2
            msg = _one_error_line(capsys.readouterr().err)
    assert f"one chunk of the input store {src}" in msg
    assert "is 1.53 MiB (400 rows x 3.91 kiB/row)" in msg
    assert "a task may use only 1.00 MiB" in msg and "--chunk-rows 65 or less" in msg
    assert not (tmp_path / "m.zarr").exists()


def test_out_of_memory_while_decoding_a_chunk_is_memory_not_corruption(tmp_path, monkeypatch):
    from distsketch.errors import MemoryBudgetError

    src = write_array(X, tmp_path / "x.zarr", chunk_rows=10)

    def no_memory(self, key):
        raise MemoryError("Unable to allocate 3.2 GiB for an array")

    monkeypatch.setattr(zarr.Array, "__getitem__", no_memory)
    with pytest.raises(MemoryBudgetError) as info:
        _fit_rff_kpca(str(src))
    msg = str(info.value)
    assert "out of memory reading" in msg and "x.zarr" in msg and "--chunk-rows" in msg
    assert "corrupt" not in msg


def test_out_of_memory_while_loading_a_model_is_memory_not_corruption(tmp_path, monkeypatch):
    from distsketch.errors import MemoryBudgetError
    from distsketch.io import load

    RandomFourierFeatures(n_components=8, random_state=0).fit(X).save(tmp_path / "m.zarr")

    def no_memory(self, key):
        raise MemoryError("Unable to allocate 3.2 GiB for an array")

    monkeypatch.setattr(zarr.Array, "__getitem__", no_memory)
    with pytest.raises(MemoryBudgetError) as info:
        load(tmp_path / "m.zarr")
    msg = str(info.value)
    assert "out of memory reading the model array" in msg and "random_weights_" in msg
    assert "corrupt" not in msg
