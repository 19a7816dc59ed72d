"""A standardisation folded into the random Fourier operator: the same map of raw rows."""

import numpy as np
import pytest

from distsketch.ops.rff import FOLD_MAX_OFFSET, rff_fold_scaling, rff_map, rff_operator

U64 = np.finfo(np.float64).eps / 2


def _scaled_rows(n=300, d=7, offset=3.0, seed=0):
    rng = np.random.default_rng(seed)
    scale = rng.uniform(0.1, 20.0, d)
    mean = offset * scale * rng.choice([-1.0, 1.0], d)
    return mean + scale * rng.normal(size=(n, d)), mean, scale


def test_folded_operator_maps_raw_rows_as_the_operator_maps_standardised_rows():
    X, mean, scale = _scaled_rows()
    W, b = rff_operator(3, "rbf", 0.4, X.shape[1], 64)
    Wf, bf = rff_fold_scaling(W, b, mean, scale)
    np.testing.assert_allclose(Wf, W / scale[:, None], rtol=1e-15)
    folded = rff_map(X, Wf, bf)
    plain = rff_map((X - mean) / scale, W, b)
    # both phases are float64 dot products of d + 2 terms: each is off the exact phase by
    # at most γ_{d+2} times the sum of its terms' magnitudes, and cos is 1-Lipschitz
    d = X.shape[1]
    gam = (d + 2) * U64 / (1 - (d + 2) * U64)
    terms = np.abs(X) @ np.abs(Wf) + np.abs(b) + np.abs(mean) @ np.abs(Wf)
    terms_plain = np.abs((X - mean) / scale) @ np.abs(W) + np.abs(b)
    bound = np.sqrt(2.0 / W.shape[1]) * gam * (2 * terms + terms_plain)
    assert np.all(np.abs(folded - plain) <= bound)


def test_paired_form_and_large_offsets_are_not_folded():
    X, mean, scale = _scaled_rows()
    W, b = rff_operator(3, "rbf", 0.4, X.shape[1], 64, form="paired")
    # the paired form has no phase to take the shift
    assert rff_fold_scaling(W, b, mean, scale) is None
    W, b = rff_operator(3, "rbf", 0.4, X.shape[1], 64)
    far = mean.copy()
    far[2] = 1.01 * FOLD_MAX_OFFSET * scale[2]
    assert rff_fold_scaling(W, b, far, scale) is None
    at = mean.copy()
    at[2] = FOLD_MAX_OFFSET * scale[2]
    assert rff_fold_scaling(W, b, at, scale) is not None


@pytest.mark.parametrize("offset", [1.0, FOLD_MAX_OFFSET])
def test_float32_folded_phases_stay_within_the_stated_rounding(offset):
    # FOLD_MAX_OFFSET's comment: at the limit the float32 phase moves by at most 4e-4 rad
    # (d = 1000, γ = 1/d); checked here on the features of the float64 map
    X, mean, scale = _scaled_rows(n=400, d=1000, offset=offset, seed=1)
    W, b = rff_operator(5, "rbf", 1.0 / 1000, 1000, 256)
    Wf, bf = rff_fold_scaling(W, b, mean, scale)
    z32 = rff_map(X.astype(np.float32), Wf, bf)
    z64 = rff_map((X - mean) / scale, W, b)
    assert z32.dtype == np.float32
    assert np.max(np.abs(z32 - z64)) <= 4e-4 * np.sqrt(2.0 / 256)
