"""Stochastic bound majorization for (multinomial) logistic regression."""
import copy
from numbers import Integral, Real

import numpy as np
import scipy.sparse as sp
from threadpoolctl import ThreadpoolController

from .._compat import Interval, StrOptions
from .._core._sbm_bound import SBMOptions
from .._core._sbm_full import FullRankState, batch_route, full_epochs
from .._core._sbm_lowrank import LowRankState, lowrank_epochs
from .._core._sbm_team import team_route
from .._mixing import sum_increments, weighted_mean
from .._penalty import check_l2_only
from .._validation import diverged_error, store_init_params
from ._base import LinearClassifierBase

_CONTROLLER = None


def _one_blas_thread():
    """Limit BLAS to one thread: the kernel's calls are small (P x P x K), threads
    only contend. The controller is built once (building it scans the loaded libraries)."""
    global _CONTROLLER
    if _CONTROLLER is None:
        _CONTROLLER = ThreadpoolController()
    return _CONTROLLER.limit(limits=1, user_api="blas")


#: Memory budget of the full-rank ``M = Sigma^-1`` (bytes; with batches
#: refactored by Cholesky, of ``M``, ``Sigma`` and its factor). Above it,
#: ``rank=None`` is refused and a low rank is suggested.
FULL_RANK_MAX_BYTES = 2 ** 30
#: ``rank='auto'`` fits at full rank while ``M`` takes at most this many
#: bytes (``P <= 2048``): an example costs ``O(K P^2)`` at full rank, about
#: 4e6 multiply-adds at that size, the most a default should spend per row.
AUTO_FULL_RANK_MAX_BYTES = 2 ** 25
#: The low rank ``k`` of ``rank='auto'`` above that budget.
AUTO_RANK = 5
#: ``low_rank_head='auto'`` takes the lazy head from this many head
#: coordinates ``H = K (rank_features + fit_intercept)`` on: the dense head's
#: ``O(r k H)`` merges (``r <= K`` factors an example) then cost more than the
#: lazy head's ``O(k K nnz + r k^4)`` plus its looser bound (with 22 classes and
#: ``H = 1430``, one dense pass took as long as about three lazy ones in
#: ``benchmarks/RESULTS.md``, SBM).
AUTO_LAZY_HEAD_MIN_COORDS = 1024
#: ``n_t``, the rows the regulariser ``lam = n_t alpha`` and the default step
#: ``eta = 1 / n_t`` are sized for, starts at ``FIRST_BLOCK`` and doubles
#: whenever the rows seen reach it (see ``SBMLogisticRegression``, Notes).
FIRST_BLOCK = 128


class SBMLogisticRegression(LinearClassifierBase):
    """L2-regularised logistic regression by stochastic bound majorization.

    Choromanska & Jebara's stochastic second-order method. For each example
    the quadratic upper bound of its log-partition function (Algorithm 1) is
    formed at the current weights; its curvature ``Sigma_j`` is added to
    ``Sigma = lam I + sum_j Sigma_j`` whose inverse ``M`` is kept up to date,
    the example's gradient is added to ``mu``, and ``theta -= eta M mu``
    (Algorithm 2). ``M mu`` is the batch majorization step (Eq. 2) over the
    examples seen so far.

    The objective is scikit-learn's
    ``mean_i s_i log_loss_i + alpha/2 ||w||^2`` (that of
    ``LogisticRegression(C=1/(alpha n))`` and ``SGDClassifier(alpha=alpha)``);
    the paper's sum form has ``lambda = n alpha``. The paper sizes
    ``lambda`` and its step ``eta = 1/n`` by the data set's ``n``, which a
    stream does not know: here ``n`` is ``n_t``, the rows seen so far
    rounded up to ``128 * 2^k`` (``lam = n_t alpha`` inside ``M``, ``eta =
    1/n_t``; each doubling adds ``alpha n_t`` to ``Sigma``). ``fit`` on
    fewer than 128 rows starts at their count, the paper's ``n``;
    ``partial_fit``, a stream whose size is unknown, starts at 128 whatever
    its first chunk. The schedule then depends only on the rows seen, so
    ``partial_fit`` over chunks of any sizes gives the model of
    ``fit(max_iter=1, shuffle=False)`` on the same rows in the same order
    when they number at least 128: exactly with ``batch_size=1``, at full
    and at low rank (whose head comes from the first chunk: the same head
    when its most frequent features are those of all the rows). They
    differ on fewer than 128 rows (``fit``'s ``n_t`` is their count), and
    with ``batch_size > 1``, as a batch ends with its call (200 rows, 12
    features, four chunks of 50 against one pass: decision values equal
    with ``batch_size=1``, 0.23 apart relative to the largest with
    ``batch_size=32``). The later passes of one ``fit`` repeat rows and
    keep ``n_t`` (``update='paper'``); ``update='surrogate'`` counts every
    visit. On a9a one pass
    so sized was 0.27 and 0.37 points more accurate than with ``n`` fixed in
    advance (two row orders, ``shuffle=False``). The intercept is not
    penalised.

    Two classes give the logistic model ``f(-1) = 0, f(+1) = x``; more give
    the multinomial model ``f(y) = e_y (x) x``, whose per-example curvature is
    ``S_j (x) x x^T`` with a ``K x K`` matrix ``S_j`` (used as such: one rank-K
    Woodbury step per example instead of K Sherman-Morrison steps).

    The update is ``_core._sbm_full.full_pass`` at full rank (per example
    ``absorb_curvature`` puts the curvature into ``M``, ``add_gradient`` the
    gradient into ``mu``; ``full_step`` moves ``theta``) and
    ``_core._sbm_lowrank.lowrank_example`` with the head's step
    (``HeadOps.step``: Woodbury on the dense head) at low rank; Algorithm 1
    is ``_core._sbm_bound.partition_bound``. The contributors' walkthrough
    (``doc/internals/sbm_walkthrough.md``) follows ``alpha`` and one row
    along this path.

    Parameters
    ----------
    alpha : float, default=1e-4
        L2 strength (the paper's ``lambda / n``).
    rank : 'auto', int or None, default='auto'
        ``'auto'``: full rank when ``M`` fits in
        :data:`AUTO_FULL_RANK_MAX_BYTES` (32 MiB, ``P <= 2048``), else the
        low rank :data:`AUTO_RANK` (5), so that wide sparse data (hashed
        text) fit out of the box; ``rank_`` tells which was used.
        ``None``: full rank, ``M`` is a dense ``P x P`` matrix with
        ``P = K (n_features + fit_intercept)`` (``K = 1`` for two classes,
        else the number of classes) and each example costs ``O(K P^2)``;
        refused above :data:`FULL_RANK_MAX_BYTES`. An integer ``k``: the
        low-rank bound ``Sigma <= V^T S V + D`` (Section 3.2) with ``V`` of
        ``k`` rows, inverted by Woodbury; the components dropped when a new
        term is merged are folded into ``D`` by
        ``v v^T <= ||v||_1 diag(|v|)`` (or ``||v||^2 I``: ``low_rank_head``),
        so the quadratic stays an upper bound.
    rank_features : int, default=64
        Low rank only: ``V`` spans the ``rank_features`` most frequent
        features of the first training data (all outputs, and the
        intercept); the other features get a diagonal bound (their part of
        ``x x^T`` is split off by ``(a+b)(a+b)^T <= (1+g) a a^T + (1+1/g) b b^T``
        and bounded by ``||b||_1 diag(|b|)``), which makes the cost of an
        example independent of their number. With every feature in the head
        this is the paper's low-rank method.
    low_rank_head : {'auto', 'dense', 'lazy'}, default='auto'
        Low rank only: how the head's bound ``V^T S V + D`` is kept.
        ``'dense'``: ``D`` per coordinate (the folding above), every head
        coordinate stepped at every step, ``O(k H)`` an example for ``H =
        K (rank_features + fit_intercept)`` head coordinates. ``'lazy'``:
        ``D = delta I`` (a dropped direction ``b`` by ``b b^T <= ||b||^2 I``:
        looser, its curvature lands on every head coordinate), which lets
        every head coordinate follow one shared recurrence between its
        touches and ``V`` be kept as ``P V~`` (the scale trick with a ``k x k``
        ``P``): ``O(k K nnz + r k^4)`` an example whatever ``H``, the head
        made explicit every ``H`` steps. ``'auto'``: lazy from
        :data:`AUTO_LAZY_HEAD_MIN_COORDS` (1024) head coordinates on.
    update : {'paper', 'surrogate'}, default='paper'
        ``'paper'``: Algorithm 2 (``mu`` sums the gradients of every example at
        the weights it was seen at; ``theta -= eta M mu``). ``'surrogate'``
        (full rank only): the same bounds and the same ``M``, but each example's
        bound is kept as a quadratic surrogate and ``theta`` moves towards the
        minimiser of their sum plus the regulariser (incremental
        majorization-minimisation): the stale gradient of example ``s`` is
        corrected by ``Sigma_s (theta - theta_s)``, which for ``f(y) = e_y (x) x``
        costs O(K nnz). With ``eta = 0`` both give the same ``phi`` (Eq. 2).
        The regulariser's curvature grows with the rows seen (``lam`` per
        ``n`` rows), so the surrogate keeps the objective's proportions.
    eta : float or None, default=None
        Step ``theta -= eta phi``. ``None`` uses the paper's ``1/n`` with
        ``n = n_t`` (the rows seen so far, rounded up to ``128 * 2^k``) with
        ``update='paper'`` (``batch_size / n``, at most 1, with batches: one
        step per batch moves as far as the batch's steps would), and 1 (a
        full step to the surrogate's minimiser) with ``update='surrogate'``.
    batch_size : int, default=1
        Examples between two steps on ``theta`` (Algorithm 2 with
        mini-batches: the bound of every example of a batch is formed at
        the same weights). ``M`` after a batch is the same as with one
        Sherman-Morrison step per term, but it is computed with BLAS-3 at
        once: one rank-``B r`` Woodbury step, or (when the batch's rank is
        not small against ``P``) the batch's terms added to ``Sigma`` and a
        Cholesky refactorisation, which keeps ``Sigma`` besides ``M`` (twice
        the memory). ``batch_size=1`` is Algorithm 2 as printed; a few
        hundred rows make a full-rank pass cost a few SGD epochs (``update=
        'surrogate'`` loses little per pass to batching, see Notes).
    fit_intercept : bool, default=True
        Whether to fit an intercept (not penalised; its curvature starts at
        ``lam`` like every coordinate's).
    max_iter : int, default=5
        Passes over the data in ``fit`` (at most, with ``tol``): a small
        fixed budget, the same for every linear estimator of the package but
        ``PSAClassifier`` (1), instead of ``SGDClassifier``'s 1000 with
        ``tol=1e-3``.
    shuffle : bool, default=True
        Shuffle the rows before each pass.
    random_state : int, RandomState instance or None, default=None
        Seeds the shuffles; an int gives reproducible fits.
    class_weight : dict, 'balanced' or None, default=None
        Weight of each class, multiplied into ``sample_weight``:
        ``{label: weight}``, or ``'balanced'`` for
        ``n_samples / (n_classes * count(label))`` (``fit`` only).
    warm_start : bool, default=False
        Whether ``fit`` starts from the current ``coef_`` and ``intercept_``
        (when the classes and the number of features are unchanged), as
        ``SGDClassifier``: the coefficients are reused, not the schedule; the
        fit equals one given ``coef_init=coef_, intercept_init=intercept_``
        and ``t_`` counts from 0 again. ``partial_fit`` continues the whole
        state.
    n_jobs : int, default=None
        Threads that train the one model (scikit-learn's convention: None is
        1, -1 all the cores, -2 all but one; 0 or a non-int is a
        ValueError), at full rank, without the GIL, on the one state (no
        copies, no mix); the model is the one-thread model up to the order
        of a few floating-point sums, and a given ``n_jobs`` gives the same
        model bit for bit. Two schemes, chosen by measurement
        (``_core._sbm_team.team_route``), where ``P^2 r`` is at least
        ``_core._sbm_team.TEAM_MIN_WORK`` (50,000):

        - ``batch_size=1`` (Algorithm 2 is sequential: each bound is formed
          at the weights the previous step left): the threads split each
          example's work. Every thread owns a range of the ``P``
          coordinates (rows of ``M``, entries of ``theta``, ``mu``,
          ``phi``) and does its share of the gather ``M U``, the triangular
          solve, the rank-``r`` downdate ``M -= T T^T`` (the ``O(r P^2)``
          that dominates) and the step, meeting at three barriers per
          example (``_core._sbm_team.TeamPass``).
        - ``batch_size > 1`` with several classes, batches refactored by
          Cholesky (``batch_route``): every bound of a batch is formed at
          the same weights, so the threads form those of disjoint rows at
          once (Algorithm 1, ``S_j``, the rows' products) and split the
          ``dgemm`` that adds them to ``Sigma``; the refactorisation and the
          step run on one thread (``_core._sbm_team.BatchTeamPass``).

        Measured on 2 cores (``benchmarks/bench_jobs.py --parts sbm``, 5
        passes, best of 3 interleaved fits, 9 for the batches, while another
        job used about one core; coefficients compared to ``n_jobs=1``):
        letter (26 classes, ``P = 442``) fitted 1.58x faster at ``n_jobs=2``
        with ``batch_size=1`` (17.2 s against 27.2 s; 1.25x the CPU
        seconds; largest difference 1e-13 of the largest coefficient) and
        1.36x with ``batch_size=256`` (0.98 s against 1.33 s; the same
        coefficients bit for bit); w8a (``P = 301``, two classes) 1.73x with
        ``batch_size=1`` (2.85 s against 4.93 s; 1e-14); the test accuracy
        the same. Everything else runs on one thread and gives the
        one-thread model exactly: smaller ``P`` (on
        a9a, ``P = 124``, the barriers cost what the split saves: 0.95x for
        a pass), batches with two classes (their cost is the refactorisation
        of ``Sigma``, ``O(P^3 / 3)`` a batch, which does not split), batches
        of the Woodbury route, and the low rank. None and 1 take the
        one-thread path, the model of earlier releases. If a thread fails,
        its error is raised and the fit is left as a failed fit leaves it
        (unfitted: the state it shared is half-updated). On a busy machine
        a thread that loses its core holds the others at every meeting: time
        it first.
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
    penalty : {'l2'}, default='l2'
        Only ``'l2'``: ``'l1'`` and ``'elasticnet'`` (scikit-learn's values) raise
        a ValueError. SBM's step minimises a quadratic bound plus the L2 term
        in closed form; use ``PSAClassifier`` or ``PlainSGDClassifier`` for
        L1 / elastic-net.

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
        Examples processed so far.
    rank_ : int or None
        The rank in use: None for full rank, else ``k`` (capped at the
        head's dimension).
    low_rank_head_ : {'dense', 'lazy'} or None
        The low-rank head in use (None at full rank).

    See Also
    --------
    sklearn.linear_model.LogisticRegression : The batch solver of the same objective.
    sklearn.linear_model.SGDClassifier : First-order stochastic peer (``loss='log_loss'``).

    Notes
    -----
    Departures from the paper, each kept an upper bound or an exact rewrite:
    the per-example gradient ``-f_j(y_j) + lambda theta / t`` enters ``mu``
    once per example (Algorithm 2 as printed adds it once per label); the
    ``K`` rank-one updates of an example are one Woodbury step; ``phi = M
    mu`` is recomputed (equal to the paper's incremental ``phi += M xi - N
    mu``). In the low-rank version the new component is dropped by an
    inexact eigenvector with its residual added back (``[[A, c], [c^T, l]] <=
    [[A + |c| I, 0], [0, l + |c|]]``), and the tail features are diagonal.

    How far one pass gets is limited by the bound's curvature, which
    ``Sigma_j`` overstates relative to the Hessian, the more so as there are
    more classes. Batch bound majorization (Eq. 2, ``eta = 1``, fresh bounds
    on all rows at every step) is the reference for what these bounds allow:
    a single stochastic pass built on them is not expected to beat many
    batch steps. Algorithm 2 with ``eta = 1/n`` does worse than one batch
    step after a pass, because ``mu`` keeps every gradient at the weights it
    was computed at; ``update='surrogate'`` corrects those stale gradients.
    ``benchmarks/linear_sbm.py`` prints these curves (figures in
    ``benchmarks/RESULTS.md``).

    Full rank, cost: ``batch_size=1`` (Algorithm 2) costs ``O(r P^2)`` per
    example (``r`` rank-one factors: 1 for two classes, ``K - 1`` for ``K``),
    20-30 ``SGDClassifier`` epochs per pass on a9a and about 100 on letter.
    With ``batch_size=B`` the batch's terms enter ``M`` at once
    (``_core._sbm_full.batch_route``): a rank-``B r`` Woodbury step while ``6
    B r < P``, else ``Sigma`` (kept in the state) takes the terms, sparse rows
    scattered (``O(K^2 nz^2)``) and dense ones by one ``dgemm`` (``O(K^2
    d^2)`` at BLAS-3 speed), and is refactored by Cholesky once per batch
    (``O(P^3 / 3)``). ``benchmarks/claims_sbm.py`` measures a pass at
    ``B = 256`` at about 3-4 ``SGDClassifier`` epochs on a9a and on letter
    (26 classes). On a9a one pass then reaches 1.04x (``'paper'``) and
    1.02x (``'surrogate'``) the optimum's test log-loss, against 1.02x and
    1.01x with ``B = 1``.

    Low rank, dense head: an example costs ``O(k K nnz)`` for the row plus
    ``O(k H)`` to merge each of its ``r <= K`` factors (``H``: head
    coordinates) and a ``(k+1) x (k+1)`` eigenvector, plus ``O(k^2 H)`` for
    the Woodbury solve before each step on ``theta``: many times the work of
    an SGD step on the same row. Lazy head: ``O(k K nnz)`` for the row and
    ``O(k^4)`` per factor (the merge's ``k x k`` algebra), whatever ``H``;
    ``benchmarks/claims_sbm.py`` measures both.

    References
    ----------
    A. Choromanska and T. Jebara. Stochastic Bound Majorization.
    arXiv:1309.5605, 2013. Algorithm 1 (bound), Algorithm 2 (stochastic
    update), Section 3.2 (low rank).
    T. Jebara and A. Choromanska. Majorization for CRFs and latent
    likelihoods. NIPS 2012.

    Examples
    --------
    Three classes, one multinomial model:

    >>> from sklearn.datasets import load_iris
    >>> from sklearn.preprocessing import StandardScaler
    >>> from sklearn_secondorder import SBMLogisticRegression
    >>> X, y = load_iris(return_X_y=True)
    >>> X = StandardScaler().fit_transform(X)
    >>> clf = SBMLogisticRegression(max_iter=20, random_state=0).fit(X, y)
    >>> clf.coef_.shape, clf.score(X, y) > 0.9
    ((3, 4), True)
    """

    # (the bound algebra runs in float64 throughout: X is converted)
    _input_dtypes = (np.float64,)

    _parameter_constraints = {
        **LinearClassifierBase._parameter_constraints,
        "rank": [StrOptions({"auto"}), Interval(Integral, 1, None, closed="left"), None],
        "rank_features": [Interval(Integral, 0, None, closed="left")],
        "eta": [Interval(Real, 0, None, closed="left"), None],
        "batch_size": [Interval(Integral, 1, None, closed="left")],
        "update": [StrOptions({"paper", "surrogate"})],
        "low_rank_head": [StrOptions({"auto", "dense", "lazy"})],
        "penalty": [StrOptions({"l2", "l1", "elasticnet"})],  # (not l2: refused below)
    }

    def __init__(self, *, alpha=1e-4, rank="auto", rank_features=64, low_rank_head="auto",
                 update="paper", eta=None, batch_size=1, fit_intercept=True, max_iter=5,
                 shuffle=True, random_state=None, class_weight=None, warm_start=False,
                 n_jobs=None, verbose=0, tol=None, n_iter_no_change=5, early_stopping=False,
                 validation_fraction=0.1, penalty="l2"):
        store_init_params(self, locals())

    # ---- the extension protocol ---------------------------------------------------
    def partial_fit(self, X, y, classes=None, sample_weight=None):
        """One pass over the given rows, continuing the current state.

        The calls form a stream whose size is unknown: ``n_t`` (the rows the
        regulariser ``lam = n_t alpha`` and the default step ``eta = 1/n_t``
        are sized for) starts at 128 whatever the first call's rows, and
        doubles when the rows seen reach it, as in one ``fit`` pass over
        at least 128 rows. So ``partial_fit`` over chunks of any sizes gives
        the model of ``fit(max_iter=1, shuffle=False)`` on the same rows in
        the same order (exactly at full rank with ``batch_size=1``; see the
        class's Notes for the exceptions) when they number at least 128;
        ``fit`` on fewer rows sizes ``n_t`` by their count (the paper's
        ``n``), which a stream cannot know. Invalid input is refused before
        anything changes. If the weights overflow during the pass, the
        state cannot be continued: the estimator is left unfitted (the
        error says so).

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
        self._streaming = True              # (read by _start: a stream's n_t)
        try:
            return super().partial_fit(X, y, classes=classes, sample_weight=sample_weight)
        finally:
            vars(self).pop("_streaming", None)

    def rank_for(self, n_features, n_outputs):
        """The rank a fit on data of this shape uses: None (full rank) or ``k``.

        ``rank`` with ``'auto'`` resolved, before any data is read (after a
        fit, ``rank_`` holds the rank in use). For extensions such as the Dask
        mixing, which mixes full-rank models only and checks before the first
        pass.

        Parameters
        ----------
        n_features : int
            The number of features of ``X``.
        n_outputs : int
            The number of weight columns: 1 for two classes, else the number
            of classes.

        Returns
        -------
        rank : int or None
            The rank of the low-rank bound, or None for the full-rank bound.
        """
        return self._rank(n_features, n_outputs)

    def _lazy_head(self, n_head, n_outputs):
        """Whether the low-rank head is lazy (``low_rank_head='auto'`` resolved)."""
        if self.low_rank_head != "auto":
            return self.low_rank_head == "lazy"
        H = (n_head + int(self.fit_intercept)) * n_outputs
        return H >= AUTO_LAZY_HEAD_MIN_COORDS

    def _more_validate_params(self, for_partial_fit=False):
        check_l2_only(self, (
            "SBM's step minimises a quadratic bound of the log loss plus the L2 term in"
            " closed form, and an L1 term has no such step; use PSAClassifier or "
            "PlainSGDClassifier for an L1 penalty."))

    def _is_multinomial(self):
        return True

    # ---- state ------------------------------------------------------------------
    def _rank(self, n_features, n_outputs):
        """The rank in use: None (full) or ``k`` (``rank='auto'`` resolved)."""
        if self.rank != "auto":
            return self.rank
        P = FullRankState.n_params(n_features, n_outputs, self.fit_intercept)
        return None if 8 * P * P <= AUTO_FULL_RANK_MAX_BYTES else AUTO_RANK

    def _bytes_per_weight(self, n_features, n_outputs):
        if self._rank(n_features, n_outputs) is not None:
            # LowRankState: theta, mu, D; coef_; slots and tau per feature (12,
            # counted per weight: a bound)
            return 44
        # full rank: a row of M (and of Sigma and its factor when refactored)
        P = FullRankState.n_params(n_features, n_outputs, self.fit_intercept)
        copies = 3 if batch_route(self.batch_size, n_outputs, P) == "refactor" else 1
        return 8 * P * copies + 32

    def _init_problem(self, n_features, n_outputs, seed):
        rank = self._rank(n_features, n_outputs)
        if self.update == "surrogate" and rank is not None:
            raise ValueError("update='surrogate' is implemented for rank=None only; use "
                             "update='paper' with rank=k (rank='auto' chose rank="
                             f"{rank} for {n_features} features).")
        if rank is not None:
            return LowRankState.zeros(n_features, n_outputs, self.fit_intercept, seed)
        P = FullRankState.n_params(n_features, n_outputs, self.fit_intercept)
        # (batches refactored by Cholesky keep Sigma and its factor besides M)
        copies = 3 if batch_route(self.batch_size, n_outputs, P) == "refactor" else 1
        extra = ("" if copies == 1 else
                 f"(with Sigma and its Cholesky factor: batch_size={self.batch_size}) ")
        need = 8 * P * P * copies
        if need > FULL_RANK_MAX_BYTES:
            raise ValueError(
                f"rank=None (full rank) needs M = Sigma^-1 of {P} x {P} float64 "
                f"{extra}"
                f"({need / 2 ** 20:.0f} MiB) for {n_features} features and "
                f"{n_outputs} output(s), above the {FULL_RANK_MAX_BYTES / 2 ** 20:.0f} MiB "
                "budget (sklearn_secondorder.linear._sbm.FULL_RANK_MAX_BYTES); pass rank=k "
                "(e.g. rank=5) for the low-rank bound of Section 3.2."
            )
        return FullRankState.zeros(n_features, n_outputs, self.fit_intercept, seed)

    def _eta(self, n_ref):
        if self.eta is not None:
            return float(self.eta)
        # (a step per batch instead of per example: B times the paper's 1/n)
        return min(1.0, self.batch_size / n_ref) if self.update == "paper" else 1.0

    def _begin_call(self, X, sample_weight):
        # update='paper': the rows n_t may count are those seen before this
        # call and this call's rows once (the later passes of fit repeat them:
        # as the paper's lambda and eta = 1/n for the data set's n).
        # update='surrogate' counts every visit: the sum of the bounds holds
        # one per visit, and the regulariser keeps its proportion
        rows = int(np.count_nonzero(sample_weight))
        for state in self._states:
            state.row_cap = int(state.t) + rows

    def _start(self, X, state):
        """Size the regulariser and the step for the first block of rows
        (``lam = n_t alpha``, ``n_t = FIRST_BLOCK``, or for ``fit`` the rows
        of its data when fewer: a stream of ``partial_fit`` calls starts at
        ``FIRST_BLOCK`` whatever its first chunk, so that its schedule is
        that of one ``fit`` pass over the same rows). Low rank: choose the
        head features on the first data too."""
        n_ref = (FIRST_BLOCK if getattr(self, "_streaming", False)
                 else max(1, min(FIRST_BLOCK, state.row_cap)))
        if isinstance(state, FullRankState):
            state.start(n_ref, n_ref * self.alpha, self._eta(n_ref))
        else:
            head = _most_frequent_features(X, self.rank_features)
            state.start(n_ref, n_ref * self.alpha, self._eta(n_ref), head,
                        self._rank(X.shape[1], state.n_outputs),
                        self._lazy_head(head.size, state.n_outputs))

    def _grow(self, state):
        """Double ``n_t``: add ``alpha n_t`` to every coordinate's curvature
        (``grow_regulariser`` of the state) and set ``eta = 1 / n_t``."""
        new = 2 * int(state.n_ref)
        # (the refactoring kernel's next call inverts Sigma anyway: M waits for it)
        if isinstance(state, FullRankState):
            defer = batch_route(self.batch_size, state.n_outputs,
                                state.theta.size) == "refactor"
            state.grow_regulariser(new, self.alpha * new, self._eta(new), defer=defer)
        else:
            state.grow_regulariser(new, self.alpha * new, self._eta(new))

    # the threads share each pass of the one state (TeamPass); no copies, no
    # mix. Where they would not pay, one thread runs the passes
    _threads_share_state = True

    def _shares_passes(self, state, n_threads):
        """Whether ``n_threads`` threads share this state's passes
        (``_core._sbm_team.team_route``: full rank, ``batch_size=1`` or
        batches refactored by Cholesky with several classes, ``P^2 r`` large
        enough); otherwise ``n_jobs`` runs them on one thread."""
        return isinstance(state, FullRankState) and team_route(
            self.batch_size, state.n_outputs, state.theta.size, n_threads)

    def _run_problem(self, X, y, sample_weight, state, n_epochs, threads=None):
        # one BLAS thread for the kernels, the regulariser's growth and the
        # surrogate's solve: their calls are small, idle threads of a threaded
        # solve keep spinning and slow the single-threaded pass after it (one
        # limit per call: setting it is cheap against a pass). With n_jobs the
        # threads of a shared pass make their BLAS calls side by side, each
        # on one BLAS thread
        with _one_blas_thread():
            return self._run_problem_passes(X, y, sample_weight, state, n_epochs, threads)

    def _run_problem_passes(self, X, y, sample_weight, state, n_epochs, threads=None):
        if getattr(state, "row_cap", None) is None:       # (coef_init's zero-pass start)
            state.row_cap = int(state.t) + int(np.count_nonzero(sample_weight))
        if not state.started:
            self._start(X, state)
        n = X.shape[0]
        for epoch in range(n_epochs):
            ds = self._row_dataset(X, y, sample_weight)
            if self.shuffle:                    # (the kernels' own shuffle, replayed)
                state.seed = ds.shuffle_py(state.seed)
                order = ds.order_
            else:
                order = np.arange(n)
            seen = np.cumsum(sample_weight[order] != 0)
            start = 0
            while start < n:
                while state.n_ref <= state.t and (state.n_ref < state.row_cap
                                                  or self.update == "surrogate"):
                    self._grow(state)
                before = seen[start - 1] if start else 0
                # the block ends with the row that brings t to n_t (or the data's end)
                left = state.n_ref - state.t
                end = (n if left <= 0 else
                       min(n, int(np.searchsorted(seen, before + left)) + 1))
                # (the kernel visits rows start:end of the shuffled order)
                self._block(ds, state, epoch, start, end, threads)
                start = end
        return n_epochs

    def _block(self, ds, state, epoch, start, stop, threads=None):
        """One kernel call over the rows ``start:stop`` of ``ds`` in its
        order (no shuffle); ``threads`` share it (full rank)."""
        opts = SBMOptions(alpha=self.alpha, eta=state.eta, batch_size=self.batch_size,
                          surrogate=self.update == "surrogate")
        if isinstance(state, FullRankState):
            result = full_epochs(ds, state, opts, start, stop, n_epochs=1, shuffle=False,
                                 threads=threads)
        else:
            result = lowrank_epochs(ds, state, opts, start, stop, n_epochs=1, shuffle=False)
        if result.diverged:
            raise diverged_error(type(self).__name__, epoch + 1, remedy="lower eta")

    def _final_weights(self, state):
        return state.weights()

    def _set_problem_weights(self, state, coef, intercept):
        state.theta[:coef.size] = coef
        if self.fit_intercept:
            state.theta[coef.size:] = intercept

    def _mix_states(self, states, weights, start):
        if not all(isinstance(s, FullRankState) for s in states):
            raise ValueError(f"{type(self).__name__} mixes full-rank states only (rank=None); "
                             "the low-rank factors of different models do not combine.")
        return mix_full_rank_states(states, weights, start, alpha=self.alpha,
                                    step_size=self._eta)

    def _export(self):
        super()._export()
        low = not isinstance(self._states[0], FullRankState)
        self.rank_ = int(self._states[0].V.shape[0] - 1) if low else None
        self.low_rank_head_ = (("lazy" if self._states[0].lazy_head else "dense") if low
                               else None)


def mix_full_rank_states(states, weights, start=None, *, alpha, step_size):
    """Mix full-rank SBM states (``FullRankState``) trained on shards of the rows.

    ``theta`` is averaged with ``weights``. The bounds' curvature ``Sigma -
    lam I`` (``Sigma = M^-1``), the gradient sum ``mu`` and the update counter
    ``t`` sum over the rows seen, so they are summed as increments from
    ``start``. The regulariser is sized for the largest ``n_t`` of the models
    (``lam = alpha n_t``; the next pass doubles it, as one machine's would,
    once the rows seen reach it), and ``M`` and ``phi = M mu`` are derived
    again.

    Parameters
    ----------
    states : sequence of FullRankState
        One per model, each continued from ``start``.
    weights : sequence of float
        The models' shares of the rows.
    start : FullRankState or None, default=None
        The state the models started from (None: no curvature, ``mu = 0``).
    alpha : float
        The penalty strength per row.
    step_size : callable
        ``step_size(n_t) -> eta``, the step for ``n_t`` rows.

    Returns
    -------
    mixed : FullRankState
        A new state; the inputs are not modified.
    """
    out = copy.deepcopy(states[0])
    out.theta = weighted_mean([s.theta for s in states], weights)
    eye = np.eye(out.theta.size)

    def curvature(s):   # the bounds' part of Sigma, without the regulariser
        return _spd_inverse(s.M) - s.lam_total * eye

    data = sum_increments([curvature(s) for s in states],
                          0.0 if start is None else curvature(start))
    n_ref = max(int(s.n_ref) for s in states)
    out.n_ref, out.lam, out.eta = n_ref, alpha * n_ref, step_size(n_ref)
    out.lam_total = out.lam
    out.M = _spd_inverse(data + out.lam * eye)
    out.mu = sum_increments([s.mu for s in states], 0.0 if start is None else start.mu)
    out.phi = out.M @ out.mu
    out.t = int(sum_increments([s.t for s in states], 0 if start is None else start.t))
    return out


def _spd_inverse(A):
    """The inverse of a symmetric positive definite matrix, kept symmetric."""
    inv = np.linalg.inv(A)
    return np.ascontiguousarray(0.5 * (inv + inv.T))


def _most_frequent_features(X, n_head):
    """The ``n_head`` features with the most non-zeros in ``X`` (ties: the lower
    index), sorted; features that are all zero are left out."""
    d = X.shape[1]
    counts = (np.bincount(X.indices[X.data != 0], minlength=d) if sp.issparse(X)
              else np.count_nonzero(X, axis=0))
    order = np.lexsort((np.arange(d), -counts))
    return np.sort(order[:min(n_head, d)][counts[order[:n_head]] > 0])
