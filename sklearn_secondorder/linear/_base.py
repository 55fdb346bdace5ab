"""Shared linear-classifier base: validation, classes, state, prediction.

Every linear estimator of the package (``PSAClassifier``, ``SGDQNLinearSVC``,
``SBMLogisticRegression``, ``PlainSGDClassifier``) is a thin subclass that
declares its parameters and implements two hooks:

``_init_problem(n_features, n_outputs, seed)``
    The fresh typed state of one sub-problem: the kernel's state object
    (a dataclass of its module in ``_core``), with at least ``t`` (updates
    so far) and ``seed`` (the shuffling RNG state, ``seed`` to start).
``_run_problem(X, y, sample_weight, state, n_epochs)``
    Run the compiled kernel over the rows, updating ``state`` in place, and
    return the number of passes made. ``y`` holds +-1 for binary problems and
    class indices for a multinomial one.

The base decides the decomposition: one binary problem for two classes,
one multinomial problem when ``_is_multinomial()`` (more than two classes
with a loss the estimator fits jointly), otherwise one-vs-rest with one
binary problem per class, run in parallel threads (``n_jobs``) because the
kernels release the GIL.
"""
from numbers import Integral, Real

import numpy as np
from joblib import Parallel, delayed
from scipy.special import expit
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.utils import check_random_state, compute_class_weight
from sklearn.utils.extmath import safe_sparse_dot, softmax
from sklearn.utils.metaestimators import available_if
from sklearn.utils.multiclass import check_classification_targets

from .._compat import (
    Interval,
    StrOptions,
    _check_sample_weight,
    _fit_context,
    check_is_fitted,
    validate_data,
)
from .._validation import (
    check_classes_arg,
    check_label_types,
    draw_seed,
    remove_fitted,
    unfit_on_error,
    warn_if_implausible,
)


class LinearClassifierBase(ClassifierMixin, BaseEstimator):
    """Base class of the linear classifiers (see the module docstring).

    Subclasses set ``_probabilistic_losses`` (losses with ``predict_proba``)
    and may override ``_is_multinomial``.
    """

    _parameter_constraints: dict = {
        "alpha": [Interval(Real, 0, None, closed="neither")],
        "fit_intercept": ["boolean"],
        "max_iter": [Interval(Integral, 1, None, closed="left")],
        "shuffle": ["boolean"],
        "random_state": ["random_state"],
        "class_weight": [StrOptions({"balanced"}), dict, None],
        "warm_start": ["boolean"],
        "n_jobs": [Interval(Integral, None, -1, closed="right"),
                   Interval(Integral, 1, None, closed="left"), None],
        "verbose": ["verbose"],
    }
    _probabilistic_losses = frozenset({"log_loss", "modified_huber"})
    _private_state = ("_states",)

    # ---- hooks ----------------------------------------------------------------
    def _init_problem(self, n_features, n_outputs, seed):  # pragma: no cover - abstract
        raise NotImplementedError

    def _run_problem(self, X, y, sample_weight, state, n_epochs):  # pragma: no cover
        raise NotImplementedError

    def _is_multinomial(self):
        """Whether more than two classes are fitted jointly (default: never)."""
        return False

    def _more_validate_params(self, for_partial_fit=False):
        """Cross-parameter checks, after the constraints (none by default)."""

    def _check_state_params(self):
        """Check the parameters against the state before a later ``partial_fit``
        changes anything (default: nothing to check)."""

    def _final_weights(self, state):  # pragma: no cover - abstract
        """The ``(coef, intercept)`` a problem exposes: flat C-order
        ``(n_features, n_outputs)`` and ``(n_outputs,)``."""
        raise NotImplementedError

    # ---- fitting --------------------------------------------------------------
    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y, sample_weight=None):
        """Fit the model with ``max_iter`` passes over the data.

        Input that is refused leaves a fitted model as it was; if the weights
        overflow during training the estimator is left unfitted.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            Training rows (CSR when sparse).
        y : array-like of shape (n_samples,)
            Class labels, at least two distinct ones.
        sample_weight : array-like of shape (n_samples,), default=None
            Finite, non-negative weight of each row (multiplied by the class
            weight); rows of weight zero are skipped. None weighs every row 1.

        Returns
        -------
        self : object
            The fitted estimator.
        """
        self._more_validate_params()
        keep_state = self.warm_start and hasattr(self, "_states")
        old = (self.classes_, self.coef_.shape[1]) if keep_state else None
        saved = {k: vars(self)[k] for k in ("n_features_in_", "feature_names_in_")
                 if k in vars(self)}
        try:
            X, y = self._validate_xy(X, y, reset=True)
            classes = np.unique(y)
            self._check_n_classes(classes)
            sample_weight = self._weights_for(X, y, sample_weight, classes,
                                              allow_balanced=True)
        except BaseException:
            # refused input: the fitted model (if any) stays as it was
            for k in ("n_features_in_", "feature_names_in_"):
                vars(self).pop(k, None)
            vars(self).update(saved)
            raise
        with unfit_on_error(self, self._private_state):
            self.classes_ = classes
            if not (old is not None and np.array_equal(classes, old[0])
                    and old[1] == X.shape[1]):
                self._reset_state(X.shape[1])
            return self._fit_epochs(X, y, sample_weight, self.max_iter)

    @_fit_context(prefer_skip_nested_validation=True)
    def partial_fit(self, X, y, classes=None, sample_weight=None):
        """One pass over the given rows, continuing the current state.

        Invalid input is refused before anything changes. If the weights
        overflow during the pass, the state cannot be continued: the
        estimator is left unfitted (the error says so).

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            Training rows (CSR when sparse), with the features of the first call.
        y : array-like of shape (n_samples,)
            Class labels, all of them in ``classes``.
        classes : array-like of shape (n_classes,), default=None
            All the classes; required on the first call, and when given on a
            later call it must equal ``classes_``.
        sample_weight : array-like of shape (n_samples,), default=None
            Finite, non-negative weight of each row (multiplied by the class
            weight); rows of weight zero are skipped. None weighs every row 1.

        Returns
        -------
        self : object
            The updated estimator.
        """
        first = not hasattr(self, "classes_")
        if not first:
            # (_fit_context validates a first call only: the parameters may
            # have been set since, and a bad one must not touch the state)
            self._validate_params()
        self._more_validate_params(for_partial_fit=True)
        if first:
            if classes is None:
                raise ValueError("classes must be passed on the first call to partial_fit.")
            all_classes = self._check_classes(classes)
        else:
            all_classes = self.classes_
            if classes is not None and not np.array_equal(self._check_classes(classes),
                                                          self.classes_):
                raise ValueError(
                    f"`classes={np.unique(classes)!r}` is not the same as on the first "
                    f"call to partial_fit ({self.classes_!r})."
                )
        if not first:
            self._check_state_params()
        if self.class_weight == "balanced":
            raise ValueError(
                "class_weight='balanced' is not supported by partial_fit: compute the "
                "weights on the full data with sklearn.utils.compute_class_weight and pass "
                "them as a dict."
            )
        try:
            X, y = self._validate_xy(X, y, reset=first)
            unseen = np.setdiff1d(np.unique(y), all_classes)
            if unseen.size:
                raise ValueError(f"y contains labels not in classes_ {all_classes!r}: "
                                 f"{unseen[:5]!r}")
            sample_weight = self._weights_for(X, y, sample_weight, all_classes,
                                              allow_balanced=False)
        except BaseException:
            if first:                     # nothing to keep: no half-set attributes
                remove_fitted(self, self._private_state)
            raise
        with unfit_on_error(self, self._private_state, continued=not first):
            if first:
                self.classes_ = all_classes
                self._reset_state(X.shape[1])
            return self._fit_epochs(X, y, sample_weight, 1)

    def _check_classes(self, classes):
        """The ``classes`` argument of ``partial_fit`` (``check_classes_arg``),
        at least two."""
        classes = check_classes_arg(classes)
        self._check_n_classes(classes)
        return classes

    def _validate_xy(self, X, y, reset):
        check_label_types(y, "y")
        X, y = validate_data(self, X, y, accept_sparse="csr", dtype=np.float64,
                             order="C", reset=reset)
        check_classification_targets(y)
        return X, y

    @staticmethod
    def _check_n_classes(classes):
        if classes.size < 2:
            raise ValueError(
                "The classifier needs samples of at least 2 classes in the data, but the "
                f"data contain only one class: {classes[0].item()!r}"
            )

    def _weights_for(self, X, y, sample_weight, classes, allow_balanced):
        sample_weight = _check_sample_weight(sample_weight, X, dtype=np.float64)
        if not np.all(np.isfinite(sample_weight)) or np.any(sample_weight < 0):
            raise ValueError("sample_weight must be finite and non-negative.")
        if self.class_weight is not None:
            if self.class_weight == "balanced" and not allow_balanced:
                raise ValueError("class_weight='balanced' needs the full data")
            cw = np.asarray(compute_class_weight(self.class_weight, classes=classes, y=y),
                            dtype=np.float64)
            if not np.all(np.isfinite(cw)) or np.any(cw < 0):
                raise ValueError("class_weight must give every class a finite, non-negative "
                                 f"weight; got {dict(zip(classes.tolist(), cw.tolist()))}.")
            sample_weight = sample_weight * cw[np.searchsorted(classes, y)]
        return sample_weight

    def _problem_count(self):
        K = self.classes_.size
        if K == 2:
            return 1, 1
        if self._is_multinomial():
            return 1, K
        return K, 1

    def _reset_state(self, n_features):
        n_problems, n_outputs = self._problem_count()
        rng = check_random_state(self.random_state)
        self._states = []
        for _ in range(n_problems):
            self._states.append(self._init_problem(n_features, n_outputs, draw_seed(rng)))
        self.t_ = 0
        self.n_iter_ = 0

    def _targets(self, y, problem):
        """Kernel targets of one problem: +-1, or class indices (multinomial)."""
        idx = np.searchsorted(self.classes_, y)
        n_problems, n_outputs = self._problem_count()
        if n_outputs > 1:
            return idx.astype(np.float64)
        positive = 1 if n_problems == 1 else problem
        return np.where(idx == positive, 1.0, -1.0)

    def _fit_epochs(self, X, y, sample_weight, n_epochs):
        if not hasattr(self, "_states"):
            self._reset_state(X.shape[1])
        n_problems = len(self._states)

        def run(p):
            return self._run_problem(X, self._targets(y, p), sample_weight,
                                     self._states[p], n_epochs)

        if n_problems == 1:
            passes = [run(0)]
        else:
            passes = Parallel(n_jobs=self.n_jobs, require="sharedmem")(
                delayed(run)(p) for p in range(n_problems))
        self.n_iter_ = int(max(passes))
        self.t_ = int(max(s.t for s in self._states))
        self._export()
        used = sample_weight[sample_weight > 0]
        self._check_weight_scale(float(np.mean(used)) if used.size else 1.0)
        return self

    def _check_weight_scale(self, mean_weight):
        """Warn when the weights are implausibly large without overflowing.

        At the optimum ``alpha/2 ||w||^2 <= P(w*) <= P(0)``, the (weighted)
        mean loss at zero weights: ``mean_weight`` (the mean sample weight,
        class weights included) times 1 for the margin losses or ``log K``
        for the multinomial log loss. A model whose penalty alone is ten times
        that is worse than ``w = 0`` by far: its steps were too large for the
        features' scale.
        """
        with np.errstate(over="ignore", invalid="ignore"):
            penalty = 0.5 * self.alpha * float(np.sum(np.square(self.coef_)))
        n_problems, n_outputs = self._problem_count()
        warn_if_implausible(
            self, penalty, mean_weight * n_problems * max(1.0, np.log(n_outputs)),
            "Scale the features (e.g. StandardScaler) consistently across calls, or use "
            "smaller steps.")

    def _export(self):
        """Set ``coef_`` (n_problems or n_classes, n_features) and ``intercept_``."""
        coefs, intercepts = [], []
        for state in self._states:
            coef, intercept = self._final_weights(state)
            K = intercept.size
            coefs.append(np.asarray(coef).reshape(-1, K).T)
            intercepts.append(np.asarray(intercept))
        self.coef_ = np.ascontiguousarray(np.vstack(coefs))
        self.intercept_ = np.concatenate(intercepts)

    # ---- prediction -------------------------------------------------------------
    def decision_function(self, X):
        """Compute the signed scores ``X @ coef_.T + intercept_``.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            The rows to score.

        Returns
        -------
        scores : ndarray of shape (n_samples,) or (n_samples, n_classes)
            One score per row for two classes (positive: ``classes_[1]``),
            else one per row and class.
        """
        check_is_fitted(self)
        X = validate_data(self, X, accept_sparse="csr", dtype=np.float64, reset=False)
        scores = safe_sparse_dot(X, self.coef_.T, dense_output=True) + self.intercept_
        return scores.ravel() if scores.shape[1] == 1 else scores

    def predict(self, X):
        """Predict the class label of each row.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            The rows to classify.

        Returns
        -------
        y_pred : ndarray of shape (n_samples,)
            The class of highest score (for two classes, ``classes_[1]`` when
            the score is positive).
        """
        scores = self.decision_function(X)
        idx = (scores > 0).astype(int) if scores.ndim == 1 else scores.argmax(axis=1)
        return self.classes_[idx]

    def _check_proba(self):
        loss = getattr(self, "loss", "log_loss")
        if loss not in self._probabilistic_losses:
            raise AttributeError(
                f"probability estimates are not available for loss={loss!r}")
        return True

    def _predict_proba(self, X):
        scores = self.decision_function(X)
        if scores.ndim == 1:
            scores = scores[:, None]
        if getattr(self, "loss", "log_loss") == "modified_huber":
            # Zhang (2001), as scikit-learn's SGDClassifier.
            prob = (np.clip(scores, -1, 1) + 1) / 2
            if prob.shape[1] == 1:
                return np.hstack([1 - prob, prob])
            norm = prob.sum(axis=1, keepdims=True)
            uniform = norm[:, 0] == 0
            prob[uniform] = 1.0
            norm[uniform] = prob.shape[1]
            return prob / norm
        if scores.shape[1] > 1 and self._is_multinomial():
            return softmax(scores.copy())
        prob = expit(scores)
        if prob.shape[1] == 1:
            return np.hstack([1 - prob, prob])
        return prob / prob.sum(axis=1, keepdims=True)  # one-vs-rest, normalised

    @available_if(_check_proba)
    def predict_proba(self, X):
        """Estimate the class probabilities (probabilistic losses only).

        Binary: the logistic of the score (``log_loss``) or Zhang's
        ``(clip(score, -1, 1) + 1) / 2`` (``modified_huber``). Multiclass:
        softmax for a multinomial model, normalised one-vs-rest otherwise.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            The rows to classify.

        Returns
        -------
        proba : ndarray of shape (n_samples, n_classes)
            The probability of each class (columns in the order of
            ``classes_``); each row sums to 1.
        """
        return self._predict_proba(X)

    @available_if(_check_proba)
    def predict_log_proba(self, X):
        """Estimate the log of the class probabilities (probabilistic losses only).

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            The rows to classify.

        Returns
        -------
        log_proba : ndarray of shape (n_samples, n_classes)
            ``log(predict_proba(X))`` (``-inf`` where a probability is 0).
        """
        return np.log(self.predict_proba(X))

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        return tags

