"""SGD-QN: quasi-Newton stochastic gradient descent for linear SVMs."""
import copy
from numbers import Integral, Real

import numpy as np
import scipy.sparse as sp
from sklearn.utils.extmath import row_norms

from .._calibration import used_columns
from .._compat import Interval, StrOptions
from .._core._dataset import RowDataset
from .._core._losses import LOSSES
from .._core._sgdqn_fast import (
    SGDQNOptions,
    SGDQNState,
    csr_row_stats,
    primal_objective,
    sgdqn_epochs,
)
from .._mixing import sum_increments, weighted_mean
from .._penalty import check_l2_only
from .._validation import diverged_error, store_init_params
from ._base import LinearClassifierBase

#: Candidate values of t0 tried by ``t0='auto'``: half-decades 1 .. 1e10
#: (libsgdqn's decade grid, refined: on a9a a decade step jumps over the
#: good range, 3e7 to 1e8, from 1e7).
T0_GRID = tuple(10.0 ** (k / 2) for k in range(21))
#: ``t0='auto'`` keeps the largest candidate whose trial cost is within this
#: share of the lowest (see ``SGDQNLinearSVC._select_t0``; set on a9a and w8a).
T0_COST_SLACK = 0.25
#: Rows of the ``t0='auto'`` trial sample (Bottou's ``determineEta0`` size).
T0_SAMPLE = 1000
#: ``skip='auto'`` is ``SKIP_FACTOR * n_features / mean non-zeros per row``.
SKIP_FACTOR = 16
#: Upper bounds of d^2 loss / dp^2 (0 for the hinge: its gradient is bounded).
LOSS_CURVATURE = {"squared_hinge": 2.0, "hinge": 0.0, "log_loss": 0.25}


def t0_lower_bound(X, sample_weight, *, loss, alpha, fit_intercept):
    """Smallest ``t0`` for which the first steps cannot amplify a margin error.

    A step on row ``x`` (weight ``s``) with gain ``B`` moves its prediction by
    ``-s l'(p) B (||x||^2 + 1)``; for a loss of curvature at most ``c`` the
    residual is multiplied by ``1 - s c B (||x||^2 + 1)``, whose modulus
    stays at most 1 when ``B <= 2 / (s c (||x||^2 + 1))``. With
    ``B = 1 / (alpha t0)`` at the start, this gives
    ``t0 >= c max_i s_i (||x_i||^2 + 1) / (2 alpha)`` (the ``+ 1`` is the
    intercept's constant feature, when fitted). It is the paper's reason for
    t0 (Section 2.1: the first updates must not produce an implausibly large
    norm), made explicit: ``t0='auto'`` only tries grid values above it.

    Parameters
    ----------
    X : ndarray or CSR matrix of shape (n_samples, n_features)
    sample_weight : ndarray of shape (n_samples,)
    loss : str
    alpha : float
    fit_intercept : bool

    Returns
    -------
    t0_min : float
    """
    if LOSS_CURVATURE[loss] == 0.0:
        return 0.0
    return _t0_bound(LOSS_CURVATURE[loss], _max_row_norm(X, sample_weight, fit_intercept),
                     alpha)


def _t0_bound(curvature, max_norm, alpha):
    """``c max_i s_i (||x_i||^2 + 1) / (2 alpha)`` from the rows' bound
    ``max_norm`` (:func:`t0_lower_bound`'s value, 0 without curvature)."""
    return curvature * max_norm / (2.0 * alpha) if curvature else 0.0


def _max_row_norm(X, sample_weight, fit_intercept):
    """``max_i s_i (||x_i||^2 + 1)`` (``+ 1`` with an intercept), in O(nnz)."""
    with np.errstate(over="ignore", invalid="ignore"):
        sq = row_norms(X, squared=True)
        return float(np.max(sample_weight * (sq + float(fit_intercept)), initial=0.0))


class SGDQNLinearSVC(LinearClassifierBase):
    """Linear SVM trained by SGD-QN, the corrected quasi-Newton SGD.

    Minimises the primal cost of Bordes, Bottou & Gallinari (2009), Eq. 1::

        P(w, b) = alpha/2 ||w||^2 + 1/n sum_i loss(y_i (w.x_i + b))

    with the SGD-QN algorithm (Figure 2) as corrected by the authors' 2010
    erratum ("SGDQN is less careful than expected", libsgdqn). A diagonal
    rescaling ``B`` replaces the scalar step size and *contains* the 1/t
    decay: ``B_i`` starts at ``1 / (alpha t0)`` and each example makes the
    step ``w -= l'(y w.x) y (B o x)``, touching only the non-zeros of ``x``.
    Every ``skip`` examples (Section 3, Table 2) the regularization is applied
    densely, ``w_i *= 1 - skip alpha B_i`` (Figure 2, line 13; replaced by
    ``(1 - alpha B_i)^skip``, or ``exp(-skip alpha B_i)``, when that factor
    would fall below 0.8, so it never turns negative), and on the next
    example ``B`` is re-estimated from the secant of that example's full
    gradient between the weights ``v`` remembered before the skip step and
    the current ``w`` (Eq. 6)::

        r_i = alpha + y x_i (l'(y w.x) - l'(y v.x)) / (w_i - v_i)   (w_i != v_i)
        r_i = alpha                                                  (otherwise)
        r_i <- clip(r_i, alpha, max_curvature alpha),   1 / B_i <- 1 / B_i + skip r_i

    This harmonic accumulation is the erratum's correction of Figure 2,
    line 7: without curvature information ``B_i = 1 / (alpha (t0 + t))``,
    the first-order schedule of SVMSGD2 (Figure 1), and ``B_i`` never exceeds
    ``1 / (alpha t0)``.

    The update is in :func:`sklearn_secondorder._core._sgdqn_fast.sgdqn_epochs`
    (its per-example loop, ``_epochs_nogil`` in ``_core/_sgdqn_fast.pyx``),
    which continues one ``SGDQNState`` per binary problem.

    Parameters
    ----------
    loss : {'squared_hinge', 'hinge', 'log_loss'}, default='squared_hinge'
        ``squared_hinge`` is ``max(0, 1 - z)^2`` (the paper's experiments use
        the squared hinge, Section 6). With the plain ``hinge`` the derivative
        is piecewise constant, so the secant ``l'(y w.x) - l'(y v.x)`` is 0
        unless the margin crosses 1 between ``v`` and ``w``: most re-estimates
        then give ``r_i = alpha`` and SGD-QN behaves like first-order SGD
        (SVMSGD2). ``log_loss`` enables ``predict_proba``.
    alpha : float, default=1e-4
        L2 strength (the paper's lambda).
    fit_intercept : bool, default=True
        Fit an intercept ``b``. It is treated as the weight of a constant
        feature equal to 1 that is *not* regularized: it gets its own entry
        ``B_b`` of the rescaling (start ``1 / (alpha t0)``), takes the step
        ``b -= l'(y (w.x + b)) y B_b`` and is left out of the skip-step
        shrink; its secant has no ``alpha`` term,
        ``r_b = (l'(y w.x) - l'(y v.x)) y / (b - v_b)``, clipped like the
        others.
    max_iter : int, default=5
        Passes over the data in ``fit`` (at most, with ``tol``): a small
        fixed budget, the same for every linear estimator of the package but
        ``PSAClassifier`` (1), instead of ``SGDClassifier``'s 1000 with
        ``tol=1e-3``.
    skip : 'auto' or int, default='auto'
        Examples between two dense regularization steps (and re-estimates of
        ``B``). ``'auto'``: ``16 n_features / mean non-zeros per row`` of the
        first data seen (16 on dense data, as in the paper's Table 4; zeros
        of a dense array count as in CSR, so both formats get the same skip).
    t0 : 'auto' or float, default='auto'
        ``B`` starts at ``1 / (alpha t0)``. ``'auto'`` follows the paper
        (Section 6: one SGD-QN pass over a sample per candidate ``t0``, keep
        the one with the lowest primal cost) at a fraction of its cost: the
        trials run on 1000 rows of the first data seen (Bottou's sample size
        for ``eta0``, the same rows for every one-vs-rest problem), and
        walk the half-decades ``1, 10^0.5, ..., 1e10`` from the starting
        gain at which one squared-hinge step on the heaviest row stops
        amplifying its margin error (:func:`t0_lower_bound`), down while
        the cost improves, then up until it is more than 25% above the
        lowest; the largest candidate within 25% of the lowest is kept (the
        lowest alone favours large gains on a small sample). Grid values
        below the loss's own bound (``alpha t0 < c max_i s_i (||x_i||^2 +
        1) / 2`` with ``c`` the loss curvature bound: 2 for the squared
        hinge, 1/4 for the log loss, 0 for the hinge) are not tried: on a
        sample they can look best and then blow up on the full data, whose
        heaviest rows the sample may miss. The walk makes 2 to 6 trials on
        a9a, w8a and CoNLL-2000 tokens, a small share of an epoch
        (``benchmarks/claims_sgdqn.py``).
    max_curvature : float, default=100.0
        Upper clip of the curvature estimates ``r_i``, in units of ``alpha``
        (libsgdqn's ``cmax``; the lower clip is ``alpha``, the curvature of
        the L2 term). With the default, ``1 / B_i`` grows by at most
        ``100 alpha`` per example, so when ``alpha`` is small compared with
        the loss curvature (e.g. ``alpha = 1/n_samples`` on unscaled binary
        features) ``B`` hardly decays within a few passes and the iterates
        stay at the noise level of the starting gain ``1 / (alpha t0)``; a
        larger clip (1e3 to 1e5) then lets ``B`` follow the curvature (see
        the benchmark ``benchmarks/linear_sgdqn.py``).
    shuffle : bool, default=True
        Shuffle the rows before each pass.
    random_state : int, RandomState instance or None, default=None
        Seeds the shuffling and the ``t0`` sample.
    class_weight : dict, 'balanced' or None, default=None
        Multiplies the sample weights per class.
    warm_start : bool, default=False
        Whether ``fit`` starts from the current ``coef_`` and ``intercept_``
        (when the classes and the number of features are unchanged), as
        ``SGDClassifier``: the coefficients are reused, not the schedule; the
        fit equals one given ``coef_init=coef_, intercept_init=intercept_``
        and ``t_`` counts from 0 again. ``partial_fit`` continues the whole
        state.
    n_jobs : int, default=None
        Threads that train the model (the compiled kernel releases the GIL).
        With one problem (two classes) they share every pass: the pass's
        shuffled order is cut into ``n_jobs`` contiguous shards of about equal
        non-zeros, each thread runs one kernel pass over its shard on its own
        copy of the training state, and the copies are mixed after the pass
        (parameter mixing: ``sklearn_secondorder._mixing``, the rules ``mix``
        uses). That is not the one-thread model: after 5 passes at ``n_jobs=2``
        on CoNLL-2000 tokens hashed to 2^20 columns (I-NP against the rest) the
        test accuracy was within 0.04 points of one thread's (0.03 higher on
        average over three seeds) (see "Threads on one model" in the user
        guide). A given ``n_jobs`` and ``random_state`` give the same model bit
        for bit; None and 1 are one thread, the model of earlier releases. With
        several one-vs-rest problems the threads fit the classes side by side
        instead, the model of one thread (None then follows a
        ``joblib.parallel_config`` context). -1 means all the cores, -2 all but
        one; 0 or a non-int is a ValueError. Each thread trains a copy of the
        state: the memory check before training counts them.
    verbose : int, default=0
        Above 0, print one line per pass: the pass, the rows, the update
        counter ``T``, the mean training loss at the end of the pass,
        ``||w||``, the bias and the seconds since the call started (the
        content of ``SGDClassifier``'s lines; the evaluation costs one
        product ``X w`` per pass).
        Also prints the ``skip`` and ``t0`` chosen on the first call; above 1,
        the primal cost of each ``t0`` candidate tried by ``t0='auto'``.
    tol : float or None, default=None
        Stopping criterion of ``fit`` (scikit-learn's): a pass that does not
        lower the training objective ``mean loss + alpha/2 ||w||^2`` (at the
        end of the pass) by at least ``tol`` below the best so far, or with
        ``early_stopping`` does not raise the validation accuracy by ``tol``,
        counts as no improvement; ``n_iter_no_change`` in a row stop. None
        (the default, unlike ``SGDClassifier``'s 1e-3) makes exactly
        ``max_iter`` passes: these methods are built to get near the optimum
        in a fixed, small number of passes, and a ``ConvergenceWarning`` on
        every default fit would say nothing. A ``ConvergenceWarning`` is
        raised when ``tol`` is set, ``max_iter > 1`` and the passes ran out.
        ``partial_fit`` always makes one pass.
    n_iter_no_change : int, default=5
        Passes without improvement before stopping (with ``tol`` set).
    early_stopping : bool, default=False
        Hold out ``validation_fraction`` of the rows of ``fit`` (stratified,
        as scikit-learn) and stop on their accuracy instead of the training
        objective (with ``tol`` set). The model is that of the last pass, as
        in ``SGDClassifier``.
    validation_fraction : float, default=0.1
        Share of the rows held out by ``early_stopping``.
    penalty : {'l2'}, default='l2'
        Only ``'l2'``: ``'l1'`` and ``'elasticnet'`` (scikit-learn's values) raise
        a ValueError. SGD-QN's rescaling estimates the curvature of the
        L2-regularized loss; use ``PSAClassifier`` or ``PlainSGDClassifier``
        for L1 / elastic-net.

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
    coef_ : ndarray of shape (1, n_features) or (n_classes, n_features)
    intercept_ : ndarray of shape (1,) or (n_classes,)
    n_features_in_ : int
    feature_names_in_ : ndarray of shape (n_features_in_,)
        Defined when ``X`` has feature names that are all strings.
    n_iter_ : int
        Passes made by the last call to ``fit`` or ``partial_fit``.
    t_ : int
        Examples processed so far (rows with non-zero weight).
    t0_ : ndarray of shape (n_problems,)
        The ``t0`` used by each binary problem (one per class in one-vs-rest).
    skip_ : int
        The ``skip`` used.
    B_ : ndarray of shape (n_problems, n_features + 1)
        The diagonal rescaling of each problem; the last column belongs to
        the intercept.

    See Also
    --------
    sklearn.linear_model.SGDClassifier : First-order SGD.
    sklearn.svm.LinearSVC : Batch solver of the same objective
        (``C = 1 / (alpha n_samples)``).

    Notes
    -----
    Multiclass problems are fitted one-vs-rest, one state (``B``, counters)
    per class. ``partial_fit`` continues the state: ``skip``, ``t0`` and the
    counters are fixed by the first call.

    References
    ----------
    A. Bordes, L. Bottou and P. Gallinari. "SGD-QN: Careful Quasi-Newton
    Stochastic Gradient Descent". JMLR 10:1737-1754, 2009; and their
    "Erratum: SGDQN is less careful than expected", JMLR 11, 2010
    (https://jmlr.org/papers/v11/bordes10a.html).

    Examples
    --------
    >>> from sklearn.datasets import load_breast_cancer
    >>> from sklearn.pipeline import make_pipeline
    >>> from sklearn.preprocessing import StandardScaler
    >>> from sklearn_secondorder import SGDQNLinearSVC
    >>> X, y = load_breast_cancer(return_X_y=True)
    >>> svc = make_pipeline(StandardScaler(), SGDQNLinearSVC(random_state=0)).fit(X, y)
    >>> svc[-1].skip_                   # 16 on dense rows (the paper's Table 4)
    16
    >>> svc.score(X, y) > 0.95
    True
    """

    _parameter_constraints = {
        **LinearClassifierBase._parameter_constraints,
        "loss": [StrOptions({"squared_hinge", "hinge", "log_loss"})],
        "skip": [StrOptions({"auto"}), Interval(Integral, 1, None, closed="left")],
        "t0": [StrOptions({"auto"}), Interval(Real, 0, None, closed="neither")],
        "max_curvature": [Interval(Real, 1, None, closed="left")],
        "penalty": [StrOptions({"l2", "l1", "elasticnet"})],  # (not l2: refused below)
    }
    _probabilistic_losses = frozenset({"log_loss"})

    def __init__(self, loss="squared_hinge", *, alpha=1e-4, fit_intercept=True,
                 max_iter=5, skip="auto", t0="auto", max_curvature=100.0, shuffle=True,
                 random_state=None, class_weight=None, warm_start=False, n_jobs=None,
                 verbose=0, tol=None,
                 n_iter_no_change=5, early_stopping=False, validation_fraction=0.1,
                 penalty="l2"):
        store_init_params(self, locals())

    def _more_validate_params(self, for_partial_fit=False):
        check_l2_only(self, (
            "SGD-QN's diagonal rescaling B is estimated from the curvature of the "
            "L2-regularized loss, which an L1 term does not have, and its skip-based L2"
            " update has no lazy L1 counterpart here; use PSAClassifier or "
            "PlainSGDClassifier for an L1 penalty."))

    # ---- state ----------------------------------------------------------------
    def _set_problem_weights(self, state, coef, intercept):
        super()._set_problem_weights(state, coef, intercept)
        if state.v is not None:                 # the secant anchor starts there too
            state.v[:coef.size] = coef
            state.v[coef.size:] = intercept

    def _bytes_per_weight(self, n_features, n_outputs):
        # SGDQNState: coef, B, invB and v; and coef_
        return 40

    def _init_problem(self, n_features, n_outputs, seed):
        # one binary problem per state: one-vs-rest for more than two classes
        return SGDQNState.zeros(n_features, seed)

    def _final_weights(self, state):
        return state.coef, state.intercept

    def _options(self):
        # (SGD-QN is L2 only: lam is alpha)
        return SGDQNOptions(lam=self.alpha, r_max=self.max_curvature)

    def _auto_skip(self, X, nnz=None):
        """``16 n_features / mean non-zeros per row`` (16 on dense data).

        Non-zeros are counted the same way for dense arrays and CSR matrices
        (stored zeros excluded), so both formats get the same ``skip``.
        """
        n, d = X.shape
        if nnz is None:
            nnz = X.count_nonzero() if sp.issparse(X) else np.count_nonzero(X)
        mean_nnz = max(nnz / max(n, 1), 1.0)
        return max(1, int(round(SKIP_FACTOR * d / mean_nnz)))

    def _begin_call(self, X, sample_weight):
        # What the first call's t0 / skip choice needs, computed once for all
        # the one-vs-rest problems (each O(nnz(X))): the skip, and for
        # t0='auto' the walk's bounds and the trial sample.
        self._t0_trial = None
        if all(state.started for state in self._states):
            return
        nnz = norm = None
        if sp.issparse(X) and X.has_canonical_format:
            # (the row count and the bound's norm in one Cython pass)
            nnz, norm = csr_row_stats(
                np.ascontiguousarray(X.data, dtype=np.float64),
                X.indptr.astype(np.int64), np.ascontiguousarray(sample_weight, dtype=np.float64),
                self.fit_intercept)
        skip = self._auto_skip(X, nnz) if self.skip == "auto" else int(self.skip)
        if self.t0 != "auto":
            self._t0_trial = (skip, None, None, None, None)
            return
        if norm is None:
            norm = _max_row_norm(X, sample_weight, self.fit_intercept)
        lower = _t0_bound(LOSS_CURVATURE[self.loss], norm, self.alpha)
        if not np.isfinite(lower):
            raise ValueError(
                "SGDQNLinearSVC: t0='auto' cannot bound the first steps because the "
                "squared norms of the rows overflow; scale the features (e.g. "
                "StandardScaler).")
        # the walk starts at the squared hinge's bound whatever the loss (the
        # data's natural scale of t0; the hinge has no bound of its own)
        start = max(lower, _t0_bound(LOSS_CURVATURE["squared_hinge"], norm, self.alpha))
        n = X.shape[0]
        # (a Generator draws m of n rows in O(m); RandomState.choice permutes all n)
        rows = np.sort(np.random.default_rng(self._states[0].seed).choice(
            n, size=min(n, T0_SAMPLE), replace=False))
        X_sample, _ = used_columns(X[rows])
        self._t0_trial = (skip, lower, start, rows, X_sample)

    def _select_t0(self, y, sample_weight, seed):
        """``t0='auto'``: one-pass trials on at most 1000 rows, walking a grid.

        The paper (Section 6) runs one SGD-QN pass over a 10% sample for each
        ``t0`` and keeps the one whose primal cost (Eq. 1) decreases most;
        libsgdqn tries every decade 1 .. 1e10. Both cost more than an epoch.
        Here, as in Bottou's ``determineEta0`` for first-order SGD, the
        trials run on :data:`T0_SAMPLE` (1000) rows, the same for every
        one-vs-rest problem, restricted to the columns they use; and they
        walk :data:`T0_GRID` (half-decades) instead of trying all of it: from
        the first candidate at or above the squared hinge's bound
        (:func:`t0_lower_bound`; never below the loss's own bound), down
        while the cost improves, then up until the cost exceeds the lowest
        by more than :data:`T0_COST_SLACK`. Returns the largest candidate
        tried whose cost is within that slack of the lowest: a one-pass trial
        on a sample favours large starting gains (it has few steps to make),
        and the largest nearly-as-good ``t0`` (the smallest gain) costs
        little in a long run, as Bottou's recipe halves the best trial step.
        On a9a, w8a and CoNLL-2000 tokens the walk makes 2 to 6 trials
        (``benchmarks/claims_sgdqn.py`` measures its cost, under 0.3 of an
        epoch, and the primal cost it leads to); when the costs are unimodal
        along the grid it returns what trying every candidate would.
        """
        skip, lower, start, rows, X_sample = self._t0_trial
        ds = RowDataset(X_sample, y[rows], sample_weight[rows])
        options, loss = self._options(), LOSSES[self.loss]()
        grid = [t0 for t0 in T0_GRID if t0 >= lower] or [lower]
        costs = {}

        def cost(k):
            # each trial shuffles from the problem's seed, leaving the problem untouched
            if k not in costs:
                trial = SGDQNState.zeros(X_sample.shape[1], seed)
                trial.start(grid[k], self.alpha, skip)
                diverged = sgdqn_epochs(ds, trial, options, loss=loss, n_epochs=1,
                                        shuffle=self.shuffle,
                                        fit_intercept=self.fit_intercept).diverged
                costs[k] = (np.inf if diverged
                            else primal_objective(ds, trial, options, loss=loss))
                if self.verbose > 1:
                    print(f"[SGDQNLinearSVC] t0={grid[k]:g}: primal cost {costs[k]:.6g}")
            return costs[k]

        first = next((k for k, t0 in enumerate(grid) if t0 >= start), len(grid) - 1)
        k = first
        cost(first)
        while k > 0 and cost(k - 1) < cost(k):      # down while improving
            k -= 1
        k = first
        while k + 1 < len(grid):                    # up until clearly worse
            k += 1
            if cost(k) > (1.0 + T0_COST_SLACK) * min(costs.values()):
                break
        best = min(costs.values())
        if not np.isfinite(best):
            raise ValueError(
                "SGDQNLinearSVC: t0='auto' diverged for every candidate t0 in "
                f"[{grid[min(costs)]:g}, {grid[max(costs)]:g}]; scale the features "
                "(e.g. StandardScaler) or increase alpha.")
        return grid[max(k for k, c in costs.items() if c <= best * (1.0 + T0_COST_SLACK))]

    def _run_problem(self, X, y, sample_weight, state, n_epochs):
        if not state.started:
            # skip and t0 come from the first data seen and stay for partial_fit
            if getattr(self, "_t0_trial", None) is None:   # (coef_init: no _begin_call)
                self._begin_call(X, sample_weight)
            skip = self._t0_trial[0]
            t0 = (self._select_t0(y, sample_weight, state.seed)
                  if self.t0 == "auto" else float(self.t0))
            state.start(t0, self.alpha, skip)
            if self.verbose:
                print(f"[SGDQNLinearSVC] skip={skip}, t0={t0:g}")
        result = sgdqn_epochs(self._row_dataset(X, y, sample_weight), state, self._options(),
                              loss=LOSSES[self.loss](), n_epochs=n_epochs,
                              shuffle=self.shuffle, fit_intercept=self.fit_intercept)
        if result.diverged:
            raise diverged_error(type(self).__name__, result.epochs, remedy="increase t0")
        return result.epochs

    def _mix_states(self, states, weights, start):
        return mix_sgdqn_states(states, weights, start, lam=self.alpha)

    def _export(self):
        super()._export()
        self._t0_trial = None     # (the trial sample is not part of the model)
        self.t0_ = np.array([s.t0 for s in self._states])
        self.skip_ = int(self._states[0].skip)
        self.B_ = np.vstack([s.B for s in self._states])


def mix_sgdqn_states(states, weights, start=None, *, lam):
    """Mix SGD-QN states (``SGDQNState``) trained on shards of the rows.

    The weights and intercept are averaged with ``weights``; ``1 / B`` (which
    accumulates the curvature of every example seen) and the update counter
    ``t`` are summed as increments from ``start``. The skip cycle restarts:
    ``B`` is next re-estimated after ``skip`` examples, from the mixed
    weights (``v``).

    Parameters
    ----------
    states : sequence of SGDQNState
        One per model, each continued from ``start`` (all started with the
        same ``t0`` and ``skip``).
    weights : sequence of float
        The models' shares of the rows.
    start : SGDQNState or None, default=None
        The state the models started from; None when each started fresh,
        from ``1 / B = lam t0`` (``SGDQNState.start``).
    lam : float
        The L2 strength the models were started with.

    Returns
    -------
    mixed : SGDQNState
        A new state; the inputs are not modified.
    """
    out = copy.deepcopy(states[0])
    out.coef = weighted_mean([s.coef for s in states], weights)
    out.intercept = weighted_mean([s.intercept for s in states], weights)
    invb0 = np.full_like(out.invB, lam * out.t0) if start is None else start.invB
    out.invB = sum_increments([s.invB for s in states], invb0)
    out.B = 1.0 / out.invB
    out.v = np.concatenate([out.coef, out.intercept])
    out.count = out.skip
    out.update_b = False
    out.t = int(sum_increments([s.t for s in states], 0 if start is None else start.t))
    return out
