"""Shared linear-model base: validation, targets, problems and their state.

``LinearModelBase`` holds ``fit`` (input and parameter checks, the rollback
of a refused call, ``coef_init``) and the training state; its mixins hold the
rest: the training loop and stopping rule
(``_training_loop.TrainingLoopMixin``) and deployment
(``_predict.LinearDeploymentMixin``). ``LinearClassifierBase`` adds the
classes, ``partial_fit(X, y, classes)`` and the decomposition into
sub-problems; ``_regression.LinearRegressorBase`` the regressors' one
real-valued output.

Every linear estimator of the package (``PSAClassifier``, ``SGDQNLinearSVC``,
``SBMLogisticRegression``, ``PlainSGDClassifier``, ``PSARegressor``,
``PlainSGDRegressor``) is a thin subclass that declares its parameters and
implements two hooks:

``_init_problem(n_features, n_outputs, seed)``
    The fresh typed state of one sub-problem: the kernel's state object
    (a dataclass of its module in ``_core``), with at least ``t`` (updates
    so far) and ``seed`` (the shuffling RNG state, ``seed`` to start).
``_run_problem(X, y, sample_weight, state, n_epochs)``
    Run the compiled kernel over the rows, updating ``state`` in place, and
    return the number of passes made. ``y`` holds +-1 for binary problems,
    class indices for a multinomial one and the real targets for a regressor.

The base decides the decomposition: one binary problem for two classes,
one multinomial problem when ``_is_multinomial()`` (more than two classes
with a loss the estimator fits jointly), otherwise one-vs-rest with one
binary problem per class, run in parallel threads (``n_jobs``) because the
kernels release the GIL.
"""
import copy
from numbers import Integral, Real

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.utils import check_random_state, compute_class_weight
from sklearn.utils.multiclass import check_classification_targets

from .._compat import (
    Interval,
    StrOptions,
    _check_sample_weight,
    _fit_context,
    validate_data,
    with_unique_labels,
)
from .._penalty import l1_share
from .._threads import check_n_jobs
from .._validation import (
    check_classes_arg,
    check_init_weights,
    check_label_types,
    check_model_memory,
    check_not_stripped,
    draw_seed,
    label_values,
    own_arrays,
    remove_fitted,
    unfit_on_error,
    validation_split,
)
from ._predict import LinearDeploymentMixin, LinearPredictionMixin
from ._training_loop import TrainingLoopMixin


class LinearModelBase(LinearDeploymentMixin, TrainingLoopMixin, BaseEstimator):
    """Base class of the linear models (see the module docstring).

    Subclasses define the targets: ``_validate_xy``, ``_check_targets``,
    ``_set_targets``, ``_same_targets``, ``_n_targets``, ``_problem_count``
    and ``_targets``, and may transform the rows (``_training_rows``).
    """

    _parameter_constraints: dict = {
        "alpha": [Interval(Real, 0, None, closed="neither")],
        "fit_intercept": ["boolean"],
        "max_iter": [Interval(Integral, 1, None, closed="left")],
        "shuffle": ["boolean"],
        "random_state": ["random_state"],
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
    _private_state = ("_states",)
    #: The input dtypes the kernels read in place (``RowDataset`` widens a
    #: float32 row as it is fetched); others are converted to the first.
    _input_dtypes = (np.float64, np.float32)

    # ---- the extension protocol -------------------------------------------------
    # Public methods for code that moves fitted models around (the Dask
    # mixing): they wrap the private export below, the subclasses' hook.
    def rebuild_exported_arrays(self):
        """Recompute the fitted arrays derived from the training state.

        ``coef_`` and ``intercept_``, and the estimator's own (``eta_``,
        ``B_``, ``eta0_``, ...), as every pass exports them. For extensions
        such as the Dask mixing, which sends models without them
        (``drop_exported_arrays``) or changes the state by mixing.

        Returns
        -------
        self : object
            The estimator, ready to predict.
        """
        from .._compat import check_is_fitted  # (the base needs it nowhere else)

        check_is_fitted(self)
        check_not_stripped(self)
        self._export()
        return self

    def drop_exported_arrays(self):
        """Drop the large fitted arrays derived from the training state.

        ``coef_``, ``intercept_`` and the per-weight arrays that expose the
        training state (``eta_``, ``B_``), to send the model lighter;
        ``rebuild_exported_arrays``
        recomputes them from the state, and until then the estimator cannot
        predict. Nothing happens to an unfitted estimator. For extensions
        such as the Dask mixing.

        Returns
        -------
        self : object
            The estimator, without those arrays.
        """
        for name in ("coef_", "intercept_", *self._training_attributes):
            vars(self).pop(name, None)
        return self

    # ---- hooks ----------------------------------------------------------------
    def _init_problem(self, n_features, n_outputs, seed):  # pragma: no cover - abstract
        raise NotImplementedError

    def _run_problem(self, X, y, sample_weight, state, n_epochs):  # pragma: no cover
        raise NotImplementedError

    def _is_multinomial(self):
        """Whether more than two classes are fitted jointly (default: never)."""
        return False

    def _bytes_per_weight(self, n_features, n_outputs):
        """Bytes of training state per weight, for the memory check before
        allocation (``check_model_memory``): by default the weight and its
        copy in ``coef_``."""
        return 16

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

    def _training_rows(self, X, sample_weight, reset):
        """The rows the kernels train on, from the validated ``X`` (default:
        ``X`` itself; ``reset`` on the call that starts the state)."""
        return X

    def _same_targets(self, targets, previous):
        """Whether the targets of a ``fit`` equal ``previous``, the fitted
        ones (``_fitted_targets()``): ``warm_start`` continues only then."""
        return True

    def _fitted_targets(self):
        """What ``warm_start`` compares (default: nothing)."""
        return None

    # ---- fitting --------------------------------------------------------------
    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y, coef_init=None, intercept_init=None, sample_weight=None):
        """Fit the model with up to ``max_iter`` passes over the data.

        Input that is refused leaves a fitted model as it was; if the weights
        overflow during training the estimator is left unfitted. With
        ``warm_start=True`` (same classes and features) ``fit`` starts from
        the current ``coef_`` and ``intercept_``, as ``SGDClassifier``: the
        coefficients are reused, not the schedule, so the fit equals
        ``fit(X, y, coef_init=coef_, intercept_init=intercept_)`` (step
        sizes chosen again, ``t_`` counted from 0). ``partial_fit`` is the
        call that continues the whole training state.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            Training rows (CSR when sparse). float32 rows are read in place,
            without a float64 copy, and ``coef_`` / ``intercept_`` are then
            float32, as ``SGDClassifier``'s (the training state stays
            float64; ``SBMLogisticRegression`` converts to float64).
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
        check_n_jobs(getattr(self, "n_jobs", None))
        l1_share(self)                      # (l1_ratio=None with 'elasticnet')
        init = coef_init is not None or intercept_init is not None
        # SGDClassifier's warm start: the fitted coefficients become
        # coef_init / intercept_init (read now: a refused call keeps them)
        previous = None
        if self.warm_start and not init and hasattr(self, "coef_"):
            previous = (self._fitted_targets(), self._dense_coef(), self.intercept_.copy())
        saved = {k: vars(self)[k] for k in ("n_features_in_", "feature_names_in_")
                 if k in vars(self)}
        try:
            X, y, targets = self._validate_xy(X, y, reset=True)
            self._check_targets(targets)
            sample_weight = self._weights_for(X, y, sample_weight, targets,
                                              allow_balanced=True)
            if (previous is not None and self._same_targets(targets, previous[0])
                    and previous[1].shape[1] == X.shape[1]):
                coef_init = previous[1]
                intercept_init = previous[2] if self.fit_intercept else None
                init = True
            if init:
                init = check_init_weights(coef_init, intercept_init, self._n_targets(targets),
                                          X.shape[1], self.fit_intercept)
            validation = (self._validation_split(y, sample_weight)
                          if self.early_stopping else None)
        except BaseException:
            # refused input: the fitted model (if any) stays as it was
            for k in ("n_features_in_", "feature_names_in_"):
                vars(self).pop(k, None)
            vars(self).update(saved)
            raise
        with unfit_on_error(self, self._private_state):
            self._set_targets(targets)
            self._reset_state(X.shape[1])
            if validation is not None:
                Xv, yv, swv = X[validation], y[validation], sample_weight[validation]
                X, y, sample_weight = X[~validation], y[~validation], sample_weight[~validation]
            # (the held-out rows take no part in what the training rows set up)
            X = self._training_rows(X, sample_weight, reset=True)
            if validation is not None:
                validation = (self._training_rows(Xv, swv, reset=False), yv, swv)
            if init:
                self._start_from(X, y, sample_weight, *init)
            converged, scale_warned = self._fit_epochs(
                X, y, sample_weight, self.max_iter, validation=validation, stop=True)
        if not scale_warned:                          # (one warning is enough)
            self._warn_if_worse_than_constant(X, y, sample_weight)
        self._warn_unconverged(converged)
        return self

    def _check_partial_fit_params(self, first):
        """What ``partial_fit`` refuses whatever its rows, before anything
        changes: on a later call (not ``first``) a stripped model or a
        parameter set badly since; early stopping (as ``SGDClassifier``, it
        needs ``fit``'s held-out rows), an elastic net without ``l1_ratio``,
        a bad ``n_jobs``."""
        if not first:
            check_not_stripped(self)
            # (_fit_context validates a first call only: the parameters may
            # have been set since, and a bad one must not touch the state)
            self._validate_params()
        self._more_validate_params(for_partial_fit=True)
        if getattr(self, "early_stopping", False):
            raise ValueError("early_stopping should be False with partial_fit")
        l1_share(self)
        check_n_jobs(getattr(self, "n_jobs", None))

    def _partial_fit_rows(self, X, y, sample_weight, targets, first):
        """``partial_fit``'s pass once its parameters are checked: the rows
        validated (their labels within ``targets``, the fitted or given
        classes, if any), the state started on the ``first`` call, one pass.
        A refused input leaves the model as it was; a pass that fails leaves
        it unfitted (``unfit_on_error``)."""
        try:
            X, y, labels = self._validate_xy(X, y, reset=first)
            if targets is not None:
                unseen = np.setdiff1d(labels, targets)
                if unseen.size:
                    raise ValueError(f"y contains labels not in classes_ {targets!r}: "
                                     f"{unseen[:5]!r}")
            sample_weight = self._weights_for(X, y, sample_weight, targets,
                                              allow_balanced=False)
        except BaseException:
            if first:                     # nothing to keep: no half-set attributes
                remove_fitted(self, self._private_state)
            raise
        with unfit_on_error(self, self._private_state, continued=not first):
            if first:
                self._set_targets(targets)
                self._reset_state(X.shape[1])
            else:
                own_arrays(self._states)      # e.g. loaded with mmap_mode='r'
            X = self._training_rows(X, sample_weight, reset=first)
            self._fit_epochs(X, y, sample_weight, 1)
        return self

    def _dense_coef(self):
        """A float64 copy of ``coef_``, dense also after ``sparsify()``."""
        coef = self.coef_.toarray() if hasattr(self.coef_, "toarray") else self.coef_
        return np.array(coef, dtype=np.float64)

    def _reset_state(self, n_features):
        n_problems, n_outputs = self._problem_count()
        check_model_memory(self, n_features, n_problems * n_outputs,
                           self._bytes_per_weight(n_features, n_outputs))
        rng = check_random_state(self.random_state)
        self._states = []
        for _ in range(n_problems):
            self._states.append(self._init_problem(n_features, n_outputs, draw_seed(rng)))
        self.t_ = 0
        self.n_iter_ = 0

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
        n_outputs)`` coefficients and ``(n_outputs,)`` intercepts (an
        estimator whose state holds more than ``coef`` / ``intercept``
        overrides this)."""
        state.coef[:] = coef
        state.intercept[:] = intercept

    @classmethod
    def mix(cls, models, weights, start=None):
        """Mix models trained on shards of the rows into one (parameter mixing).

        Every sub-problem's state is combined by the estimator's rule for its
        state (``_mix_states``, which calls the ``mix_*`` function beside the
        state's kind: weighted means of the weights, summed increments of the
        counters and statistics, ``sklearn_secondorder._mixing``).

        Parameters
        ----------
        models : sequence of estimators of this class
            Fitted with the same parameters and classes, each continued from
            ``start`` on its own shard of the rows.
        weights : sequence of float
            Each model's share of the rows (summing to 1).
        start : estimator or None, default=None
            The model they all continued from; None when each started fresh
            (zero weights, ``t = 0``).

        Returns
        -------
        mixed : estimator
            A new fitted estimator (``n_iter_ = 1``, ``t_`` the updates of all
            the models together); the inputs are not modified.
        """
        est = copy.deepcopy(models[0])
        for k in range(len(est._states)):
            est._states[k] = est._mix_states([m._states[k] for m in models], weights,
                                             None if start is None else start._states[k])
        est.t_ = int(max(s.t for s in est._states))
        est.n_iter_ = 1
        est._export()
        return est

    def _mix_states(self, states, weights, start):  # pragma: no cover - abstract
        raise NotImplementedError

    def _export(self):
        """Set ``coef_`` (n_problems or n_classes, n_features) and ``intercept_``."""
        coefs, intercepts = [], []
        for state in self._states:
            coef, intercept = self._final_weights(state)
            K = intercept.size
            coefs.append(np.asarray(coef).reshape(-1, K).T)
            intercepts.append(np.asarray(intercept))
        dtype = getattr(self, "_coef_dtype", np.float64)
        self.coef_ = np.ascontiguousarray(np.vstack(coefs), dtype=dtype)
        self.intercept_ = np.concatenate(intercepts).astype(dtype, copy=False)


class LinearClassifierBase(LinearPredictionMixin, ClassifierMixin, LinearModelBase):
    """Base class of the linear classifiers (see the module docstring).

    Subclasses set ``_probabilistic_losses`` (losses with ``predict_proba``)
    and may override ``_is_multinomial``.
    """

    _parameter_constraints: dict = {
        **LinearModelBase._parameter_constraints,
        "class_weight": [StrOptions({"balanced"}), dict, None],
    }

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
        self._check_partial_fit_params(first)
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
        return self._partial_fit_rows(X, y, sample_weight, all_classes, first)

    def _check_classes(self, classes):
        """The ``classes`` argument of ``partial_fit`` (``check_classes_arg``),
        at least two."""
        classes = check_classes_arg(classes)
        self._check_n_classes(classes)
        return classes

    def _validate_xy(self, X, y, reset):
        check_label_types(y, "y")
        X, y = validate_data(self, X, y, accept_sparse="csr", dtype=list(self._input_dtypes),
                             order="C", reset=reset)
        classes = label_values(y)
        check_classification_targets(with_unique_labels(y, classes))
        # scikit-learn's rule (SGDClassifier): coef_ takes the training rows'
        # float dtype; the kernels' state stays float64
        self._coef_dtype = X.dtype
        return X, y, classes

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

    def _targets(self, y, problem):
        """Kernel targets of one problem: +-1, or class indices (multinomial)."""
        n_problems, n_outputs = self._problem_count()
        if n_outputs > 1:
            return np.searchsorted(self.classes_, y).astype(np.float64)
        # (y holds classes_ only: one comparison, without the search)
        positive = 1 if n_problems == 1 else problem
        return np.where(y == self.classes_[positive], 1.0, -1.0)

    def _check_targets(self, classes):
        self._check_n_classes(classes)

    def _set_targets(self, classes):
        self.classes_ = classes

    def _fitted_targets(self):
        return self.classes_

    def _same_targets(self, targets, previous):
        return np.array_equal(targets, previous)

    def _n_targets(self, classes):
        return classes.size

    def _validation_split(self, y, sample_weight):
        """The held-out rows of ``early_stopping``, stratified by class."""
        return validation_split(y, sample_weight, self.validation_fraction,
                                self.random_state)
