"""Nothing distsketch did not write is ever deleted or replaced (API and CLI).

Every refusal asserts the error class, that the message names the path, that
every pre-existing file is byte-for-byte intact (hashes before and after) and
that no output or temporary sibling was left.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

import numpy as np
import pytest

import distsketch.cli as cli
from distsketch import RandomFourierFeatures
from distsketch.errors import DistsketchError, InputError, StoreError
from distsketch.io import ingest, open_array, write_array
from distsketch.workflow import run_workflow

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

X = np.random.default_rng(3).normal(size=(60, 4)).astype(np.float32)


def snapshot(root: Path) -> dict[str, str]:
    """sha256 of every file under ``root`` (and the set of folders), by relative path."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for d in dirnames:
            out[os.path.relpath(os.path.join(dirpath, d), root) + "/"] = "dir"
        for f in filenames:
            p = os.path.join(dirpath, f)
            if os.path.islink(p):
                out[os.path.relpath(p, root)] = "link:" + os.readlink(p)
            else:
                out[os.path.relpath(p, root)] = hashlib.sha256(Path(p).read_bytes()).hexdigest()
    return out


@pytest.fixture(scope="module")
def template(tmp_path_factory):
    t = tmp_path_factory.mktemp("template")
    np.save(t / "data.npy", X)
    ingest(t / "data.npy", t / "in.zarr", chunk_rows=20)
    RandomFourierFeatures(n_components=8, random_state=0).fit(X).save(t / "model.zarr")
    return t


@pytest.fixture
def world(tmp_path, template):
    """A user folder with precious files, an ingested store and a model; the source
    ``data.npy`` lies outside (``SOURCE``), so a refusal is about the output alone."""
    w = tmp_path / "w"
    shutil.copytree(template, w)
    (w / "data.npy").rename(tmp_path / "data.npy")
    user = w / "user"
    (user / "notes").mkdir(parents=True)
    (user / "notes" / "paper.tex").write_text("\\documentclass{article} precious")
    (user / "keep.txt").write_text("do not delete")
    return w


def source(world: Path) -> Path:
    return world.parent / "data.npy"


def refused(capsys, argv: list, fragment: str) -> str:
    """Run the CLI in-process; assert exit 2 and a one-line error naming ``fragment``."""
    code = cli.main([str(a) for a in argv])
    err = capsys.readouterr().err
    assert code == 2, err
    assert "distsketch: error:" in err and fragment in err, err
    assert "unexpected error" not in err and "Traceback" not in err
    return err


def no_leftovers(folder: Path) -> None:
    left = [p.name for p in folder.iterdir() if ".tmp-" in p.name or ".old-" in p.name]
    assert left == []


# ------------------------------------------------------------ the working directory


@pytest.mark.parametrize("target", [".", "..", "./", "../"])
def test_ingest_into_working_directory_or_parent_is_refused_api(world, monkeypatch, target):
    user = world / "user"
    monkeypatch.chdir(user)
    before, above = snapshot(user), snapshot(world)
    with pytest.raises(StoreError, match="working directory") as info:
        ingest(source(world), target, overwrite=True)
    assert str(Path(os.path.abspath(target))) in str(info.value)
    assert snapshot(user) == before and snapshot(world) == above
    no_leftovers(user)
    no_leftovers(world)


@pytest.mark.parametrize("target", [".", ".."])
def test_ingest_into_working_directory_is_refused_cli(world, monkeypatch, capsys, target):
    user = world / "user"
    monkeypatch.chdir(user)
    above = snapshot(world)
    refused(capsys, ["ingest", source(world), target, "--overwrite"], "working directory")
    assert snapshot(world) == above
    no_leftovers(user)


def test_home_directory_is_refused(world, monkeypatch, capsys):
    home = world / "user"
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(world)
    before = snapshot(home)
    with pytest.raises(StoreError, match="home directory"):
        write_array(X, "~", overwrite=True)
    refused(capsys, ["ingest", source(world), "~", "--overwrite"], "home directory")
    assert snapshot(home) == before


# ------------------------------------------------------------ folders and files of the user


@pytest.mark.parametrize("how", ["api-ingest", "api-write_array", "api-save", "cli-ingest",
                                 "cli-fit", "cli-transform"])
def test_folder_without_manifest_is_refused(world, capsys, how):
    user = world / "user"
    before = snapshot(world)
    if how == "api-ingest":
        with pytest.raises(StoreError, match="no distsketch manifest") as info:
            ingest(source(world), user, overwrite=True)
    elif how == "api-write_array":
        with pytest.raises(StoreError, match="no distsketch manifest") as info:
            write_array(X, user, overwrite=True)
    elif how == "api-save":
        with pytest.raises(StoreError, match="no distsketch manifest") as info:
            RandomFourierFeatures(n_components=4, random_state=0).fit(X).save(user, overwrite=True)
    else:
        cmd = {"cli-ingest": ["ingest", source(world), user],
               "cli-fit": ["fit", world / "in.zarr", user, "--method", "RandomFourierFeatures",
                           "--cluster", "sync"],
               "cli-transform": ["transform", world / "model.zarr", world / "in.zarr", user,
                                 "--cluster", "sync"]}[how]
        refused(capsys, [*cmd, "--overwrite"], str(user))
        info = None
    if info is not None:
        assert str(user) in str(info.value)
    assert snapshot(world) == before
    no_leftovers(world)


def test_without_overwrite_a_foreign_folder_is_not_offered_for_overwrite(world):
    with pytest.raises(StoreError, match="already exists") as info:
        write_array(X, world / "user")
    assert "not written by distsketch" in str(info.value)


@pytest.mark.parametrize("how", ["api", "cli"])
def test_regular_file_is_refused(world, capsys, how):
    f = world / "user" / "keep.txt"
    before = snapshot(world)
    if how == "api":
        with pytest.raises(StoreError, match="existing file") as info:
            ingest(source(world), f, overwrite=True)
        assert str(f) in str(info.value)
        with pytest.raises(StoreError, match="existing file"):
            RandomFourierFeatures(n_components=4, random_state=0).fit(X).save(f, overwrite=True)
    else:
        refused(capsys, ["ingest", source(world), f, "--overwrite"], str(f))
    assert snapshot(world) == before


def test_symlink_output_is_refused_and_its_target_kept(world):
    link = world / "link.zarr"
    link.symlink_to(world / "in.zarr")
    before = snapshot(world)
    with pytest.raises(StoreError, match="symbolic link") as info:
        write_array(X, link, overwrite=True)
    assert str(link) in str(info.value)
    assert snapshot(world) == before


# ------------------------------------------------------------ the input itself


def spellings(world: Path) -> dict[str, str]:
    (world / "alias.zarr").symlink_to(world / "in.zarr")
    return {"absolute": str(world / "in.zarr"), "relative": "in.zarr", "dot": "./in.zarr",
            "slash": str(world / "in.zarr") + "/", "dotdot": "user/../in.zarr",
            "symlink": str(world / "alias.zarr")}


@pytest.mark.parametrize("spelling", ["absolute", "relative", "dot", "slash", "dotdot", "symlink"])
@pytest.mark.parametrize("overwrite", [True, False])
def test_transform_onto_its_input_is_refused(world, monkeypatch, capsys, spelling, overwrite):
    monkeypatch.chdir(world)
    out = spellings(world)[spelling]
    before = snapshot(world)
    err = refused(capsys, ["transform", "model.zarr", world / "in.zarr", out, "--cluster", "sync",
                           *(["--overwrite"] if overwrite else [])], "input")
    assert "pass --overwrite" not in err and "overwrite=True" not in err
    assert snapshot(world) == before
    no_leftovers(world)


def test_transform_into_the_input_group_is_refused(world, capsys):
    before = snapshot(world)
    out = world / "in.zarr" / "X"
    refused(capsys, ["transform", world / "model.zarr", world / "in.zarr", out, "--cluster", "sync",
                     "--overwrite"], "inside the input")
    refused(capsys, ["transform", world / "model.zarr", f"{world / 'in.zarr'}::X",
                     world / "in.zarr" / "Z", "--cluster", "sync"], "inside the input")
    assert snapshot(world) == before


def test_fit_onto_its_input_or_the_folder_holding_it_is_refused(world, capsys):
    before = snapshot(world)
    refused(capsys, ["fit", world / "in.zarr", world / "in.zarr", "--overwrite",
                     "--method", "RandomFourierFeatures", "--cluster", "sync"], "is the input")
    refused(capsys, ["fit", world / "in.zarr", world, "--overwrite",
                     "--method", "RandomFourierFeatures", "--cluster", "sync"], "contains the input")
    assert snapshot(world) == before


def test_write_array_of_a_lazy_input_onto_it_is_refused(world):
    before = snapshot(world)
    Z = open_array(str(world / "in.zarr")) * 2
    with pytest.raises(InputError, match="is the input") as info:
        write_array(Z, world / "in.zarr", overwrite=True)
    assert str(world / "in.zarr") in str(info.value)
    with pytest.raises(InputError, match="inside the input"):
        write_array(Z, world / "in.zarr" / "double")
    assert snapshot(world) == before
    np.testing.assert_array_equal(open_array(str(world / "in.zarr")).compute(), X)


def test_ingest_onto_its_source_is_refused(world):
    before = snapshot(world)
    with pytest.raises(DistsketchError, match=r"data\.npy"):
        ingest(source(world), source(world), overwrite=True)
    assert snapshot(world) == before


# ------------------------------------------------------------ what distsketch wrote is replaceable


def test_outputs_distsketch_wrote_are_replaced(world, capsys):
    out = world / "feat.zarr"
    write_array(X, out, chunk_rows=30)
    write_array(2 * X, out, chunk_rows=30, overwrite=True)
    np.testing.assert_array_equal(open_array(str(out)).compute(), 2 * X)
    ingest(source(world), world / "in.zarr", chunk_rows=7, overwrite=True)
    assert open_array(str(world / "in.zarr")).chunks[0][0] % 7 == 0
    assert cli.main(["transform", str(world / "model.zarr"), str(world / "in.zarr"), str(out),
                     "--cluster", "sync", "--overwrite"]) == 0
    ref = RandomFourierFeatures(n_components=8, random_state=0).fit(X).transform(X)
    np.testing.assert_allclose(open_array(str(out)).compute(), ref, rtol=1e-5, atol=1e-6)
    no_leftovers(world)


# ------------------------------------------------------------ workflow runs and quickstart


def _spec(world: Path, out: Path) -> dict:
    return {"input": str(world / "in.zarr"), "segment_rows": 30, "cluster": "sync",
            "method": {"name": "RandomFourierFeatures", "params": {"n_components": 4}},
            "outputs": {"dir": str(out)}, "report": {"kernel_error": False}}


@pytest.mark.parametrize("sub", ["result", "state"])
def test_first_run_into_a_folder_with_foreign_files_refuses(world, sub):
    out = world / "runs"
    (out / sub).mkdir(parents=True)
    (out / sub / "paper.tex").write_text("precious")
    before = snapshot(world)
    with pytest.raises(StoreError, match="did not write") as info:
        run_workflow(_spec(world, out), log=lambda m: None)
    assert str(out / sub) in str(info.value)
    assert snapshot(world) == before  # not even a .lock was created
    no_leftovers(out)


def test_run_whose_outputs_dir_is_or_contains_the_input_refuses(world):
    before = snapshot(world)
    for out in (world / "in.zarr", world):
        with pytest.raises(InputError, match="input"):
            run_workflow(_spec(world, out), log=lambda m: None)
    assert snapshot(world) == before


def test_run_into_its_own_outputs_dir_works_twice(world):
    out = world / "runs"
    res = run_workflow(_spec(world, out), log=lambda m: None)
    assert res.rows_after == 60
    assert run_workflow(_spec(world, out), full=True, log=lambda m: None).status == "full"


@pytest.mark.parametrize("what", ["data.zarr", "model.zarr", "embeddings.zarr", "report.json"])
def test_quickstart_never_replaces_what_it_did_not_generate(world, capsys, what):
    out = world / "qs"
    out.mkdir()
    if what == "data.zarr":
        (out / what).mkdir()
        (out / what / "mine.csv").write_text("1,2,3")
    elif what == "model.zarr":  # a model of the user's, written by distsketch fit
        shutil.copytree(world / "model.zarr", out / what)
    elif what == "embeddings.zarr":  # features of the user's, written by distsketch
        write_array(X, out / what)
    else:
        (out / what).write_text('{"my": "own report"}')
    before = snapshot(world)
    refused(capsys, ["quickstart", "--out", out, "--rows", "200", "--features", "50",
                     "--cluster", "sync", "--no-progress"], str(out / what))
    assert snapshot(world) == before


QS = ["--rows", "200", "--features", "50", "--n-random-features", "16", "--sketch-size", "8",
      "--n-components", "2", "--n-sample", "50", "--cluster", "sync", "--no-progress"]


def test_quickstart_never_replaces_a_fitted_kernel_pca_of_the_users(world, capsys):
    """A StreamingKernelPCA model the user fitted into --out/model.zarr (the class quickstart
    fits) is not quickstart's: only the mark quickstart puts in its manifest is."""
    from distsketch import StreamingKernelPCA

    out = world / "qs"
    assert cli.main(["quickstart", "--out", str(out), *QS]) == 0
    shutil.rmtree(out / "model.zarr")
    StreamingKernelPCA(n_components=2, n_random_features=16, sketch_size=8,
                       random_state=1).fit(X).save(out / "model.zarr")
    capsys.readouterr()
    before = snapshot(world)
    err = refused(capsys, ["quickstart", "--out", out, *QS], str(out / "model.zarr"))
    assert "--overwrite" in err
    assert snapshot(world) == before
    # the user asks for it: replaced, and marked as quickstart's from then on
    assert cli.main(["quickstart", "--out", str(out), *QS, "--overwrite"]) == 0
    assert cli.main(["quickstart", "--out", str(out), *QS]) == 0


def test_quickstart_out_with_dotdot_then_without(world, capsys):
    """`--out Q/sub/..` writes into Q; a later `--out Q` recognises those outputs as its own."""
    q = world / "q"
    assert cli.main(["quickstart", "--out", str(q / "sub" / ".."), *QS]) == 0
    assert (q / "model.zarr").is_dir() and not (q / "sub").exists()
    capsys.readouterr()
    assert cli.main(["quickstart", "--out", str(q), *QS]) == 0, capsys.readouterr().err


@pytest.mark.parametrize("bad", [["--chunk-rows", "0"], ["--rows", "-5"], ["--n-components", "99"],
                                 ["--features", "10"]])
def test_quickstart_checks_parameters_before_writing(world, capsys, bad):
    out = world / "qs-new"
    code = cli.main(["quickstart", "--out", str(out), "--rows", "200", "--features", "50",
                     "--cluster", "sync", "--no-progress", *bad])
    err = capsys.readouterr().err
    assert code == 2 and "distsketch" in err and bad[0] in err, err
    assert not out.exists()
