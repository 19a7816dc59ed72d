"""Image data from files to predictions: ingest, fit a kernel classifier, predict, score.

scikit-learn's bundled handwritten digits (1 797 images of 8 × 8 pixels, no
download) stand in for a large image set such as MNIST: the steps and calls
are the same for 60 000 × 784 images ingested from idx.gz or CSV files.

1. The images and their labels are saved as ``.npy`` files, as an export from
   another tool would be, and ingested into Zarr stores (``X`` and ``y``).
2. The kernel width comes from the data: the median heuristic
   ``gamma = 1 / median ‖xᵢ − xⱼ‖²`` over a sample of rows (the rule of
   ``distsketch fit --gamma median``).
3. A ``SketchedKernelRidgeClassifier`` on random Fourier features is fitted in
   one pass over the training store.
4. The test images are classified blockwise, the predictions written to a
   Zarr store, and the accuracy is printed beside scikit-learn's
   ``RBFSampler + RidgeClassifier`` with the same number of features, gamma
   and alpha.

Run::

    python examples/digits_pipeline.py --workdir digits-run [--n-components 2048]
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import Any

import numpy as np


def median_gamma(X: Any, n_sample: int = 1000, seed: int = 0) -> float:
    """``1 / median ‖xᵢ − xⱼ‖²`` over a uniform sample of at most ``n_sample`` rows.

    ``X`` may be a dask array (a Zarr store opened with ``open_array``): only the
    sampled rows are read.
    """
    rng = np.random.default_rng(seed)
    rows = np.sort(rng.choice(X.shape[0], size=min(n_sample, X.shape[0]), replace=False))
    S = np.asarray(X[rows], dtype=np.float64)
    sq = np.einsum("ij,ij->i", S, S)
    D = sq[:, None] + sq[None, :] - 2.0 * (S @ S.T)
    return 1.0 / float(np.median(np.maximum(D[np.triu_indices(len(S), k=1)], 0.0)))


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workdir", type=Path, default=Path("digits-run"),
                        help="folder for the .npy exports, the Zarr stores and the predictions")
    parser.add_argument("--n-components", type=int, default=2048, help="random Fourier features")
    parser.add_argument("--alpha", type=float, default=1e-3, help="ridge regularisation")
    args = parser.parse_args(argv)

    from sklearn.datasets import load_digits
    from sklearn.kernel_approximation import RBFSampler
    from sklearn.linear_model import RidgeClassifier
    from sklearn.model_selection import train_test_split

    from distsketch import RandomFourierFeatures, SketchedKernelRidgeClassifier, load, open_array
    from distsketch.io import ingest, write_array

    work = args.workdir
    work.mkdir(parents=True, exist_ok=True)

    # 1. files as another tool would export them, ingested into Zarr
    images, labels = load_digits(return_X_y=True)
    X = (images / 16.0).astype(np.float32)          # pixels in [0, 1]
    X_train, X_test, y_train, y_test = train_test_split(X, labels, test_size=0.25,
                                                        stratify=labels, random_state=0)
    for name, a in [("train", X_train), ("train-labels", y_train), ("test", X_test),
                    ("test-labels", y_test)]:
        np.save(work / f"{name}.npy", a)
    ingest(work / "train.npy", work / "train.zarr", labels=work / "train-labels.npy",
           overwrite=True)
    ingest(work / "test.npy", work / "test.zarr", labels=work / "test-labels.npy",
           overwrite=True)

    # 2. a data-driven kernel width
    train = open_array(str(work / "train.zarr"))
    gamma = median_gamma(train)                       # reads only the sampled rows

    # 3. one pass over the training store; the model is saved and reloaded as a user would
    features = RandomFourierFeatures(gamma=gamma, n_components=args.n_components, random_state=0)
    model = SketchedKernelRidgeClassifier(features=features, alpha=args.alpha)
    model.fit(str(work / "train.zarr"), str(work / "train.zarr::y"))
    model.save(str(work / "model.zarr"), overwrite=True)
    model = load(str(work / "model.zarr"))

    # 4. predictions written blockwise to Zarr, then scored
    test = open_array(str(work / "test.zarr"))
    predictions = model.predict(test)                 # lazy dask array, one task per block
    # laid out as `distsketch predict` writes them: `predictions` (sample,), the classes
    write_array(predictions, work / "predictions.zarr", overwrite=True, name="predictions",
                dimension_names=("sample",), attrs={"classes": model.classes_.tolist()})
    predicted = np.asarray(open_array(str(work / "predictions.zarr"), targets=True))
    accuracy = float(np.mean(predicted == y_test))

    rbf = RBFSampler(gamma=gamma, n_components=args.n_components, random_state=0).fit(X_train)
    reference = RidgeClassifier(alpha=args.alpha).fit(rbf.transform(X_train), y_train)
    result = {"n_train": len(y_train), "n_test": len(y_test), "gamma": gamma,
              "n_components": args.n_components, "accuracy": accuracy,
              "score": float(model.score(X_test, y_test)),
              "sklearn_accuracy": float(reference.score(rbf.transform(X_test), y_test)),
              "predictions": os.fspath(work / "predictions.zarr")}
    print(json.dumps(result, indent=2))
    return result


if __name__ == "__main__":
    main()
