"""PlainSGDRegressor: plain and averaged SGD for linear regression."""
from numbers import Real

from .._compat import Interval, StrOptions
from .._penalty import PENALTY_CONSTRAINTS
from .._validation import store_init_params
from ._regression import LinearRegressorBase
from ._sgd import SGDKernelMixin

#: ``learning_rate='adaptive'`` divides the step by this after
#: ``n_iter_no_change`` passes without improvement, down to ``_ADAPTIVE_MIN``
#: (scikit-learn's rule).
_ADAPTIVE_FACTOR = 5.0
_ADAPTIVE_MIN = 1e-6


class PlainSGDRegressor(SGDKernelMixin, LinearRegressorBase):
    """Linear regression by plain or averaged SGD, ``SGDRegressor``'s way.

    ``SGDRegressor`` on the shared core.

    The baseline ``PSARegressor`` is measured against, with
    ``SGDRegressor``'s losses, penalties and schedules. Each step on row
    ``x`` at counter ``t``::

        eta_t = eta0 / (t + 1)^power_t   ('invscaling'; or 'constant',
                                          'optimal': 1 / (alpha (t + t0)))
        w <- (1 - eta_t alpha) w - eta_t l'(w.x + b, y) x

    with the scale trick for the shrink, so a step costs O(nnz(x)). Two
    things differ from ``SGDRegressor`` on data as they come:

    - **Centred dense columns** (a column non-zero in at least half the rows
      is trained on as ``x_j - mean_j``, the intercept absorbing the shift;
      ``coef_`` and ``intercept_`` are for the features as given), and the
      intercept learns at the weights' rate on sparse data too (no 0.01
      decay).
    - **Bounded steps**: a step moves its row's prediction at most to its
      target, so no step overshoots a row, whatever its features' scale:
      where ``SGDRegressor`` returns weights of 1e12 on unscaled data, the
      fit stays finite. One step size serves every column, though: columns
      on scales far apart still learn at rates far apart, which
      ``PSARegressor``'s per-coordinate steps cure.

    Parameters
    ----------
    loss : {'squared_error', 'huber', 'epsilon_insensitive', \
'squared_epsilon_insensitive', 'quantile'}, default='squared_error'
        ``SGDRegressor``'s losses and Vowpal Wabbit's quantile (pinball) loss
        (``PSARegressor``'s ``loss``).
    epsilon : float, default=0.1
        The threshold of ``'huber'`` and the epsilon-insensitive losses, in
        the target's units.
    quantile : float, default=0.5
        The quantile ``'quantile'`` predicts, in ``(0, 1)``.
    penalty : {'l2', 'l1', 'elasticnet'}, default='l2'
        ``SGDRegressor``'s penalty ``alpha (l1_ratio ||w||_1 + (1 -
        l1_ratio)/2 ||w||^2)`` (the L1 part Tsuruoka et al.'s cumulative
        penalty, lazy).
    alpha : float, default=1e-4
        Strength of the penalty (the intercept is not penalised).
    l1_ratio : float, default=0.15
        The L1 share of ``alpha`` with ``penalty='elasticnet'``.
    fit_intercept : bool, default=True
        Whether to fit an intercept. Without one, no column is centred.
    max_iter : int, default=5
        Passes over the data in ``fit`` (at most, with ``tol``): the
        package's fixed budget, not ``SGDRegressor``'s 1000.
    tol : float or None, default=None
        Stopping criterion (scikit-learn's rule, on the training objective at
        the end of each pass or the validation R^2); None makes exactly
        ``max_iter`` passes. With ``tol`` set, a ``ConvergenceWarning`` says
        that the passes ran out (one pass included, as ``SGDRegressor``).
    shuffle : bool, default=True
        Shuffle the rows before each pass.
    verbose : int, default=0
        Above 0, one line per pass.
    random_state : int, RandomState instance or None, default=None
        Seeds the shuffles and the calibration's sample.
    learning_rate : {'invscaling', 'constant', 'optimal', 'adaptive'}, \
default='invscaling'
        ``SGDRegressor``'s schedules: ``eta0 / (t + 1)^power_t``; ``eta0``;
        ``1 / (alpha (t + t0))`` with ``t0 = 1 / (alpha eta0)``; ``eta0``
        divided by 5 each time ``n_iter_no_change`` passes do not improve
        by ``tol`` (down to 1e-6; with ``tol`` set).
    eta0 : 'auto' or float, default='auto'
        The initial step. ``'auto'`` calibrates it on 1000 rows (Bottou's
        recipe, with the bounded steps), instead of ``SGDRegressor``'s 0.01
        that no single scale of the features suits.
    power_t : float, default=0.25
        The exponent of ``'invscaling'``.
    early_stopping : bool, default=False
        Hold out ``validation_fraction`` of the rows (at random) and stop on
        their R^2 (with ``tol`` set).
    validation_fraction : float, default=0.1
        Share of the rows held out by ``early_stopping``.
    n_iter_no_change : int, default=5
        Passes without improvement before stopping (with ``tol`` set).
    warm_start : bool, default=False
        Whether ``fit`` starts from the current ``coef_`` and ``intercept_``
        (the coefficients, not the schedule), as ``SGDRegressor``.
    average : bool, default=False
        Return the average of all iterates (averaged SGD), kept lazily in
        O(nnz) per step.
    n_jobs : int, default=None
        Threads that share each pass: each runs one kernel pass over its
        shard of the rows on its own copy of the state, and the copies are
        mixed after the pass (parameter mixing, as ``PlainSGDClassifier``).
        A given ``n_jobs`` and ``random_state`` give the same model bit for
        bit; None and 1 are one thread.

    Attributes
    ----------
    coef_ : ndarray of shape (n_features,)
        The weights (the average with ``average=True``).
    intercept_ : ndarray of shape (1,)
        The intercept.
    n_features_in_ : int
        Number of features seen during ``fit``.
    feature_names_in_ : ndarray of shape (n_features_in_,)
        Defined when ``X`` has feature names that are all strings.
    n_iter_ : int
        Passes made by the last call.
    t_ : int
        Updates made so far (rows with non-zero weight).
    eta0_ : float
        The initial step in use (``eta0``, or the calibrated one; with
        ``'adaptive'``, the current step).

    See Also
    --------
    sklearn.linear_model.SGDRegressor : The scikit-learn peer.
    PSARegressor : Per-coordinate adapted steps, one pass.

    Examples
    --------
    >>> from sklearn.datasets import load_diabetes
    >>> from sklearn_secondorder import PlainSGDRegressor
    >>> X, y = load_diabetes(return_X_y=True)
    >>> reg = PlainSGDRegressor(max_iter=20, random_state=0).fit(X, y)
    >>> reg.score(X, y) > 0.4
    True
    """

    _bound_steps = True

    _parameter_constraints = {
        **LinearRegressorBase._parameter_constraints,
        "learning_rate": [StrOptions({"invscaling", "constant", "optimal", "adaptive"})],
        "eta0": [StrOptions({"auto"}), Interval(Real, 0, None, closed="neither")],
        # (a negative power_t, deprecated by SGDRegressor, grows the steps)
        "power_t": [Interval(Real, 0, None, closed="left")],
        "average": ["boolean"],
        **PENALTY_CONSTRAINTS,
    }

    def __init__(self, loss="squared_error", *, epsilon=0.1, quantile=0.5, penalty="l2",
                 alpha=1e-4, l1_ratio=0.15, fit_intercept=True, max_iter=5, tol=None,
                 shuffle=True, verbose=0, random_state=None, learning_rate="invscaling",
                 eta0="auto", power_t=0.25, early_stopping=False, validation_fraction=0.1,
                 n_iter_no_change=5, warm_start=False, average=False, n_jobs=None):
        store_init_params(self, locals())

    def _schedule(self):
        # ('adaptive' is a constant step that the stopping rule lowers)
        return "constant" if self.learning_rate == "adaptive" else self.learning_rate

    def _lower_step(self, state):
        """``'adaptive'``: divide the step by 5 after ``n_iter_no_change``
        passes without improvement; False (stop) once it is below 1e-6."""
        if self.learning_rate != "adaptive" or state.eta0 <= _ADAPTIVE_MIN:
            return False
        state.eta0 /= _ADAPTIVE_FACTOR
        return True
