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
import time
import warnings
from numbers import Integral, Real

import numpy as np
import scipy.sparse as sp
from joblib import Parallel, delayed
from scipy.special import expit
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.exceptions import ConvergenceWarning
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
    best_constant_loss,
    check_classes_arg,
    check_init_weights,
    check_label_types,
    check_not_stripped,
    draw_seed,
    mean_margin_loss,
    own_arrays,
    remove_fitted,
    unfit_on_error,
    validation_split,
    warn_if_implausible,
    warn_if_worse_than_constant,
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
        "tol": [Interval(Real, 0, None, closed="left"), None],
        "n_iter_no_change": [Interval(Integral, 1, None, closed="left")],
        "early_stopping": ["boolean"],
        "validation_fraction": [Interval(Real, 0, 1, closed="neither")],
    }
    #: Fitted attributes that only training needs (per-weight step sizes,
    #: rescalings): ``strip_training_state`` removes them with ``_states``.
    _training_attributes = ("eta_", "B_")
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

    def _begin_call(self, X, sample_weight):
        """Called once per ``fit`` / ``partial_fit`` before its passes, with
        the rows it trains on (default: nothing to do)."""

    def _final_weights(self, state):  # pragma: no cover - abstract
        """The ``(coef, intercept)`` a problem exposes: flat C-order
        ``(n_features, n_outputs)`` and ``(n_outputs,)``."""
        raise NotImplementedError

    # ---- fitting --------------------------------------------------------------
    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y, coef_init=None, intercept_init=None, sample_weight=None):
        """Fit the model with up to ``max_iter`` passes over the data.

        Input that is refused leaves a fitted model as it was; if the weights
        overflow during training the estimator is left unfitted. With
        ``warm_start=True`` (same classes and features) ``fit`` continues the
        whole training state: the weights, the step sizes and the update
        counter ``t_``, so the step schedule continues where it stopped and
        ``k`` such fits make the passes of one ``fit(max_iter=k)``
        (``SGDClassifier`` instead restarts its schedule at ``t_ = 1`` from
        ``coef_``; for ``SBMLogisticRegression`` see its ``warm_start``).

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            Training rows (CSR when sparse).
        y : array-like of shape (n_samples,)
            Class labels, at least two distinct ones.
        coef_init : array-like of shape (n_classes, n_features), default=None
            Starting weights (``(1, n_features)`` or ``(n_features,)`` for two
            classes). The training state starts afresh from them (update
            counter 0, step sizes chosen again), also with ``warm_start``:
            as in scikit-learn, ``coef_init`` takes precedence.
        intercept_init : array-like of shape (n_classes,), default=None
            Starting intercepts (``(1,)`` for two classes); needs
            ``fit_intercept=True``.
        sample_weight : array-like of shape (n_samples,), default=None
            Finite, non-negative weight of each row (multiplied by the class
            weight); rows of weight zero are skipped. None weighs every row 1.

        Returns
        -------
        self : object
            The fitted estimator.
        """
        self._more_validate_params()
        init = coef_init is not None or intercept_init is not None
        keep_state = self.warm_start and hasattr(self, "_states") and not init
        old = (self.classes_, self.coef_.shape[1]) if keep_state else None
        saved = {k: vars(self)[k] for k in ("n_features_in_", "feature_names_in_")
                 if k in vars(self)}
        try:
            X, y = self._validate_xy(X, y, reset=True)
            classes = np.unique(y)
            self._check_n_classes(classes)
            sample_weight = self._weights_for(X, y, sample_weight, classes,
                                              allow_balanced=True)
            if init:
                init = check_init_weights(coef_init, intercept_init, classes.size,
                                          X.shape[1], self.fit_intercept)
            validation = (validation_split(y, sample_weight, self.validation_fraction,
                                           self.random_state)
                          if self.early_stopping else None)
        except BaseException:
            # refused input: the fitted model (if any) stays as it was
            for k in ("n_features_in_", "feature_names_in_"):
                vars(self).pop(k, None)
            vars(self).update(saved)
            raise
        with unfit_on_error(self, self._private_state):
            if keep_state:
                own_arrays(self._states)      # e.g. loaded with mmap_mode='r'
            self.classes_ = classes
            if not (old is not None and np.array_equal(classes, old[0])
                    and old[1] == X.shape[1]):
                self._reset_state(X.shape[1])
            if validation is not None:
                Xv, yv, swv = X[validation], y[validation], sample_weight[validation]
                X, y, sample_weight = X[~validation], y[~validation], sample_weight[~validation]
                validation = (Xv, yv, swv)
            if init:
                self._start_from(X, y, sample_weight, *init)
            converged, scale_warned = self._fit_epochs(
                X, y, sample_weight, self.max_iter, validation=validation, stop=True)
        if not scale_warned:                          # (one warning is enough)
            self._warn_if_worse_than_constant(X, y, sample_weight)
        self._warn_unconverged(converged)
        return self

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
            check_not_stripped(self)
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
            else:
                own_arrays(self._states)      # e.g. loaded with mmap_mode='r'
            self._fit_epochs(X, y, sample_weight, 1)
        return self

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

    def _fit_epochs(self, X, y, sample_weight, n_epochs, validation=None, stop=False):
        """Run up to ``n_epochs`` passes on every problem and export the model.

        The passes run in one kernel call per problem unless the estimator
        monitors them (``verbose``, ``tol`` with ``stop``, ``validation``):
        then one pass at a time, each followed by the evaluation the stopping
        rule or the progress line needs (``_monitored_passes``). A kernel's
        visiting order depends only on its RNG state, so both give the same
        model after the same passes (up to rounding: plain SGD folds its
        weight scale at the end of each call). Returns ``(converged,
        scale_warned)``: whether the stopping rule was met (True when there
        is none) and whether the weight-scale warning was raised.
        """
        if not hasattr(self, "_states"):
            self._reset_state(X.shape[1])
        self._begin_call(X, sample_weight)
        n_problems = len(self._states)
        monitor = bool(self.verbose) or validation is not None or (
            stop and self.tol is not None and n_epochs > 1)
        converged = True

        def run(p):
            targets = self._targets(y, p)
            if not monitor:
                return self._run_problem(X, targets, sample_weight, self._states[p],
                                         n_epochs), False
            val = None
            if validation is not None:
                val = (validation[0], self._targets(validation[1], p), validation[2])
            return self._monitored_passes(p, X, targets, sample_weight, n_epochs,
                                          val, stop)

        if n_problems == 1:
            runs = [run(0)]
        else:
            runs = Parallel(n_jobs=self.n_jobs, require="sharedmem")(
                delayed(run)(p) for p in range(n_problems))
        self.n_iter_ = int(max(r[0] for r in runs))
        if monitor and stop and self.tol is not None and n_epochs > 1:
            converged = all(r[1] for r in runs)
        self.t_ = int(max(s.t for s in self._states))
        self._export()
        used = sample_weight[sample_weight > 0]
        scale_warned = self._check_weight_scale(float(np.mean(used)) if used.size else 1.0)
        return converged, scale_warned

    def _monitored_passes(self, p, X, y, sample_weight, n_epochs, validation, stop):
        """One problem's passes one kernel call at a time, with scikit-learn's
        stopping rule and ``verbose`` lines.

        The rule is ``SGDClassifier``'s (``_plain_sgd``): a pass that does not
        improve the best value so far by ``tol`` counts as no improvement;
        ``n_iter_no_change`` of them in a row stop training. The value is
        the accuracy on the held-out rows with ``early_stopping``, else the
        training objective ``mean_i s_i loss_i / mean_i s_i + alpha/2
        ||w||^2`` at the end of the pass (``SGDClassifier`` sums the losses
        met during the pass, at the weights before each step: the kernels
        here do not track them, so one product ``X w`` per pass evaluates
        the objective exactly). Returns ``(passes, converged)``.
        """
        state = self._states[p]
        best, no_improvement, start = np.inf, 0, time.perf_counter()
        rows = int(np.count_nonzero(sample_weight))
        for epoch in range(1, n_epochs + 1):
            self._run_problem(X, y, sample_weight, state, 1)
            if validation is not None and stop and self.tol is not None:
                value = -self._problem_accuracy(state, *validation)
            if self.verbose or (validation is None and stop and self.tol is not None):
                loss, penalty = self._problem_objective(state, X, y, sample_weight)
                if validation is None:
                    value = loss + penalty
            if self.verbose:
                coef, intercept = self._final_weights(state)
                label = ("" if len(self._states) == 1 or self._is_multinomial()
                         else f" (class {self.classes_[p].tolist()!r})")
                print(f"-- {type(self).__name__}{label} pass {epoch}: rows {rows}, "
                      f"T {int(state.t)}, mean loss {loss:.6g}, ||w|| "
                      f"{float(np.sqrt(np.sum(np.square(coef)))):.4g}, bias "
                      f"{float(np.ravel(intercept)[0]):.6g}, "
                      f"{time.perf_counter() - start:.2f} s", flush=True)
            if not stop or self.tol is None:      # (scikit-learn: tol=None never stops)
                continue
            if value > best - self.tol:
                no_improvement += 1
            else:
                no_improvement = 0
            best = min(best, value)
            if no_improvement >= self.n_iter_no_change:
                if self.verbose:
                    print(f"-- {type(self).__name__}: convergence after {epoch} passes "
                          f"took {time.perf_counter() - start:.2f} s", flush=True)
                return epoch, True
        return n_epochs, False

    def _problem_scores(self, state, X):
        coef, intercept = self._final_weights(state)
        K = np.asarray(intercept).size
        W = np.asarray(coef).reshape(-1, K)
        return safe_sparse_dot(X, W, dense_output=True) + np.asarray(intercept)

    def _problem_objective(self, state, X, y, sample_weight):
        """The two terms of one problem's objective: ``sum_i s_i loss_i /
        sum_i s_i`` and ``alpha/2 ||w||^2``."""
        scores = self._problem_scores(state, X)
        coef, _ = self._final_weights(state)
        loss = mean_margin_loss(getattr(self, "loss", "log_loss"), scores, y, sample_weight)
        return loss, 0.5 * self.alpha * float(np.sum(np.square(coef)))

    def _problem_accuracy(self, state, X, y, sample_weight):
        """Weighted accuracy of one problem on its targets (+-1 or indices)."""
        scores = self._problem_scores(state, X)
        pred = (np.where(scores[:, 0] > 0, 1.0, -1.0) if scores.shape[1] == 1
                else scores.argmax(axis=1).astype(np.float64))
        return float(np.average(pred == y, weights=sample_weight))

    def _warn_unconverged(self, converged):
        """scikit-learn's ``ConvergenceWarning`` (``max_iter > 1``, ``tol`` set)."""
        if not converged and self.max_iter > 1:
            warnings.warn(
                f"{type(self).__name__}: maximum number of passes (max_iter="
                f"{self.max_iter}) reached before convergence (tol={self.tol}, "
                f"n_iter_no_change={self.n_iter_no_change}). Consider increasing "
                "max_iter to improve the fit.", ConvergenceWarning, stacklevel=4)

    def _warn_if_worse_than_constant(self, X, y, sample_weight):
        """Warn when the fitted model's training accuracy is below the
        majority class's by more than two standard errors
        (``warn_if_worse_than_constant``)."""
        total_weight = float(np.sum(sample_weight))
        if total_weight <= 0:
            return
        scores = safe_sparse_dot(X, self.coef_.T, dense_output=True) + self.intercept_
        pred = (scores[:, 0] > 0).astype(int) if scores.shape[1] == 1 else scores.argmax(1)
        idx = np.searchsorted(self.classes_, y)
        # (elementwise sums, not np.dot: a threaded BLAS call costs more in
        # waking its threads than the sum)
        accuracy = float(np.sum(sample_weight[pred == idx])) / total_weight
        majority = float(np.max(np.bincount(idx, weights=sample_weight))) / total_weight
        # (the accuracy's standard error with the rows' effective number
        # (sum s)^2 / sum s^2: chance-level data must not warn)
        n_eff = total_weight ** 2 / float(np.sum(np.square(sample_weight)))
        margin = 2.0 * np.sqrt(majority * (1.0 - majority) / n_eff)
        if not accuracy < majority - margin:
            return
        loss_name = getattr(self, "loss", "log_loss")
        total, constant = 0.0, 0.0
        for p, state in enumerate(self._states):
            targets = self._targets(y, p)
            problem_scores = self._problem_scores(state, X)
            total += mean_margin_loss(loss_name, problem_scores, targets, sample_weight)
            constant += best_constant_loss(loss_name, targets, sample_weight,
                                           problem_scores.shape[1])
        warn_if_worse_than_constant(self, total, constant, accuracy, majority)

    def _start_from(self, X, y, sample_weight, coef, intercept):
        """Start every problem from ``coef_init`` / ``intercept_init``.

        A zero-pass kernel call makes the estimator's first-data choices
        (step size, period, ``t0``...) on zero weights and allocates the
        state; the weights are then set (``_set_problem_weights``).
        """
        n_problems, n_outputs = self._problem_count()
        for p, state in enumerate(self._states):
            self._run_problem(X, self._targets(y, p), sample_weight, state, 0)
            if n_outputs > 1:                      # one multinomial problem
                c, b = coef.T.ravel(), intercept
            else:
                row = p if n_problems > 1 else 0
                c, b = coef[row], intercept[row:row + 1]
            self._set_problem_weights(state, np.ascontiguousarray(c, dtype=np.float64),
                                      np.asarray(b, dtype=np.float64))

    def _set_problem_weights(self, state, coef, intercept):
        """Set one started problem's weights: flat C-order ``(n_features,
        n_outputs)`` coefficients and ``(n_outputs,)`` intercepts."""
        kernel = getattr(state, "kernel", None)
        if kernel is not None:                 # PSA: LazyStepState, intercept last
            w = kernel.weights
            w[:coef.size] = coef
            w[coef.size:] = intercept
            # the first window's snapshots theta(0) are the initial weights
            kernel.snaps[:, 0] = w
            kernel.snaps[:, 1] = w
            return
        state.coef[:] = coef
        state.intercept[:] = intercept
        if getattr(state, "v", None) is not None:      # SGD-QN's secant anchor
            state.v[:coef.size] = coef
            state.v[coef.size:] = intercept

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
        return warn_if_implausible(
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

    # ---- deployment -------------------------------------------------------------
    def densify(self):
        """Convert a sparse ``coef_`` (see ``sparsify``) back to a dense array.

        The default format of ``coef_``; ``fit`` and ``partial_fit`` set it.

        Returns
        -------
        self : object
            The estimator, with a dense ``coef_``.
        """
        check_is_fitted(self)
        if sp.issparse(self.coef_):
            self.coef_ = np.ascontiguousarray(self.coef_.toarray())
        return self

    def sparsify(self):
        """Convert ``coef_`` to a scipy.sparse CSR matrix.

        As scikit-learn's ``SGDClassifier.sparsify``: with many zero weights
        (an L1 penalty, or hashed features never seen) the sparse matrix is
        smaller and ``decision_function`` faster. Unlike scikit-learn, later
        ``fit`` / ``partial_fit`` calls still work (they continue the
        training state and set a dense ``coef_`` again); ``densify`` undoes
        it. ``strip_training_state`` drops what only training needs.

        Returns
        -------
        self : object
            The estimator, with a CSR ``coef_``.
        """
        check_is_fitted(self)
        self.coef_ = sp.csr_matrix(self.coef_)
        return self

    def strip_training_state(self):
        """Drop everything but what prediction needs (a deployment-size model).

        Removes the training state (step sizes, snapshots, running averages,
        ``M``, rescalings: several times the size of ``coef_`` for some
        estimators) and the fitted attributes that expose it (``eta_``,
        ``B_``), so that a pickle holds ``coef_``, ``intercept_``,
        ``classes_`` and the small fitted attributes. ``predict``,
        ``decision_function`` and ``predict_proba`` work as before;
        ``partial_fit`` then raises a ``ValueError`` (there is no state to
        continue) and ``fit`` trains a new model (``warm_start`` has nothing
        to continue). Combine with ``sparsify`` for sparse weights.

        Returns
        -------
        self : object
            The estimator, without its training state.
        """
        check_is_fitted(self)
        for name in (*self._private_state, *self._training_attributes):
            vars(self).pop(name, None)
        return self

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

