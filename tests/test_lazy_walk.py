"""The lazy core's two forms of the catch-up, held to each other directly.

A binary state in the regime of large models (the L2 penalty alone, every
``eta lam`` below the series bound, every ``eta`` clipped) brings its blocks
to a time ``T`` eight at a time (``_binary_gaps.h``); every other state, a
held one among them, walks each block (``walk`` in ``_lazy_steps.pxd``).
``doc/psa.md`` states their agreement: the weights to about ``1e-9`` of
their scale, the step sizes to float32 rounding. Here both forms start from
the same records -- weights, snapshots, step sizes and times drawn at random,
so that the gaps cross no event, a mid-window snapshot, a window's end and
whole idle windows -- and must end there.
"""
import numpy as np
import pytest
from numpy.testing import assert_allclose

from sklearn_secondorder._core._lazy_steps import LazyStepState, PSAOptions, catch_up_state

FIELDS = ("v", "snap", "eta", "dsnap")


def _states(rng, n, t, eta0):
    """A fixed binary state and a held one of ``n`` blocks of one weight,
    current at times drawn in ``[0, t]``, with the same random records."""
    fixed = LazyStepState.zeros(n, 1, eta0)
    held = LazyStepState.zeros(n, 1, eta0, exists=np.ones((n, 1), dtype=bool))
    v = rng.normal(size=n) * (rng.random(n) > 0.1)          # some zero weights
    records = {"v": v, "snap": v + 0.05 * rng.normal(size=n) * (v != 0),
               "eta": eta0 * rng.uniform(0.3, 1.0, size=n),
               "dsnap": 0.05 * rng.normal(size=n) * (v != 0)}
    last = rng.integers(0, t + 1, size=n)
    for name in FIELDS:
        fixed.records[name][:, 0] = records[name]
        held._held_view(name)[...] = fixed.records[name][:, 0]   # (float32 where stored so)
    fixed.records["last"] = last
    held._held_last()[...] = last
    fixed.t = held.t = t
    return fixed, held


def _fields(state):
    if state.widths is None:
        return {name: state.records[name][:, 0].astype(np.float64) for name in FIELDS}
    return {name: np.asarray(state._held_view(name).values(), dtype=np.float64)
            for name in FIELDS}


@pytest.mark.parametrize("seed, windows", [(0, 1), (1, 3), (2, 40), (3, 400)])
def test_binary_gaps_match_the_walk(seed, windows):
    rng = np.random.default_rng(seed)
    n, b, lam, eta0 = 3000, 7, 5e-5, 0.5
    options = PSAOptions(lam=lam, period=b, psa_alpha=0.9999, psa_beta=0.99, kappa=0.9)
    # the regime of binary_gaps: every eta lam below the series bound, and
    # every eta clipped ((1 - eta lam)^b >= kappa)
    assert eta0 * lam < 1e-4 and (1 - eta0 * lam) ** b >= options.kappa
    t = 30 * b + 3
    fixed, held = _states(rng, n, t, eta0)
    T = t + windows * 2 * b + int(rng.integers(0, 2 * b))
    catch_up_state(fixed, options, T)
    catch_up_state(held, options, T)
    got, ref = _fields(fixed), _fields(held)
    assert np.all(fixed.records["last"] == T) and fixed.t == held.t == T
    scale = np.abs(ref["v"]).max()
    assert_allclose(got["v"], ref["v"], rtol=0, atol=1e-9 * scale)
    assert_allclose(got["snap"], ref["snap"], rtol=0, atol=1e-9 * scale)
    assert_allclose(got["dsnap"], ref["dsnap"], rtol=0, atol=1e-9 * scale)
    # (float32 step sizes: one or two roundings apart)
    assert_allclose(got["eta"], ref["eta"], rtol=2.5e-7)
    # the gaps did move the state: the step sizes adapted, the weights decayed
    moved = ref["v"] != 0
    assert np.all(np.abs(ref["v"][moved]) < np.abs(_states(np.random.default_rng(seed), n, t,
                                                           eta0)[0].records["v"][moved, 0]))
    assert np.any(ref["eta"] < _fields(_states(np.random.default_rng(seed), n, t,
                                               eta0)[0])["eta"])
