"""PSARegressor: periodic step-size adaptation for linear regression."""

import numpy as np
import scipy.sparse as sp

from .._validation import store_init_params
from ._psa import PSAKernelMixin
from ._regression import LinearRegressorBase, stored_counts


class PSARegressor(PSAKernelMixin, LinearRegressorBase):
    """Linear regression trained by Periodic Step-size Adaptation, in one pass.

    ``SGDRegressor``'s model and objective, ``mean_i loss(x_i . w + b, y_i)
    + alpha R(w)``, learnt by PSA (Hsu, Chang, Huang and Lee, Algorithm 1):
    SGD with one step size per weight, each adapted every ``2b`` updates
    from the Jacobian eigenvalue estimate of Eqs. 6-10, as in
    ``PSAClassifier``; a regressor's pass is a binary classifier's pass with
    a regression loss, on the same compiled core. Three things make it right
    on features as they come, without ``StandardScaler``:

    - **Step sizes from the curvature.** Weight ``j``'s step starts at
      ``eta0 / s_j^2``, ``s_j^2`` the mean of the column's squared non-zero
      values on the first call: the squared loss's curvature along ``j`` on
      the rows that hold it (the diagonal of the Gauss-Newton matrix of one
      row). Every column then moves at its own scale, as if it had been
      scaled to unit root mean square, and PSA adapts from there; ``eta0``
      is calibrated in those units. Columns the first call does not hold
      start at the median scale.
    - **Centred dense columns.** A column non-zero in at least half the rows
      is trained on as ``x_j - mean_j`` (the intercept absorbs ``coef .
      mean``): a measurement far from 0 no longer couples with the
      intercept. ``coef_`` and ``intercept_`` are for the features as given.
    - **Bounded steps.** A step moves its row's prediction at most to its
      target (for the squared loss the normalised LMS step once a row's
      ``sum_j eta_j x_j^2`` passes 1), so a row with features far outside
      their range cannot throw the weights off.

    The target is used as it is (a price in the thousands is fine): the
    squared loss's steps scale with it; ``epsilon`` (Huber, the
    epsilon-insensitive losses) is in the target's units, as in
    ``SGDRegressor``.

    Parameters
    ----------
    loss : {'squared_error', 'huber', 'epsilon_insensitive', \
'squared_epsilon_insensitive', 'quantile'}, default='squared_error'
        ``SGDRegressor``'s losses (``_core._losses``): ``r^2 / 2`` of the
        residual ``r = p - y``, Huber's (quadratic up to ``epsilon``, linear
        beyond), ``max(0, |r| - epsilon)`` and its square; and Vowpal Wabbit's
        quantile (pinball) loss, whose model predicts the ``quantile`` of
        ``y`` (0.5: the median, the absolute error).
    epsilon : float, default=0.1
        The threshold of ``'huber'`` and the epsilon-insensitive losses, in
        the target's units.
    quantile : float, default=0.5
        The quantile ``'quantile'`` predicts, in ``(0, 1)``.
    penalty : {'l2', 'l1', 'elasticnet'}, default='l2'
        ``SGDRegressor``'s penalty ``alpha (l1_ratio ||w||_1 + (1 -
        l1_ratio)/2 ||w||^2)``, the L1 part as ``PSAClassifier``'s
        (Tsuruoka et al.'s cumulative penalty, lazy, on each weight's steps).
    alpha : float, default=1e-4
        Strength of the penalty (the intercept is not penalised).
    l1_ratio : float, default=0.15
        The L1 share of ``alpha`` with ``penalty='elasticnet'``.
    period : int or 'auto', default='auto'
        The paper's ``b``; ``'auto'``: ``max(10, 0.5 n / 1000)`` with ``n``
        the rows of the first call (the paper's Section 5.1.4).
    eta0 : 'auto' or float, default='auto'
        The initial step in the units where every column has unit root mean
        square (weight ``j`` starts at ``eta0 / s_j^2``). ``'auto'``
        calibrates it on 1000 rows (Bottou's recipe, with the bounded steps).
    psa_alpha : float, default=0.9999
        The paper's ``alpha``: the largest step-size factor.
    psa_beta : float, default=0.99
        The paper's ``beta``: the smallest step-size factor.
    psa_kappa : float, default=0.9
        The paper's ``kappa``: the clip on the eigenvalue estimate.
    fit_intercept : bool, default=True
        Whether to fit an intercept (not penalised). Without one, no column
        is centred.
    max_iter : int, default=1
        Passes over the data in ``fit`` (at most, with ``tol``): one, PSA's
        point, not ``SGDRegressor``'s 1000.
    tol : float or None, default=None
        Stopping criterion (scikit-learn's rule on the training objective at
        the end of each pass, or on the validation R^2 with
        ``early_stopping``); None makes exactly ``max_iter`` passes.
    shuffle : bool, default=True
        Shuffle the rows before each pass.
    verbose : int, default=0
        Above 0, one line per pass (loss, ``||w||``, bias, time).
    random_state : int, RandomState instance or None, default=None
        Seeds the shuffles and the calibration's sample.
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
    n_jobs : int, default=None
        Threads that share each pass and the one state, as in
        ``PSAClassifier`` (each owns a share of the weights; the rows go by
        in rounds of ``32 n_jobs`` rows scored at the round's start). A given
        ``n_jobs`` and ``random_state`` give the same model bit for bit;
        None and 1 are one thread. A model of at most 4096 weights trains
        on one thread (its eager pass costs less).

    Attributes
    ----------
    coef_ : ndarray of shape (n_features,)
        The weights, for the features as given.
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
    period_ : int
        The ``b`` in use.
    eta0_ : float
        The initial step in use (in the columns' unit scale).
    eta_ : ndarray of shape (1, n_features + 1, 1)
        Current step sizes (the last row belongs to the intercept).

    See Also
    --------
    sklearn.linear_model.SGDRegressor : Plain SGD (scikit-learn).
    PlainSGDRegressor : The same core without step-size adaptation.
    PSAClassifier : PSA for classification.

    References
    ----------
    C.-N. Hsu, Y.-M. Chang, H.-S. Huang and Y.-J. Lee. Periodic step-size
    adaptation for single-pass on-line learning. NIPS 2009; and the Machine
    Learning journal version (Algorithm 1, Eqs. 6-10).
    R. Koenker and G. Bassett. Regression quantiles. Econometrica 46(1),
    1978 (the quantile loss).

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_secondorder import PSARegressor
    >>> rng = np.random.RandomState(0)
    >>> X = rng.randn(2000, 3) * [1, 100, 0.01] + [0, 500, 0]   # unscaled columns
    >>> y = X @ [1.0, 0.02, 300.0] + 5 + 0.1 * rng.randn(2000)
    >>> # (the L2 term acts on the columns as given: the default alpha=1e-4
    >>> # would shrink the weight of 300 on the column of scale 0.01 to about half)
    >>> reg = PSARegressor(alpha=1e-6, random_state=0).fit(X, y)
    >>> reg.score(X, y) > 0.99
    True
    """

    _bound_steps = True

    _parameter_constraints = {
        **LinearRegressorBase._parameter_constraints,
        **PSAKernelMixin._psa_constraints,
    }

    def __init__(self, loss="squared_error", *, epsilon=0.1, quantile=0.5, penalty="l2",
                 alpha=1e-4, l1_ratio=0.15, period="auto", eta0="auto", psa_alpha=0.9999,
                 psa_beta=0.99, psa_kappa=0.9, fit_intercept=True, max_iter=1, tol=None,
                 shuffle=True, verbose=0, random_state=None, early_stopping=False,
                 validation_fraction=0.1, n_iter_no_change=5, warm_start=False,
                 n_jobs=None):
        store_init_params(self, locals())

    def _column_scale(self, X, sample_weight):
        return column_rms(X)


def column_rms(X):
    """Each column's root mean square over its stored values (a dense ``X``:
    its non-zero ones), the scale ``s_j`` whose square is the squared loss's
    curvature along ``j`` on the rows that hold it; a column without one gets
    the median of the others (1 when none has one)."""
    count = stored_counts(X)
    if sp.issparse(X):
        # (a product with the squared values, not a weighted bincount: half the time)
        squares = sp.csr_matrix((np.square(X.data, dtype=np.float64), X.indices, X.indptr),
                                shape=X.shape)
        sq = squares.T @ np.ones(X.shape[0])
    else:
        sq = np.einsum("ij,ij->j", X, X, dtype=np.float64)
    held = (count > 0) & (sq > 0)
    ms = np.ones(X.shape[1])
    ms[held] = sq[held] / count[held]
    if held.any() and not held.all():
        ms[~held] = np.median(ms[held])
    return np.sqrt(ms)
