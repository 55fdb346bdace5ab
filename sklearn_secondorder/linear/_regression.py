"""The linear regressors' base (``LinearRegressorBase``) and their rows.

A regressor is a linear model with one real-valued output: one problem, one
output, the targets as they are, a regression loss (``_core._losses``), so
its pass is a binary classifier's pass with another loss (the kernels take
``bound_steps``, below). What the regressors add to ``LinearModelBase``:

- **The targets**: ``y`` of shape ``(n,)`` or ``(n, 1)``, finite numbers; a
  ``y`` of more columns is refused with a pointer to ``MultiOutputRegressor``.
- **Centred dense columns** (``ColumnCentring``): a column that is non-zero
  in at least half of the rows is trained on as ``x_j - mean_j`` (the means
  of the call that starts the state), the intercept absorbing ``coef .
  mean``, so that measurements far from 0 (a depth of 61.7 +- 1.4) do not
  couple with the intercept. ``coef_`` and ``intercept_`` are those of the
  features as given: the model, and the objective, are unchanged; only the
  path of the steps is. Sparse columns (one-hot, hashed) stay as they are,
  so a step still costs O(nnz).
- **Bounded steps** (``_core._numeric.bound_step``): a step moves its row's
  prediction at most to its target, so a row whose features lie far
  outside their usual range (an outlier) cannot throw the weights off.
- The checks of a fitted model: the weight scale against the cost of
  ``w = 0``, and the training loss against the best constant's.
"""
import warnings
from numbers import Real

import numpy as np
import scipy.sparse as sp
from sklearn.base import RegressorMixin, clone
from sklearn.metrics import r2_score
from sklearn.utils import column_or_1d
from sklearn.utils.extmath import safe_sparse_dot

from .._compat import (
    Interval,
    StrOptions,
    _check_sample_weight,
    _fit_context,
    check_is_fitted,
    validate_data,
)
from .._core._losses import REGRESSION_LOSSES
from .._validation import (
    check_available_memory,
    user_stacklevel,
    validation_split,
    warn_if_implausible,
)
from ._base import LinearModelBase
from ._training_loop import _CHECK_ALL_ENTRIES, _CHECK_ENTRIES

#: A column non-zero in at least this share of the rows is centred.
DENSE_COLUMN_SHARE = 0.5
#: Up to this many centred columns of a CSR matrix are handled one mask each.
_FEW_COLUMNS = 16


class ColumnCentring:
    """The centring of a regressor's dense columns (module docstring).

    Parameters
    ----------
    columns : int ndarray
        The columns centred (sorted).
    means : float64 ndarray
        Their (weighted) means on the rows of the call that made it.
    """

    def __init__(self, columns, means):
        self.columns = np.asarray(columns, dtype=np.intp)
        self.means = np.asarray(means, dtype=np.float64)

    @classmethod
    def fit(cls, X, sample_weight, fit_intercept, counts=None):
        """The columns of ``X`` stored in at least ``DENSE_COLUMN_SHARE`` of
        its rows (``counts``: ``stored_counts(X)``, computed if None), with
        their means weighted by ``sample_weight``; none without an intercept
        (it absorbs the shift) or without rows of weight."""
        total = float(np.sum(sample_weight))
        n = X.shape[0]
        if not fit_intercept or total <= 0 or n == 0:
            return cls(np.zeros(0, np.intp), np.zeros(0))
        counts = stored_counts(X) if counts is None else counts
        columns = np.flatnonzero(counts >= DENSE_COLUMN_SHARE * n)
        if not columns.size:
            return cls(columns, np.zeros(0))
        masks = _column_masks(X, columns)
        if masks is not None and np.all(sample_weight == sample_weight[0]):
            # (a few columns' sums by masks: cheaper than slicing them out)
            means = np.array([np.sum(X.data, where=m) for m in masks]) / n
        else:
            means = np.ravel(X[:, columns].T @ sample_weight) / total
        keep = means != 0
        centring = cls(columns[keep], means[keep])
        if masks is not None:
            # (for transform(X) of the same X, which follows)
            centring._masks = (X, [m for m, k in zip(masks, keep) if k])
        return centring

    def __bool__(self):
        return bool(self.columns.size)

    def shift(self, coef):
        """``coef . means``: what the intercept of centred rows holds beyond
        the raw rows' intercept."""
        return float(np.dot(np.ravel(coef)[self.columns], self.means))

    def transform(self, X):
        """``X`` with its centred columns shifted by their means (a copy,
        whose memory is checked first; ``X`` itself when nothing is centred)."""
        if not self:
            return X
        if not sp.issparse(X):
            check_available_memory(X.nbytes, "a centred copy of X")
            out = np.array(X, order="C", copy=True)
            out[:, self.columns] -= self.means.astype(out.dtype)
            return out
        n = X.shape[0]
        fitted_on, masks = vars(self).pop("_masks", (None, None))
        if fitted_on is not X:
            masks = _column_masks(X, self.columns)
        if masks is not None and all(np.count_nonzero(m) == n for m in masks):
            # every row holds the centred columns once: only their values move
            check_available_memory(X.data.nbytes, "a centred copy of X")
            data = X.data.copy()
            for mask, mean in zip(masks, self.means):
                np.subtract(data, data.dtype.type(mean), out=data, where=mask)
            out = sp.csr_matrix((data, X.indices, X.indptr), shape=X.shape)
            out.has_canonical_format = True         # (X's structure, checked)
            return out
        check_available_memory((X.nnz + n * self.columns.size) * (X.dtype.itemsize + 4),
                               "a centred copy of X")
        block = X[:, self.columns].toarray() - self.means
        shifted = sp.csr_matrix(
            (block.ravel().astype(X.dtype), np.tile(self.columns, n).astype(X.indices.dtype),
             np.arange(0, n * self.columns.size + 1, self.columns.size)),
            shape=X.shape)
        keep = np.ones(X.shape[1], dtype=X.dtype)
        keep[self.columns] = 0
        rest = X @ sp.diags(keep)
        out = (rest + shifted).tocsr()
        out.sum_duplicates()
        return out


def _column_masks(X, columns):
    """For a CSR ``X`` in canonical format and a few ``columns``, each one's
    mask over ``X.indices``; else None."""
    if not sp.issparse(X) or columns.size > _FEW_COLUMNS or not X.has_canonical_format:
        return None
    return [X.indices == c for c in columns]


def stored_counts(X):
    """How many rows store each column (a dense ``X``: hold a non-zero)."""
    if sp.issparse(X):
        return np.bincount(X.indices, minlength=X.shape[1])
    return np.count_nonzero(X, axis=0)


class LinearRegressorBase(RegressorMixin, LinearModelBase):
    """Base class of the linear regressors (see the module docstring): the
    loss is ``regression_loss`` of the estimator's ``loss``, ``epsilon`` and
    ``quantile``."""

    _parameter_constraints: dict = {
        **LinearModelBase._parameter_constraints,
        "loss": [StrOptions(set(REGRESSION_LOSSES))],
        "epsilon": [Interval(Real, 0, None, closed="left")],
        "quantile": [Interval(Real, 0, 1, closed="neither")],
    }
    _private_state = ("_states", "_centring")
    _coef_ndim = 1

    # ---- fitting --------------------------------------------------------------
    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y, coef_init=None, intercept_init=None, sample_weight=None):
        """Fit the model with up to ``max_iter`` passes over the data.

        Input that is refused leaves a fitted model as it was; if the weights
        overflow during training the estimator is left unfitted and the
        error says what to change. With ``warm_start=True`` (same features)
        ``fit`` starts from the current ``coef_`` and ``intercept_``, as
        ``SGDRegressor``.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            Training rows (CSR when sparse), on any scale (see the module
            docstring). float32 rows give float32 ``coef_`` / ``intercept_``.
        y : array-like of shape (n_samples,) or (n_samples, 1)
            Targets, finite.
        coef_init : array-like of shape (n_features,), default=None
            Starting weights; the training state starts afresh from them.
        intercept_init : array-like of shape (1,), default=None
            Starting intercept; needs ``fit_intercept=True``.
        sample_weight : array-like of shape (n_samples,), default=None
            Finite, non-negative weight of each row; rows of weight zero are
            skipped. None weighs every row 1.

        Returns
        -------
        self : object
            The fitted estimator.
        """
        return super().fit(X, y, coef_init=coef_init, intercept_init=intercept_init,
                           sample_weight=sample_weight)

    @_fit_context(prefer_skip_nested_validation=True)
    def partial_fit(self, X, y, sample_weight=None):
        """One pass over the given rows, continuing the current state.

        Invalid input is refused before anything changes. If the weights
        overflow during the pass, the state cannot be continued: the
        estimator is left unfitted (the error says so). The centred columns
        and their means, and the step sizes, are those of the first call.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            Training rows (CSR when sparse), with the features of the first call.
        y : array-like of shape (n_samples,) or (n_samples, 1)
            Targets, finite.
        sample_weight : array-like of shape (n_samples,), default=None
            Finite, non-negative weight of each row; rows of weight zero are
            skipped. None weighs every row 1.

        Returns
        -------
        self : object
            The updated estimator.
        """
        # (a model whose exported arrays were dropped still has its state)
        first = not hasattr(self, "_states") and not hasattr(self, "coef_")
        self._check_partial_fit_params(first)
        if not first:
            self._check_state_params()
        return self._partial_fit_rows(X, y, sample_weight, None, first)

    def start_model(self, X, y, sample_weight=None):
        """A model of zero weights started on these rows, not trained on them.

        The model a first ``partial_fit`` on them would start from.

        The centred columns and their means, the step sizes (``eta0='auto'``
        calibrated, PSA's per-column scales and period) are those of ``X``;
        ``t_`` is 0. Models that continue one start with ``partial_fit`` on
        shards of the rows share its centring, so that ``mix`` combines them
        (the Dask ``ParameterMixing`` starts every worker so).

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            Rows like those to come (a sample of them).
        y : array-like of shape (n_samples,)
            Their targets (the step calibration's trial passes read them).
        sample_weight : array-like of shape (n_samples,), default=None
            Weight of each row.

        Returns
        -------
        model : estimator
            A new estimator of the same parameters, fitted with zero weights.
        """
        model = clone(self)
        model._validate_params()
        X, y, _ = model._validate_xy(X, y, reset=True)
        sample_weight = model._weights_for(X, y, sample_weight, None, allow_balanced=False)
        model._reset_state(X.shape[1])
        rows = model._training_rows(X, sample_weight, reset=True)
        model._run_problem(rows, y, sample_weight, model._states[0], 0)
        model._export()
        return model

    def _validate_xy(self, X, y, reset):
        X, y = validate_data(self, X, y, accept_sparse="csr", dtype=list(self._input_dtypes),
                             order="C", y_numeric=True, multi_output=True, reset=reset)
        if y.ndim == 2 and y.shape[1] != 1:
            raise ValueError(
                f"{type(self).__name__} fits one target, but y has shape {y.shape}: wrap "
                "it in sklearn.multioutput.MultiOutputRegressor to fit one model per "
                "column.")
        self._coef_dtype = X.dtype
        return X, column_or_1d(y, warn=True).astype(np.float64, copy=False), None

    def _check_targets(self, targets):
        pass

    def _set_targets(self, targets):
        pass

    def _n_targets(self, targets):
        return 2                  # (one row of coefficients, as two classes have)

    def _weights_for(self, X, y, sample_weight, targets, allow_balanced):
        sample_weight = _check_sample_weight(sample_weight, X, dtype=np.float64)
        if not np.all(np.isfinite(sample_weight)) or np.any(sample_weight < 0):
            raise ValueError("sample_weight must be finite and non-negative.")
        return sample_weight

    def _validation_split(self, y, sample_weight):
        """The held-out rows of ``early_stopping``, at random (as ``SGDRegressor``)."""
        return validation_split(y, sample_weight, self.validation_fraction,
                                self.random_state, stratify=False)

    def _problem_count(self):
        return 1, 1

    def _targets(self, y, problem):
        return y

    def _training_rows(self, X, sample_weight, reset):
        if reset or not hasattr(self, "_centring"):
            self._centring = ColumnCentring.fit(X, sample_weight, self.fit_intercept)
        return self._centring.transform(X)

    def _start_from(self, X, y, sample_weight, coef, intercept):
        # (the state's intercept is that of the centred rows)
        super()._start_from(X, y, sample_weight, coef,
                            np.asarray(intercept) + self._centring.shift(coef))

    def _export(self):
        super()._export()
        coef = self.coef_.ravel()
        dtype = coef.dtype
        centring = getattr(self, "_centring", None)
        intercept = self.intercept_.astype(np.float64)
        if centring:
            intercept = intercept - centring.shift(coef.astype(np.float64))
        self.coef_ = coef
        self.intercept_ = intercept.astype(dtype)

    def _dense_coef(self):
        coef = self.coef_.toarray() if hasattr(self.coef_, "toarray") else self.coef_
        return np.array(coef, dtype=np.float64).reshape(1, -1)

    def _loss_object(self, n_outputs):
        return regression_loss(self)

    # ---- the checks of a fitted model -------------------------------------------
    def _fit_epochs(self, X, y, sample_weight, n_epochs, validation=None, stop=False):
        self._zero_cost = self._mean_loss(np.zeros_like(y), y, sample_weight)
        try:
            return super()._fit_epochs(X, y, sample_weight, n_epochs, validation=validation,
                                       stop=stop)
        finally:
            del self._zero_cost

    def _check_weight_scale(self, mean_weight):
        """Warn when ``alpha/2 ||w||^2`` is ten times the cost of ``w = 0``
        (the weighted mean loss of predicting 0), which bounds it at the
        optimum."""
        with np.errstate(over="ignore", invalid="ignore"):
            penalty = 0.5 * self.alpha * float(np.dot(self.coef_, self.coef_))
        return warn_if_implausible(
            self, penalty, getattr(self, "_zero_cost", np.inf),
            "Lower eta0 or increase alpha; features on extreme scales can be brought "
            "closer with StandardScaler or MaxAbsScaler.")

    def _mean_loss(self, scores, y, sample_weight):
        total = float(np.sum(sample_weight))
        losses = loss_values(self._loss_object(1), np.ravel(scores), y)
        return float(np.sum(sample_weight * losses)) / total if total > 0 else 0.0

    def _problem_accuracy(self, state, X, y, sample_weight):
        """The R^2 of one problem on held-out rows (``early_stopping``'s score,
        as ``SGDRegressor``'s)."""
        return float(r2_score(y, self._problem_scores(state, X)[:, 0],
                              sample_weight=sample_weight))

    def _warn_if_worse_than_constant(self, X, y, sample_weight):
        """Warn when the fitted model's training loss exceeds the best
        constant's (an intercept-only model: the weighted mean for the squared
        losses, the weighted median or ``quantile`` otherwise) by more than
        1%: the steps did not find even the constant."""
        n = X.shape[0]
        entries = X.nnz if sp.issparse(X) else X.size
        if entries > _CHECK_ALL_ENTRIES:
            # (as the classifiers' check: evenly spaced rows holding about
            # _CHECK_ENTRIES entries)
            rows = np.linspace(0, n - 1, max(2000, int(_CHECK_ENTRIES * n / entries))).astype(
                np.intp)
            X, y, sample_weight = X[rows], y[rows], sample_weight[rows]
        if float(np.sum(sample_weight)) <= 0 or y.size == 0:
            return
        model = self._mean_loss(self._problem_scores(self._states[0], X), y, sample_weight)
        constant = min(self._mean_loss(np.full_like(y, c), y, sample_weight)
                       for c in _constant_candidates(self, y, sample_weight))
        if model > 1.01 * constant + 1e-12 * abs(constant):
            warnings.warn(
                f"{type(self).__name__}: the fitted model is worse than a constant one on "
                f"its own training data (mean loss {model:.4g}, against {constant:.4g} for "
                "the best intercept-only model). Train longer (max_iter), lower eta0, or "
                "bring features on extreme scales closer (StandardScaler or MaxAbsScaler).",
                UserWarning, stacklevel=user_stacklevel())

    # ---- prediction ---------------------------------------------------------------
    def predict(self, X):
        """Predict the target of each row: ``X @ coef_ + intercept_``.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            The rows.

        Returns
        -------
        y_pred : ndarray of shape (n_samples,)
            The predicted values.
        """
        check_is_fitted(self)
        X = validate_data(self, X, accept_sparse="csr", dtype=[np.float64, np.float32],
                          reset=False)
        coef = self.coef_.T if sp.issparse(self.coef_) else self.coef_
        return np.ravel(safe_sparse_dot(X, coef, dense_output=True)) + self.intercept_[0]



def regression_loss(est):
    """The ``_core._losses`` object of a regressor's ``loss`` and its
    parameter (``epsilon``, or ``quantile``)."""
    cls = REGRESSION_LOSSES[est.loss]
    if est.loss == "squared_error":
        return cls()
    if est.loss == "quantile":
        return cls(est.quantile)
    return cls(est.epsilon)


def loss_values(loss, p, y):
    """Per-row values of a regression loss object at the predictions ``p``
    (``_core._losses``'s equations, vectorised for the checks, the
    monitoring and the command line's progressive validation)."""
    r = p - y
    name = type(loss).__name__
    if name == "SquaredError":
        return 0.5 * r * r
    if name == "Huber":
        a = np.abs(r)
        eps = loss.epsilon
        return np.where(a <= eps, 0.5 * r * r, eps * a - 0.5 * eps * eps)
    if name == "EpsilonInsensitive":
        return np.maximum(0.0, np.abs(r) - loss.epsilon)
    if name == "SquaredEpsilonInsensitive":
        return np.square(np.maximum(0.0, np.abs(r) - loss.epsilon))
    if name == "Quantile":
        return np.where(r <= 0, -loss.quantile * r, (1.0 - loss.quantile) * r)
    raise ValueError(f"unknown regression loss {name!r}")


def _constant_candidates(est, y, sample_weight):
    """Constants among which the best intercept-only model of the regressor
    ``est`` lies (close enough for the worse-than-constant check): the
    weighted mean (the squared losses' best), and the weighted median or the
    loss's quantile (the others')."""
    out = [float(np.average(y, weights=sample_weight))]
    if est.loss in ("squared_error", "squared_epsilon_insensitive"):
        return out
    q = est.quantile if est.loss == "quantile" else 0.5
    order = np.argsort(y)
    cum = np.cumsum(sample_weight[order])
    out.append(float(y[order][min(np.searchsorted(cum, q * cum[-1]), y.size - 1)]))
    return out
