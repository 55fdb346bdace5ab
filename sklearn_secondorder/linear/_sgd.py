"""Plain (and averaged) SGD on the shared core: the package's baseline."""
import copy
from numbers import Real

import numpy as np

from .._calibration import calibrate_linear_eta0
from .._compat import Interval, StrOptions
from .._core._losses import LOSSES
from .._core._sgd_fast import LinearSGDOptions, LinearSGDState, sgd_epochs
from .._mixing import sum_increments, weighted_mean
from .._penalty import PENALTY_CONSTRAINTS, l1_share, split_alpha
from .._validation import diverged_error, store_init_params
from ._base import LinearClassifierBase


class SGDKernelMixin:
    """Plain SGD's training state and passes, shared by ``PlainSGDClassifier``
    and ``PlainSGDRegressor``: the hooks of ``LinearModelBase`` on
    ``_core._sgd_fast.sgd_epochs`` over ``LinearSGDState``. The estimator
    gives ``_loss_object(n_outputs)`` and may set ``_bound_steps``
    (regression's bounded steps)."""

    #: Whether a step moves its row's prediction at most to the target
    #: (the regressors: ``_core._numeric.bound_step``).
    _bound_steps = False
    _warn_single_pass = True

    def _schedule(self):
        """The kernel's schedule of ``learning_rate``."""
        return self.learning_rate

    def _bytes_per_weight(self, n_features, n_outputs):
        # the weight, coef_, and the running average and L1 total when kept
        return 8 * (2 + bool(self.average) + (l1_share(self) > 0))

    def _init_problem(self, n_features, n_outputs, seed):
        return LinearSGDState.zeros(n_features, n_outputs, average=self.average, seed=seed,
                                    l1=l1_share(self) > 0)

    def _run_problem(self, X, y, sample_weight, state, n_epochs):
        n_outputs = state.intercept.size
        loss = self._loss_object(n_outputs)
        lam, l1 = split_alpha(self)
        if l1 > 0 and state.l1_q is None:     # (an L2 state, now with L1)
            state.l1_q = np.zeros_like(state.coef)
        if state.eta0 is None:
            state.eta0 = (self.eta0 if self.eta0 != "auto" else calibrate_linear_eta0(
                X, y, sample_weight, state.coef, state.intercept, loss=loss,
                n_outputs=n_outputs, lam=lam, fit_intercept=self.fit_intercept,
                random_state=np.random.RandomState(state.seed), l1=l1,
                bound_steps=self._bound_steps, held_out=self._bound_steps))
        options = LinearSGDOptions(
            lam=lam, l1=l1, learning_rate=self._schedule(), eta0=state.eta0,
            t0=1.0 / (self.alpha * state.eta0), power_t=getattr(self, "power_t", 0.25))
        result = sgd_epochs(self._row_dataset(X, y, sample_weight), state, options, loss=loss,
                            n_epochs=n_epochs, shuffle=self.shuffle,
                            fit_intercept=self.fit_intercept, bound_steps=self._bound_steps)
        if result.diverged:
            raise diverged_error(type(self).__name__, result.epochs)
        return result.epochs

    def _final_weights(self, state):
        return state.model()

    def _mix_states(self, states, weights, start):
        return mix_sgd_states(states, weights, start)

    def _export(self):
        super()._export()
        self.eta0_ = float(self._states[0].eta0)


class PlainSGDClassifier(SGDKernelMixin, LinearClassifierBase):
    """Linear classifier trained by plain or averaged SGD on the shared core.

    The baseline every second-order method of this package is measured
    against. Each step on row ``x`` at counter ``t`` (Bottou 2012)::

        eta_t = 1 / (alpha (t + t0)),     t0 = 1 / (alpha eta0)
        w <- (1 - eta_t alpha) w - eta_t l'(w.x + b, y) x

    with the scale trick for the shrink, so a step costs O(nnz(x)). With an
    L1 penalty the shrink is by ``alpha (1 - l1_ratio)`` and each step adds
    ``eta_t alpha l1_ratio`` to the cumulative L1 penalty.

    The update is `sklearn_secondorder._core._sgd_fast.sgd_epochs`
    (``_sgd_step``) on ``ScaledWeights`` (``_weights.pyx``: the scale trick
    and the lazy running average).

    Parameters
    ----------
    loss : {'log_loss', 'hinge', 'squared_hinge', 'modified_huber'}, default='log_loss'
        Multiclass ``log_loss`` is fitted as one multinomial (softmax) model;
        the other losses are fitted one-vs-rest.
    penalty : {'l2', 'l1', 'elasticnet'}, default='l2'
        The penalty, with scikit-learn's ``SGDClassifier`` meaning: the term
        ``alpha (l1_ratio ||w||_1 + (1 - l1_ratio)/2 ||w||^2)`` (``'l2'`` is
        ``l1_ratio = 0``, ``'l1'`` is ``l1_ratio = 1``). The L1 part is
        Tsuruoka, Tsujii and Ananiadou's cumulative penalty (ACL 2009),
        applied lazily (a step stays O(nnz)), as scikit-learn does; a weight is
        caught up when a step reads it and at the end of each call, so
        ``coef_`` holds exact zeros. With ``average=True`` the average is
        taken on the support of the last iterate (its zeros are kept: the
        average of sparse iterates would be dense).
    alpha : float, default=1e-4
        Strength of the penalty (``alpha/2 ||w||^2 + mean loss`` with
        ``penalty='l2'``; the intercept is not penalised).
    l1_ratio : float, default=0.15
        The L1 share of ``alpha`` with ``penalty='elasticnet'`` (in ``[0, 1]``;
        unused otherwise).
    fit_intercept : bool, default=True
        Whether to fit an intercept (not penalised).
    max_iter : int, default=5
        Passes over the data in ``fit`` (at most, with ``tol``): a small
        fixed budget, the same for every linear estimator of the package but
        ``PSAClassifier`` (1), instead of ``SGDClassifier``'s 1000 with
        ``tol=1e-3``.
    learning_rate : {'optimal', 'constant'}, default='optimal'
        ``'optimal'``: ``eta_t = 1 / (alpha (t + t0))``; ``'constant'``: ``eta0``.
    eta0 : 'auto' or float, default='auto'
        Start step size; ``'auto'`` calibrates it on 1000 rows (Bottou's
        recipe: doubling/halving trial passes, best halved). As in
        ``SGDClassifier``, a step with ``eta alpha >= 1`` shrinks the
        weights to zero before its gradient step (the shrink factor
        ``1 - eta alpha`` is clipped at 0), so any ``alpha`` fits.
    average : bool, default=False
        Return the average of all iterates (averaged SGD, Polyak-Ruppert),
        kept lazily in O(nnz) per step.
    shuffle : bool, default=True
        Shuffle the rows before each pass.
    random_state : int, RandomState instance or None, default=None
        Seeds the shuffles and the sample of the ``eta0='auto'``
        calibration; an int gives reproducible fits.
    class_weight : dict, 'balanced' or None, default=None
        Weight of each class, multiplied into ``sample_weight``:
        ``{label: weight}``, or ``'balanced'`` for
        ``n_samples / (n_classes * count(label))`` (``fit`` only). None gives
        every class weight 1.
    warm_start : bool, default=False
        Whether ``fit`` starts from the current ``coef_`` and ``intercept_``
        (when the classes and the number of features are unchanged), as
        ``SGDClassifier``: the coefficients are reused, not the schedule; the
        fit equals one given ``coef_init=coef_, intercept_init=intercept_``
        and ``t_`` counts from 0 again. ``partial_fit`` continues the whole
        state.
    n_jobs : int, default=None
        Threads that train the model (the compiled kernel releases the GIL).
        With one problem (two classes, or the multinomial ``log_loss``) they
        share every pass: the pass's shuffled order is cut into ``n_jobs``
        contiguous shards of about equal non-zeros, each thread runs one kernel
        pass over its shard on its own copy of the training state, and the
        copies are mixed after the pass (parameter mixing:
        ``sklearn_secondorder._mixing``, the rules ``mix`` uses). That is not
        the one-thread model: after 5 passes at ``n_jobs=2`` on CoNLL-2000
        tokens hashed to 2^20 columns (I-NP against the rest) the test accuracy
        was within 0.06 points of one thread's (0.01 lower on average over
        three seeds) (see "Threads on one model" in the user guide). A given
        ``n_jobs`` and ``random_state`` give the same model bit for bit; None
        and 1 are one thread, the model of earlier releases. With several
        one-vs-rest problems the threads fit the classes side by side instead,
        the model of one thread (None then follows a ``joblib.parallel_config``
        context). -1 means all the cores, -2 all but one; 0 or a non-int is a
        ValueError. Each thread trains a copy of the state: the memory check
        before training counts them.
    verbose : int, default=0
        Above 0, print one line per pass: the pass, the rows, the update
        counter ``T``, the mean training loss at the end of the pass,
        ``||w||``, the bias and the seconds since the call started (the
        content of ``SGDClassifier``'s lines; the evaluation costs one
        product ``X w`` per pass).
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
        raised when ``tol`` is set and the passes ran out (one pass included,
        as ``SGDClassifier``: the rule needs ``n_iter_no_change`` passes).
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

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
        The class labels, sorted.
    coef_ : ndarray of shape (1, n_features) or (n_classes, n_features)
        The weights (the average when ``average=True``): one row for two
        classes, else one per class.
    intercept_ : ndarray of shape (1,) or (n_classes,)
        The intercepts (zero when ``fit_intercept=False``).
    n_features_in_ : int
        Number of features seen during ``fit``.
    feature_names_in_ : ndarray of shape (n_features_in_,)
        Defined when ``X`` has feature names that are all strings.
    n_iter_ : int
        Passes made by the last call to ``fit`` or ``partial_fit``.
    t_ : int
        Weight updates made so far (rows with non-zero weight).
    eta0_ : float
        The step size in use (``eta0``, or the one ``'auto'`` calibrated on
        the first call).

    See Also
    --------
    sklearn.linear_model.SGDClassifier : The scikit-learn peer.

    Examples
    --------
    Averaged SGD on a stream of four batches:

    >>> import numpy as np
    >>> from sklearn.datasets import load_breast_cancer
    >>> from sklearn.preprocessing import StandardScaler
    >>> from sklearn_secondorder import PlainSGDClassifier
    >>> X, y = load_breast_cancer(return_X_y=True)
    >>> X = StandardScaler().fit_transform(X)
    >>> clf = PlainSGDClassifier(average=True, random_state=0)
    >>> for rows in np.array_split(np.arange(len(y)), 4):
    ...     clf = clf.partial_fit(X[rows], y[rows], classes=[0, 1])
    >>> clf.score(X, y) > 0.95
    True
    """

    _parameter_constraints = {
        **LinearClassifierBase._parameter_constraints,
        "loss": [StrOptions(set(LOSSES))],
        "learning_rate": [StrOptions({"optimal", "constant"})],
        "eta0": [StrOptions({"auto"}), Interval(Real, 0, None, closed="neither")],
        "average": ["boolean"],
        **PENALTY_CONSTRAINTS,
    }

    def __init__(self, loss="log_loss", *, penalty="l2", alpha=1e-4, l1_ratio=0.15,
                 fit_intercept=True, max_iter=5, learning_rate="optimal", eta0="auto",
                 average=False, shuffle=True, random_state=None, class_weight=None,
                 warm_start=False, n_jobs=None, verbose=0, tol=None, n_iter_no_change=5,
                 early_stopping=False, validation_fraction=0.1):
        store_init_params(self, locals())

    def _is_multinomial(self):
        return self.loss == "log_loss"

    def _loss_object(self, n_outputs):
        return LOSSES[self.loss]() if n_outputs == 1 else None


def mix_sgd_states(states, weights, start=None):
    """Mix plain SGD states (``LinearSGDState``) trained on shards of the rows.

    The weights and intercepts are averaged with ``weights``; the running
    sums of the iterates, their count and the update counter ``t`` sum over
    the rows seen, so they are summed as increments from ``start``
    (``sklearn_secondorder._mixing``).

    Parameters
    ----------
    states : sequence of LinearSGDState
        One per model, each continued from ``start``.
    weights : sequence of float
        The models' shares of the rows.
    start : LinearSGDState or None, default=None
        The state the models started from (None: zero weights and sums).

    Returns
    -------
    mixed : LinearSGDState
        A new state (a copy of the first for everything else: ``eta0``, the
        RNG state); the inputs are not modified.
    """
    out = copy.deepcopy(states[0])
    out.coef = weighted_mean([s.coef for s in states], weights)
    out.intercept = weighted_mean([s.intercept for s in states], weights)
    if out.avg_coef is not None:
        zero = start is None
        out.avg_coef = sum_increments([s.avg_coef for s in states],
                                      0.0 if zero else start.avg_coef)
        out.avg_intercept = sum_increments([s.avg_intercept for s in states],
                                           0.0 if zero else start.avg_intercept)
        out.n_iterates = float(sum_increments([s.n_iterates for s in states],
                                              0.0 if zero else start.n_iterates))
    out.t = int(sum_increments([s.t for s in states], 0 if start is None else start.t))
    return out
