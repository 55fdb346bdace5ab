"""How each method's state combines: the mixing rules of ``ParameterMixing``.

One ``MixingRule`` per estimator class (``MIXING_RULES``): the weighted
means, summed increments and log-space averages the package docstring
tabulates, and the restart of PSA's adaptation window.
"""
import copy
from dataclasses import dataclass

import numpy as np

from ..linear import PlainSGDClassifier, PSAClassifier, SBMLogisticRegression, SGDQNLinearSVC
from ..sequence import (
    AROWSequenceTagger,
    ASFSequenceTagger,
    AveragedPerceptronSequenceTagger,
    PassiveAggressiveSequenceTagger,
    PSASequenceTagger,
    SGDSequenceTagger,
)


# ---- the mixing rules --------------------------------------------------------------
def _wavg(arrays, p):
    """``sum_w p_w a_w``."""
    out = np.zeros_like(np.asarray(arrays[0], dtype=np.float64))
    for a, pw in zip(arrays, p):
        out += pw * np.asarray(a, dtype=np.float64)
    return out


def _sum_increments(values, start):
    """``start + sum_w (v_w - start)``: a statistic that sums over the rows seen."""
    total = start
    for v in values:
        total = total + (v - start)
    return total


def _geomean(arrays, p):
    """``exp(sum_w p_w log a_w)`` (every ``a_w > 0``)."""
    out = np.zeros_like(np.asarray(arrays[0], dtype=np.float64))
    for a, pw in zip(arrays, p):
        out += pw * np.log(a)
    return np.exp(out)


def _mix_sgd_state(states, p, start, est):
    """``LinearSGDState``: weights averaged; averaging sums, counts and ``t`` summed."""
    out = copy.deepcopy(states[0])
    out.coef = _wavg([s.coef for s in states], p)
    out.intercept = _wavg([s.intercept for s in states], p)
    if out.avg_coef is not None:
        zero = start is None
        out.avg_coef = _sum_increments([s.avg_coef for s in states],
                                       0.0 if zero else start.avg_coef)
        out.avg_intercept = _sum_increments([s.avg_intercept for s in states],
                                            0.0 if zero else start.avg_intercept)
        out.n_iterates = float(_sum_increments([s.n_iterates for s in states],
                                               0.0 if zero else start.n_iterates))
    out.t = int(_sum_increments([s.t for s in states], 0 if start is None else start.t))
    return out


def _mix_psa_kernel(kernels, p, start, period):
    """``LazyStepState``: weights averaged, step sizes geometric mean, ``t`` summed,
    a window started at the mixed weights (``LazyStepState.set_weights``). If the
    next event ends a window, its ratio is then the rule's ``x/0`` case: one
    factor in ``[psa_beta, psa_alpha]`` (at most a 1% change with the defaults)."""
    out = copy.deepcopy(kernels[0])
    out.t = int(_sum_increments([k.t for k in kernels], 0 if start is None else start.t))
    out.set_weights(_wavg([k.weights for k in kernels], p),
                    _geomean([k.step_sizes for k in kernels], p))
    return out


def _mix_psa_problem(states, p, start, est):
    out = copy.copy(states[0])
    out.kernel = _mix_psa_kernel([s.kernel for s in states], p,
                                 None if start is None else start.kernel, out.period)
    return out


def _mix_sgdqn_state(states, p, start, est):
    """``SGDQNState``: weights averaged, ``1/B`` and ``t`` summed, skip cycle restarted."""
    out = copy.deepcopy(states[0])
    out.coef = _wavg([s.coef for s in states], p)
    out.intercept = _wavg([s.intercept for s in states], p)
    # on the first pass every worker started from 1/B = alpha t0 (SGDQNState.start)
    invb0 = np.full_like(out.invB, est.alpha * out.t0) if start is None else start.invB
    out.invB = _sum_increments([s.invB for s in states], invb0)
    out.B = 1.0 / out.invB
    out.v = np.concatenate([out.coef, out.intercept])
    out.count = out.skip
    out.update_b = False
    out.t = int(_sum_increments([s.t for s in states], 0 if start is None else start.t))
    return out


def _mix_sbm_state(states, p, start, est):
    """``FullRankState``: ``theta`` averaged; the bounds' curvature
    ``Sigma - lam I`` (``Sigma = M^-1``), ``mu`` and ``t`` summed as increments;
    the regulariser sized for the largest ``n_t`` of the workers (the next pass
    doubles it, as one machine's would, once the rows seen reach it)."""
    out = copy.deepcopy(states[0])
    out.theta = _wavg([s.theta for s in states], p)
    eye = np.eye(out.theta.size)

    def curvature(s):   # the bounds' part of Sigma, without the regulariser
        return _spd_inverse(s.M) - s.lam_total * eye

    data = _sum_increments([curvature(s) for s in states],
                           0.0 if start is None else curvature(start))
    n_ref = max(int(s.n_ref) for s in states)
    out.n_ref, out.lam, out.eta = n_ref, est.alpha * n_ref, est._eta(n_ref)
    out.lam_total = out.lam
    out.M = _spd_inverse(data + out.lam * eye)
    out.mu = _sum_increments([s.mu for s in states], 0.0 if start is None else start.mu)
    out.phi = out.M @ out.mu
    out.t = int(_sum_increments([s.t for s in states], 0 if start is None else start.t))
    return out


def _spd_inverse(A):
    """The inverse of a symmetric positive definite matrix, kept symmetric."""
    inv = np.linalg.inv(A)
    return np.ascontiguousarray(0.5 * (inv + inv.T))


def _mix_linear(state_rule):
    def mix(models, p, start):
        est = copy.deepcopy(models[0])
        for k in range(len(est._states)):
            est._states[k] = state_rule([m._states[k] for m in models], p,
                                        None if start is None else start._states[k], est)
        est.t_ = int(max(s.t for s in est._states))
        est.n_iter_ = 1
        est._export()
        return est
    return mix


def _mix_tagger(with_average, with_psa, online=False):
    def mix(models, p, start):
        est = copy.deepcopy(models[0])
        st, crfs = est._state, [m._state.crf for m in models]
        s_crf = None if start is None else start._state.crf
        if online:
            # the weights that exist: those of the sentences any worker saw
            # (CRFsuite's feature set of the data seen so far)
            for m in models[1:]:
                st.exists = st.exists | m._state.exists
            # the pass's loss, summed over the sentences of every worker
            st.losses[-1] = float(sum(m._state.losses[-1] for m in models))
            if st.cov is not None:
                # AROW: 1/Sigma_k sums delta_k^2 / gamma over the updates
                prec0 = 1.0 / (start._state.cov if start._state.cov is not None
                               else np.full_like(st.cov, float(est.variance)))
                st.cov = 1.0 / _sum_increments([1.0 / m._state.cov for m in models], prec0)
        st.crf.coef = _wavg([c.coef for c in crfs], p)
        if with_average and st.crf.avg is not None:
            st.crf.avg = _sum_increments([c.avg for c in crfs],
                                         0.0 if s_crf is None else s_crf.avg)
            st.crf.n_iterates = float(_sum_increments(
                [c.n_iterates for c in crfs], 0.0 if s_crf is None else s_crf.n_iterates))
        st.crf.t = int(_sum_increments([c.t for c in crfs], 0 if s_crf is None else s_crf.t))
        if with_psa:
            st.psa = _mix_psa_kernel(
                [m._state.psa for m in models], p,
                None if start is None or start._state.psa is None else start._state.psa,
                est.period)
            st.crf.coef = np.ascontiguousarray(st.psa.weights)
        est.t_ = st.crf.t
        est.n_iter_ = 1
        est._model = est._final_flat()
        return est
    return mix


@dataclass(frozen=True)
class MixingRule:
    """How one estimator class is started and mixed.

    Attributes
    ----------
    auto_params : tuple of str
        Parameters whose ``'auto'`` value is resolved once, before the first
        pass, on the first rows of the first partition (every worker must start
        with the same settings).
    resolve : callable
        ``resolve(fitted, n_rows) -> dict``: the concrete values of
        ``auto_params`` read from an estimator fitted on those rows.
    mix : callable
        ``mix(models, p, start) -> estimator``: the mixed model from the
        workers' models, their row shares ``p`` and the model the pass started
        from (None on the first pass).
    """

    auto_params: tuple
    resolve: object
    mix: object


def _resolve_psa(fitted, n_rows):
    return {"eta0": float(fitted._states[0].kernel.eta0),
            # the paper's b ~ 0.5 |D| / 1000 for the whole data (Section 5.1.4)
            "period": max(10, int(round(0.5 * n_rows / 1000)))}


MIXING_RULES = {
    PlainSGDClassifier: MixingRule(
        ("eta0",), lambda f, n: {"eta0": float(f._states[0].eta0)},
        _mix_linear(_mix_sgd_state)),
    PSAClassifier: MixingRule(("eta0", "period"), _resolve_psa,
                              _mix_linear(_mix_psa_problem)),
    SGDQNLinearSVC: MixingRule(
        ("t0", "skip"), lambda f, n: {"t0": float(f.t0_[0]), "skip": int(f.skip_)},
        _mix_linear(_mix_sgdqn_state)),
    SBMLogisticRegression: MixingRule((), None, _mix_linear(_mix_sbm_state)),
    SGDSequenceTagger: MixingRule(("eta0",), lambda f, n: {"eta0": float(f.eta0_)},
                                  _mix_tagger(True, False)),
    ASFSequenceTagger: MixingRule(("eta0",), lambda f, n: {"eta0": float(f.eta0_)},
                                  _mix_tagger(True, False)),
    PSASequenceTagger: MixingRule(("eta0",), lambda f, n: {"eta0": float(f.eta0_)},
                                  _mix_tagger(False, True)),
    AveragedPerceptronSequenceTagger: MixingRule((), None, _mix_tagger(True, False, True)),
    PassiveAggressiveSequenceTagger: MixingRule((), None, _mix_tagger(True, False, True)),
    AROWSequenceTagger: MixingRule((), None, _mix_tagger(True, False, True)),
}
"""The mixing rule of each estimator class (subclasses use their base's)."""


def _rule_for(estimator):
    for cls in type(estimator).__mro__:
        if cls in MIXING_RULES:
            return MIXING_RULES[cls]
    raise TypeError(
        f"ParameterMixing has no mixing rule for {type(estimator).__name__}; supported: "
        + ", ".join(c.__name__ for c in MIXING_RULES) + ".")
