"""The shared code of CRFsuite's online trainers as taggers.

The kernels are ``_core/_crf_online.pyx`` (Viterbi on ``CRFContext``, sparse
updates along ``F(x, y) - F(x, Viterbi path)``, the running average in
``ScaledWeights``); this module holds the estimators' shared base, the
estimators are ``_perceptron.py`` (``ap``), ``_passive_aggressive.py``
(``pa``) and ``_arow.py`` (``arow``).
"""
import importlib
from dataclasses import dataclass, field
from numbers import Integral, Real

import numpy as np
from sklearn.utils import check_random_state

from .._compat import Interval, check_is_fitted
from .._core._crf_online import OnlineMethod, online_epochs
from .._mixing import sum_increments
from ._base import TaggerState, _BaseSequenceTagger, mix_tagger_states
from ._feature_set import observed_weights

AP, PA, AROW = OnlineMethod.AP, OnlineMethod.PA, OnlineMethod.AROW


@dataclass
class OnlineTaggerState(TaggerState):
    """``TaggerState`` plus AROW's diagonal covariance.

    Attributes
    ----------
    cov : ndarray like ``crf.coef``, or None
        AROW: the variance of every weight (None for the other trainers).
    losses : list of float
        The training loss of every pass.
    exists : ndarray of bool like ``crf.coef``, or None
        The weights that exist (CRFsuite's feature set of the data seen so
        far, ``observed_weights``); the others stay at zero.
    """

    cov: object = None
    losses: list = field(default_factory=list)
    exists: object = None


def mix_online_tagger_states(states, weights, start=None, *, variance=1.0):
    """Mix online trainers' states (``OnlineTaggerState``) trained on shards.

    As ``mix_tagger_states`` (averaged weights, summed running sums and
    counters), and: the weights that exist are those of the sequences any
    model saw (CRFsuite's feature set of the data seen so far); the last
    pass's loss is summed over the models; AROW's precisions ``1 / Sigma``,
    which sum ``delta^2 / gamma`` over the updates, are summed as increments.

    Parameters
    ----------
    states : sequence of OnlineTaggerState
        One per model, each continued from ``start``.
    weights : sequence of float
        The models' shares of the sequences.
    start : OnlineTaggerState or None, default=None
        The state the models started from (None: a fresh start, AROW's
        variances all ``variance``).
    variance : float, default=1.0
        AROW's initial variance of every weight.

    Returns
    -------
    mixed : OnlineTaggerState
        A new state; the inputs are not modified.
    """
    out = mix_tagger_states(states, weights, start)
    for s in states[1:]:
        out.exists = out.exists | s.exists
    out.losses[-1] = float(sum(s.losses[-1] for s in states))
    if out.cov is not None:
        prec0 = 1.0 / (start.cov if start is not None and start.cov is not None
                       else np.full_like(out.cov, float(variance)))
        out.cov = 1.0 / sum_increments([1.0 / s.cov for s in states], prec0)
    return out


def _insert_rows(a, n_old, n_new, n_states, fill):
    """``a`` with ``n_new`` attribute rows of ``fill`` after the ``n_old`` ones."""
    cut = n_old * n_states
    return np.concatenate([a[:cut], np.full(n_new * n_states, fill, dtype=a.dtype), a[cut:]])


class _OnlineSequenceTagger(_BaseSequenceTagger):
    """The online trainers' shared estimator code: no step size, no L2.

    Subclasses set ``_method`` and implement ``_options()``.
    """

    _parameter_constraints: dict = {
        "max_iter": [Interval(Integral, 1, None, closed="left")],
        "epsilon": [Interval(Real, 0, None, closed="left")],
        "all_possible_states": ["boolean"],
        "all_possible_transitions": ["boolean"],
        "fit_intercept": ["boolean"],
        "shuffle": ["boolean"],
        "random_state": ["random_state"],
        "verbose": ["verbose"],
    }

    # No step size: the base's check of a continued partial_fit's step
    # (``check_eta0``) reads ``eta0``, and None leaves it nothing to check.
    eta0 = None
    _method = AP
    _data_parallel = True

    def _new_state(self, n_attributes, rng):
        super()._new_state(n_attributes, rng)
        st = self._state
        cov = None
        if self._method == AROW:
            cov = np.full(st.crf.coef.size, float(self.variance))
        self._state = OnlineTaggerState(crf=st.crf, rng=st.rng, cov=cov)
        if self._averaged:
            # CRFsuite's average counts the initial (zero) weights too
            st.crf.n_iterates = 1.0

    def _grow(self, n_attributes):
        st = self._state
        n_old, H = st.crf.n_attributes, st.crf.n_states
        super()._grow(n_attributes)
        if n_attributes > n_old:
            if st.cov is not None:
                st.cov = _insert_rows(st.cov, n_old, n_attributes - n_old, H,
                                      float(self.variance))
            st.exists = _insert_rows(st.exists, n_old, n_attributes - n_old, H, False)

    def _fit_batch(self, batch, n_epochs, first):
        label_idx = np.searchsorted(self.classes_, batch.labels).astype(np.int32)
        if first:
            self._new_state(batch.n_features, check_random_state(self.random_state))
        else:
            self._grow(batch.n_features)
        st = self._state
        crf = st.crf
        exists = observed_weights(batch, label_idx, crf.n_attributes, crf.n_states,
                                  all_possible_states=self.all_possible_states,
                                  all_possible_transitions=self.all_possible_transitions,
                                  fit_intercept=self.fit_intercept)
        st.exists = exists if st.exists is None else st.exists | exists
        ds = batch.sequence_data(crf.n_attributes, label_idx)
        self.n_iter_ = self._passes(ds, n_epochs)
        self.t_ = self._state.crf.t
        self._model = self._final_flat()
        return self

    def _run_passes(self, ds, n_epochs):
        st = self._state
        if st.cov is not None:
            st.cov = np.require(st.cov, requirements=["C", "W"])
        n_before = len(st.pass_seconds)
        result = online_epochs(ds, st.crf, self._options(), n_epochs=n_epochs,
                               shuffle=self.shuffle, fit_intercept=self.fit_intercept,
                               cov=st.cov,
                               exists=np.require(st.exists, requirements=["C"]).view(np.uint8))
        st.pass_seconds.extend(result.seconds)
        st.losses.extend(result.losses)
        if result.diverged:
            raise ValueError(
                f"{type(self).__name__}: the weights or the token scores overflowed "
                f"(non-finite values) during pass {n_before + result.epochs + 1}; scale the "
                "features (e.g. StandardScaler).")
        if self.verbose:
            for p, loss in enumerate(result.losses, start=n_before + 1):
                print(f"-- pass {p}: loss {loss:.6g}")
        return result.epochs

    def _final_flat(self):
        return self._state.crf.model()

    def _threaded_stop(self, n_sequences):
        # the kernel's rule on the whole pass: its loss summed over the
        # shards (mix_online_tagger_states) below epsilon per sequence
        return self._state.losses[-1] / n_sequences < self.epsilon

    def _print_threaded_pass(self):
        print(f"-- pass {len(self._state.losses)}: loss {self._state.losses[-1]:.6g} "
              "(threads, mixed)")

    def _mix_states(self, states, weights, start):
        return mix_online_tagger_states(states, weights, start,
                                        variance=getattr(self, "variance", 1.0))

    @property
    def loss_(self):
        """The training loss of every pass so far, summed over the sequences."""
        check_is_fitted(self)
        return list(self._state.losses)

    def _check_weight_scale(self, mean_length):
        """No penalty, so no notion of implausibly large weights."""


# Pickles (``skso`` model files among them) written before the estimators got
# their own modules name them here; resolve those names lazily (an import at
# the top would be circular).
_MOVED = {"AveragedPerceptronSequenceTagger": "._perceptron",
          "PassiveAggressiveSequenceTagger": "._passive_aggressive",
          "AROWSequenceTagger": "._arow"}


def __getattr__(name):
    if name in _MOVED:
        return getattr(importlib.import_module(_MOVED[name], __package__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
