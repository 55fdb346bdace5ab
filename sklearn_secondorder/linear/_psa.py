"""PSAClassifier: periodic step-size adaptation for linear classifiers."""
import copy
from dataclasses import dataclass
from numbers import Integral, Real

import numpy as np
import scipy.sparse as sp

from .._calibration import calibrate_linear_eta0
from .._compat import Interval, StrOptions
from .._core._lazy_steps import LazyStepState, PSAOptions, catch_up_state, record_dtype
from .._core._losses import LOSSES
from .._core._psa_fast import eager_pass_applies, psa_epochs
from .._mixing import mix_lazy_steps
from .._penalty import PENALTY_CONSTRAINTS, l1_share, split_alpha
from .._validation import check_psa_factors, diverged_error, remove_fitted, store_init_params
from ._base import LinearClassifierBase


class PSAKernelMixin:
    """PSA's training state and passes, shared by ``PSAClassifier`` and
    ``PSARegressor``: the hooks of ``LinearModelBase`` on the lazy core
    (``_core._psa_fast.psa_epochs`` over ``LazyStepState``), the threads'
    shared pass, a stream of ``partial_fit`` calls and the mixing.

    The estimator gives ``_loss_object(n_outputs)`` and may give
    ``_column_scale`` (per-column scales the step sizes start from) and
    ``_bound_steps`` (regression's bounded steps).
    """

    @staticmethod
    def auto_period(n_samples):
        """The period ``b`` that ``period='auto'`` takes for ``n_samples`` rows.

        The paper's guideline (Section 5.1.4), ``b ~ 0.5 |D| / 1000``, at
        least 10. ``fit`` takes ``|D|`` from its rows and ``partial_fit``
        from its first call's; a stream that knows its whole size (the
        ``skso`` command line) passes it here.

        Parameters
        ----------
        n_samples : int
            The rows of the data set ``|D|``.

        Returns
        -------
        period : int
            The period ``b``.
        """
        return max(10, int(round(0.5 * n_samples / 1000)))

    #: Whether a step moves its row's prediction at most to the target
    #: (the regressors: ``_core._numeric.bound_step``).
    _bound_steps = False

    #: PSA's own parameters (the paper's ``b``, ``eta0``, ``alpha``, ``beta``,
    #: ``kappa``) and the penalty, as every PSA estimator takes them.
    _psa_constraints = {
        "period": [StrOptions({"auto"}), Interval(Integral, 1, None, closed="left")],
        "eta0": [StrOptions({"auto"}), Interval(Real, 0, None, closed="neither")],
        "psa_alpha": [Interval(Real, 0, 1, closed="neither")],
        "psa_beta": [Interval(Real, 0, 1, closed="neither")],
        "psa_kappa": [Interval(Real, 0, 1, closed="neither")],
        **PENALTY_CONSTRAINTS,
    }

    def _column_scale(self, X, sample_weight):
        """Per-column scales ``s_j``: the step sizes start at ``eta0 / s_j^2``
        (None: every one at ``eta0``)."""
        return None

    def _more_validate_params(self, for_partial_fit=False):
        check_psa_factors(self)

    def _bytes_per_weight(self, n_features, n_outputs):
        # LazyStepState's record per feature (its weights, step sizes,
        # snapshots and time; 32 bytes a binary weight, 64 with L1), and coef_
        record = record_dtype(n_outputs, l1=l1_share(self) > 0).itemsize
        return -(-record // n_outputs) + 8

    def _set_problem_weights(self, state, coef, intercept):
        # LazyStepState: the intercept after the coefficients; a window
        # starts at the initial weights
        state.kernel.set_weights(np.concatenate([np.ravel(coef), np.ravel(intercept)]))

    def _init_problem(self, n_features, n_outputs, seed):
        return _PSAProblem(n_features=n_features, n_outputs=n_outputs, seed=seed)

    # the threads share the one state (psa_epochs with threads): each owns a
    # part of the blocks; no copies, no mix
    _threads_share_state = True

    def _shares_passes(self, state, n_threads):
        # a small model's eager pass on one thread costs less than the lazy
        # passes on several
        return not eager_pass_applies((state.n_features + 1) * state.n_outputs,
                                      l1_share(self) > 0)

    def _run_problem(self, X, y, sample_weight, problem, n_epochs, threads=None):
        K = problem.n_outputs
        loss = self._loss_object(K)
        if sp.issparse(X) and not X.has_canonical_format:
            # a feature listed twice in a row is one coordinate (their sum):
            # the kernel steps and shrinks each listed block once per update
            X = X.copy()
            X.sum_duplicates()
        lam, l1 = split_alpha(self)
        if problem.kernel is None:  # first call: choose b and eta0, allocate
            if self.period == "auto":
                problem.period = self.auto_period(X.shape[0])
            else:
                problem.period = int(self.period)
            scale = self._column_scale(X, sample_weight)
            eta0 = self.eta0
            if eta0 == "auto":
                eta0 = calibrate_linear_eta0(
                    X, y, sample_weight, np.zeros(problem.n_features * K), np.zeros(K),
                    loss=loss, n_outputs=K, lam=lam, fit_intercept=self.fit_intercept,
                    random_state=np.random.RandomState(problem.seed), l1=l1,
                    column_scale=scale, bound_steps=self._bound_steps,
                    held_out=self._bound_steps)
            problem.kernel = LazyStepState.zeros(problem.n_features + 1, K, eta0,
                                                 seed=problem.seed, l1=l1 > 0)
            if scale is not None:
                problem.kernel.set_weights(
                    np.zeros((problem.n_features + 1) * K),
                    np.repeat(np.append(eta0 / np.square(scale), eta0), K))
        if l1 > 0:
            problem.kernel.with_l1()                # (an L2 state, now with L1)
        stream = getattr(self, "_stream", None)
        margins = None
        if stream is not None:
            margins = np.zeros(X.shape[0] * K)
            stream.margins[self._problem_index(problem)] = margins
        result = psa_epochs(self._row_dataset(X, y, sample_weight), problem.kernel,
                            self._options(problem), loss=loss, n_epochs=n_epochs,
                            shuffle=self.shuffle, fit_intercept=self.fit_intercept,
                            threads=threads, margins=margins, flush=stream is None,
                            bound_steps=self._bound_steps)
        if result.diverged or (margins is not None and not np.isfinite(margins).all()):
            raise diverged_error(type(self).__name__, result.epochs)
        return result.epochs

    def _options(self, problem):
        lam, l1 = split_alpha(self)
        return PSAOptions(lam=lam, period=problem.period, psa_alpha=self.psa_alpha,
                          psa_beta=self.psa_beta, kappa=self.psa_kappa, l1=l1)

    def _problem_index(self, problem):
        return next(p for p, state in enumerate(self._states) if state is problem)

    # ---- a stream of partial_fit calls (the skso command line) ---------------------
    def begin_stream(self):
        """Start a stream of ``partial_fit`` calls that only its end reads.

        Within it each call records its rows' decision scores (a regressor's
        predictions) before their update: progressive validation without
        another pass over the rows. No call brings the blocks its rows did
        not touch up to time (the next call, or the stream's end, does), nor
        exports ``coef_``: a call then costs its rows, not the
        ``n_features`` of the model. The parameters must not change until
        ``end_stream``, and the estimator cannot predict in between. The
        streaming protocol of the ``skso`` command line.

        Returns
        -------
        stream : object
            Its ``scores(n_rows)`` gives the last call's scores before each
            row's update, shaped as ``decision_function``'s (a regressor's:
            ``(n_rows,)``).
        """
        if self.verbose:
            raise ValueError("a stream of calls does not print its passes: set verbose=0")
        self._stream = _Stream()
        return self._stream

    def end_stream(self):
        """End a stream of ``partial_fit`` calls (``begin_stream``).

        Every block is brought to time and ``coef_`` exported and checked, as
        at the end of a ``partial_fit`` call. Nothing happens without a
        stream or a fitted state.

        Returns
        -------
        self : object
            The estimator, ready to predict.
        """
        stream = vars(self).pop("_stream", None)
        if stream is None or not hasattr(self, "_states"):
            return self
        for problem in self._states:
            if problem.kernel is not None:
                catch_up_state(problem.kernel, self._options(problem), problem.kernel.t,
                               unregularized=problem.n_features)
        self._export()
        if not np.isfinite(self.coef_).all() or not np.isfinite(self.intercept_).all():
            remove_fitted(self, self._private_state)
            raise diverged_error(type(self).__name__, 1)
        self._check_weight_scale(stream.mean_weight())
        return self

    def _final_weights(self, problem):
        d, K = problem.n_features, problem.n_outputs
        w = problem.kernel.weights          # (a copy: its parts need none)
        return w[: d * K], w[d * K:]

    def _mix_states(self, states, weights, start):
        return mix_psa_problems(states, weights, start)

    def _mix_shards(self, states, weights, start):
        # (the threads' states are the fit's own: the first takes the mix)
        return mix_psa_problems(states, weights, start, reuse_first=True)

    def _shuffle_seed(self, problem):
        return problem.kernel.seed

    def _set_shuffle_seed(self, problem, seed):
        problem.kernel.seed = seed

    def _export(self):
        super()._export()
        self.period_ = self._states[0].period
        self.eta0_ = float(self._states[0].kernel.eta0)
        # (step_sizes is a copy: one problem's needs no stacking copy)
        etas = [p.kernel.step_sizes.reshape(1, p.n_features + 1, p.n_outputs)
                for p in self._states]
        self.eta_ = etas[0] if len(etas) == 1 else np.concatenate(etas)

class PSAClassifier(PSAKernelMixin, LinearClassifierBase):
    """Linear classifier trained by Periodic Step-size Adaptation (PSA).

    SGD with one step size per weight, adapted every ``2b`` updates from an
    estimate of the Jacobian's eigenvalues (Hsu, Chang, Huang and Lee,
    Algorithm 1): from the snapshots ``w(t)``, ``w(t+b)``, ``w(t+2b)``,

    - ``gamma_i = (w_i(t+2b) - w_i(t+b)) / (w_i(t+b) - w_i(t))`` (Eq. 6),
    - ``u_i = sign(gamma_i) min(|gamma_i|, kappa)`` (Eq. 7),
    - ``eta_i *= (m + u_i) / (m + kappa + n)`` (Eqs. 8-9), with
      ``m = kappa (a+b)/(a-b)`` and ``n = 2 kappa (1-a)/(a-b)`` for the
      paper's ``(a, b) = (psa_alpha, psa_beta)`` (Eq. 10), so every factor
      lies in ``[psa_beta, psa_alpha]``.

    Each update is ``w <- (1 - eta o alpha) w - eta o grad loss`` on one row
    (with an L1 penalty, the shrink by ``alpha (1 - l1_ratio)`` and then
    Tsuruoka et al.'s cumulative penalty, each weight owed
    ``alpha l1_ratio`` times the sum of its own steps).
    Coordinates a row does not touch are caught up lazily (the L2 decay and
    the window-end adaptation in closed form), so a step costs O(nnz) on
    sparse data. A weight that did not move in a window (``0/0``) keeps its
    step size; one moved only by the L2 shrink gets the shrink's ratio.
    One pass (``max_iter=1``) is the point: the paper's claim is that it
    lands near the empirical optimum.

    The update is `sklearn_secondorder._core._psa_fast.psa_epochs` on the
    lazy core ``_core/_lazy_steps.pxd`` (one record per weight: the weight,
    its step size, the window's snapshots; ``step_weight`` is Algorithm 1's
    line 5, ``apply_event`` lines 6-10); the step-size factor (Eqs. 6-10) is
    ``skso_psa_factor`` in ``_core/_psa_math.h``. The step sizes and the
    first half-window's move are kept in float32: one pass gives the same
    accuracy as in float64 (``benchmarks/psa_accuracy.py``).

    Parameters
    ----------
    loss : {'log_loss', 'squared_hinge', 'hinge', 'modified_huber'}, default='log_loss'
        Multiclass ``log_loss`` fits one multinomial (softmax) model; the
        other losses are fitted one-vs-rest.
    penalty : {'l2', 'l1', 'elasticnet'}, default='l2'
        The penalty, with scikit-learn's ``SGDClassifier`` meaning: the term
        ``alpha (l1_ratio ||w||_1 + (1 - l1_ratio)/2 ||w||^2)`` (``'l2'`` is
        ``l1_ratio = 0``, ``'l1'`` is ``l1_ratio = 1``). The L1 part is
        Tsuruoka, Tsujii and Ananiadou's cumulative penalty (ACL 2009) on
        each weight's own steps: a weight is owed ``alpha l1_ratio`` times the
        sum of its step sizes since it was last caught up (in closed form
        with the L2 decay), and is caught up when a row reads it and at the
        end of each call, so ``coef_`` holds exact zeros. The result is the
        dense algorithm's (every weight penalised at every step) to rounding.
    alpha : float, default=1e-4
        Strength of the penalty (the paper's ``lambda`` with
        ``penalty='l2'``: ``alpha/2 ||w||^2 + mean loss``; the intercept is
        not penalised).
    l1_ratio : float, default=0.15
        The L1 share of ``alpha`` with ``penalty='elasticnet'`` (in ``[0, 1]``;
        unused otherwise).
    period : int or 'auto', default='auto'
        The paper's ``b``. ``'auto'`` follows the paper's guideline
        (Section 5.1.4): ``b ~ 0.5 |D| / 1000``, at least 10, with ``|D|`` the
        rows of the first ``fit`` / ``partial_fit`` call.
    eta0 : 'auto' or float, default='auto'
        Initial step size of every weight. ``'auto'`` calibrates it on 1000
        rows (Bottou's recipe: constant-step trial passes, doubling or
        halving, best halved), as the paper does for linear models. A weight
        whose ``eta alpha >= 1`` decays to zero at each step (the factor
        ``1 - eta alpha`` is clipped at 0, as ``SGDClassifier``'s shrink), so
        any ``alpha`` fits.
    psa_alpha : float, default=0.9999
        The paper's ``alpha``: the largest step-size factor.
    psa_beta : float, default=0.99
        The paper's ``beta``: the smallest step-size factor.
    psa_kappa : float, default=0.9
        The paper's ``kappa``: the clip on the eigenvalue estimate.
    fit_intercept : bool, default=True
        Whether to fit an intercept (not penalised).
    max_iter : int, default=1
        Passes over the data in ``fit`` (at most, with ``tol``). One pass is
        PSA's point (Hsu et al.: a single pass lands near the empirical
        optimum), so the default is 1, not ``SGDClassifier``'s 1000; the
        package's other linear estimators make 5.
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
        share every pass and the one state: each thread owns the weights of
        a share of the features (a hash of their cache line), which it alone
        reads and writes; the rows go by in rounds of ``32 n_jobs`` rows (cut
        at the step-size events), each row scored at the weights of its
        round's start, then stepped in order, every thread on its own
        weights (``_core._psa_fast.SharedPass``). That is Algorithm 1 with a
        row's score up to ``32 n_jobs - 1`` updates stale (and at most the
        period: a round never spans a step-size event), not the one-thread
        model: one pass at ``n_jobs=2`` on CoNLL-2000 tokens
        hashed to 2^20 columns (I-NP against the rest) scored 97.90% test
        accuracy, as one thread (three seeds), and fitted 0.87-1.2x as fast
        on a shared 2-core machine, where one thread's fit takes 0.15 s,
        each thread still reads every row and a thread that loses its core
        holds the other at the next round (see "Threads on one model" in
        the user guide): time it before choosing ``n_jobs > 1`` there. A
        given ``n_jobs`` and ``random_state`` give the same model bit for
        bit; None and 1 are one thread, the model of earlier
        releases. With several one-vs-rest problems the threads fit the
        classes side by side instead, the model of one thread (None then
        follows a ``joblib.parallel_config`` context). -1 means all the
        cores, -2 all but one; 0 or a non-int is a ValueError. The threads
        need no memory beyond the one state's.
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

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
        The class labels, sorted.
    coef_ : ndarray of shape (1, n_features) or (n_classes, n_features)
        The weights: one row for two classes, else one per class.
    intercept_ : ndarray of shape (1,) or (n_classes,)
        The intercepts (zero when ``fit_intercept=False``).
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
        The initial step size in use (``eta0``, or the one ``'auto'``
        calibrated on the first call).
    eta_ : ndarray of shape (n_problems, n_features + 1, n_outputs)
        Current step sizes (the last row belongs to the intercept).

    See Also
    --------
    sklearn.linear_model.SGDClassifier : Plain SGD (scikit-learn).
    PlainSGDClassifier : The same core without step-size adaptation.

    References
    ----------
    C.-N. Hsu, Y.-M. Chang, H.-S. Huang and Y.-J. Lee. Periodic step-size
    adaptation for single-pass on-line learning. NIPS 2009; and the Machine
    Learning journal version (Algorithm 1, Eqs. 6-10).

    Examples
    --------
    >>> from sklearn.datasets import load_breast_cancer
    >>> from sklearn.preprocessing import scale
    >>> from sklearn_secondorder import PSAClassifier
    >>> X, y = load_breast_cancer(return_X_y=True)
    >>> X = scale(X)
    >>> clf = PSAClassifier(random_state=0).fit(X, y)
    >>> clf.n_iter_, clf.eta_.shape     # one pass; a step size per weight and the bias
    (1, (1, 31, 1))
    >>> clf.score(X, y) > 0.95
    True
    """

    _parameter_constraints = {
        **LinearClassifierBase._parameter_constraints,
        **PSAKernelMixin._psa_constraints,
        "loss": [StrOptions(set(LOSSES))],
    }

    def __init__(self, loss="log_loss", *, penalty="l2", alpha=1e-4, l1_ratio=0.15,
                 period="auto", eta0="auto", psa_alpha=0.9999, psa_beta=0.99,
                 psa_kappa=0.9, fit_intercept=True, max_iter=1, shuffle=True,
                 random_state=None, class_weight=None, warm_start=False, n_jobs=None,
                 verbose=0, tol=None, n_iter_no_change=5, early_stopping=False,
                 validation_fraction=0.1):
        store_init_params(self, locals())

    def _is_multinomial(self):
        return self.loss == "log_loss"

    def _loss_object(self, n_outputs):
        return LOSSES[self.loss]() if n_outputs == 1 else None


class _Stream:
    """What a stream's calls record (``PSAClassifier.begin_stream``): the
    last call's scores per problem, and the sample weights so far."""

    def __init__(self):
        self.margins = {}
        self.weight_sum = 0.0
        self.rows = 0

    def scores(self, n_rows):
        """The last call's decision scores before each row's update, shaped as
        ``decision_function``'s: ``(n_rows,)`` for one binary problem, else
        ``(n_rows, n_outputs or n_problems)``."""
        parts = [self.margins[p].reshape(n_rows, -1) for p in sorted(self.margins)]
        scores = parts[0] if len(parts) == 1 else np.hstack(parts)
        return scores.ravel() if scores.shape[1] == 1 else scores

    def mean_weight(self):
        return self.weight_sum / self.rows if self.rows else 1.0


@dataclass
class _PSAProblem:
    """One PSA sub-problem: its period and the kernel state, allocated on the
    first pass (``eta0`` may be calibrated on its rows)."""

    n_features: int
    n_outputs: int
    seed: int
    period: int = 0
    kernel: LazyStepState = None

    @property
    def t(self):
        return 0 if self.kernel is None else self.kernel.t


def mix_psa_problems(states, weights, start=None, *, reuse_first=False):
    """Mix PSA sub-problems trained on shards of the rows.

    The kernel states are mixed by ``sklearn_secondorder._mixing.mix_lazy_steps``
    (weights averaged, step sizes averaged geometrically, ``t`` summed, a new
    adaptation window at the mixed weights); the period is the first
    problem's (all are equal when the models share their parameters).

    Parameters
    ----------
    states : sequence of _PSAProblem
        One per model, each continued from ``start`` and past its first pass
        (its kernel state allocated).
    weights : sequence of float
        The models' shares of the rows.
    start : _PSAProblem or None, default=None
        The problem the models started from (None: a fresh start).
    reuse_first : bool, default=False
        Write the mix into the first problem's kernel state (the caller owns
        it and no longer needs it) instead of a copy.

    Returns
    -------
    mixed : _PSAProblem
        A new problem; the inputs are not modified (but for the first
        kernel state with ``reuse_first``).
    """
    out = copy.copy(states[0])
    out.kernel = mix_lazy_steps([s.kernel for s in states], weights,
                                None if start is None else start.kernel,
                                out=states[0].kernel if reuse_first else None)
    return out
