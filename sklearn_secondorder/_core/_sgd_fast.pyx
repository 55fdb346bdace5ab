"""SGD on ``ScaledWeights``, for rows and for sequences: the baseline every
method here is compared to.

The schedules (``step_size``) and the pass (``sgd_pass``) are written once,
for both stacks; a pass visits ``RowSteps`` (linear models, here) or
``SequenceSteps`` (CRFs, whose epochs ``_crf_sgd`` runs).

One step on row ``x`` (label ``y``, sample weight ``s``) at counter ``t``::

    eta  = 1 / (alpha (t + t0))            # alpha = lam + l1; eta0 if learning_rate='constant'
    g    = s * dloss(w.x + b, y)           # loss derivative at the current weights
    w   *= 1 - eta lam                     # O(1) with the scale trick
    w   -= eta g x                         # O(nnz)
    b   -= eta g intercept_decay

Zero-weight rows are skipped and do not advance ``t``. With ``n_outputs = K > 1``
the loss is the multinomial log loss over K scores.

The options carry the penalty split once, by the estimator
(``_penalty.split_alpha``): ``lam``, the L2 strength of ``lam/2 ||w||^2``,
and ``l1``, the L1 strength of ``l1 ||w||_1`` (scikit-learn's ``alpha
(1 - l1_ratio)`` and ``alpha l1_ratio``). The shrink is ``1 - eta lam``; the
schedule's ``alpha`` is the whole strength ``lam + l1``. With ``l1 > 0`` each
step adds ``eta l1`` to Tsuruoka et al.'s cumulative penalty
(``ScaledWeights.l1_add``); the weights a step reads and writes are caught up
with it before the read and after the write (``_sgd_step``,
``SequenceSteps.step``), the others at the end of the call
(``l1_apply_all``). Rows with L1 are ``RowStepsL1``, a kind of steps of its
own in the fused ``sgd_pass``, so the L2-only row loop compiles without the
L1 lines.
"""
from dataclasses import dataclass

import numpy as np
cimport cython
from libc.math cimport isfinite, NAN
from libc.stdlib cimport malloc, free

from ._block_ops cimport row_l1_apply
from ._dataset cimport RowDataset, SequenceData, fetch_row
from ._losses cimport Loss, softmax_loss
from ._numeric cimport all_finite, bound_step, clip_dloss
from ._weights cimport ScaledWeights, l1_apply_rows

from ._dataset import PassCounters

cdef inline void _sgd_step(ScaledWeights w, double* b, Loss loss, const double* x,
                           const int* ind, int nnz, double y, double sw, double eta,
                           double lam, double l1, bint with_l1, bint fit_intercept,
                           double intercept_decay, bint bound_steps, double* scores,
                           double* grad) noexcept nogil:
    """One plain SGD step: the shrink by the L2 strength ``lam``, the step.

    With ``with_l1`` (a constant at each call site, so the L2-only loop
    compiles without the L1 lines), Tsuruoka et al.'s cumulative penalty
    (2009, Fig. 2): the row's weights caught up with it before they are read,
    the step's penalty ``eta l1`` added to the total after the step, and the
    row's weights caught up again.

    With ``bound_steps`` (regression), the step moves the row's prediction
    by at most its residual ``|p - y|`` (``bound_step``).
    """
    cdef int k, q, K = w.n_outputs
    cdef double factor, sq
    if with_l1:
        l1_apply_rows(w, ind, nnz)
    w.dot(x, ind, nnz, scores)
    for k in range(K):
        scores[k] += b[k]
    if K == 1:
        grad[0] = clip_dloss(loss.dloss(scores[0], y))
        if bound_steps:
            sq = intercept_decay if fit_intercept else 0.0
            for q in range(nnz):
                sq += x[q] * x[q]
            bound_step(grad, scores[0], y, eta * sw * sq)
    else:
        softmax_loss(scores, <int>y, K, grad)
    for k in range(K):
        grad[k] = -eta * sw * grad[k]
    factor = 1.0 - eta * lam
    if factor < 0.0:
        factor = 0.0
    if factor != 1.0:
        w.shrink(factor)
    w.add(x, ind, nnz, grad)
    if with_l1:
        w.l1_add(eta * l1)
        l1_apply_rows(w, ind, nnz)
    if fit_intercept:
        for k in range(K):
            b[k] += grad[k] * intercept_decay


cdef inline void _sequence_l1(ScaledWeights w, SequenceData ds, Py_ssize_t s,
                              Py_ssize_t n_attributes) noexcept nogil:
    """Catch the weights a sequence reads and writes up with the L1 penalty:
    its attributes' rows, the transitions and the bias (``CRFContext``'s
    layout: attribute rows, then ``H + 1`` rows)."""
    cdef int H = w.n_outputs
    cdef long long kk, first = ds.offsets[s]
    cdef Py_ssize_t j, p
    cdef double* avg = w.u if w.averaged else NULL
    for kk in range(ds.indptr[first], ds.indptr[ds.offsets[s + 1]]):
        j = ds.indices[kk]
        if j < n_attributes:
            p = j * H
            row_l1_apply(w.v + p, w.l1_q + p, avg + p if avg != NULL else NULL, w.l1_u,
                         w.avg_coef, H)
    p = n_attributes * H
    row_l1_apply(w.v + p, w.l1_q + p, avg + p if avg != NULL else NULL, w.l1_u, w.avg_coef,
                 (H + 1) * H)


# The row steps (private to this module; the sequence steps, which _crf_sgd
# runs, are declared in the .pxd)

@cython.final
cdef class RowSteps:
    """Plain SGD steps on the rows of a ``RowDataset`` (module docstring)."""

    cdef Py_ssize_t n_examples
    cdef RowDataset ds
    cdef Loss loss
    cdef double* b               # the intercept (n_outputs,)
    cdef double* b_sum           # its running sum, or NULL
    cdef double* scores          # (n_outputs,) work buffers
    cdef double* grad
    cdef int K
    cdef bint fit_intercept
    cdef bint bound_steps        # a step never moves the row's prediction past its target
    cdef double intercept_decay
    cdef double lam              # the L2 strength (the shrink's)
    cdef object _arrays          # keeps b and b_sum alive

    def __cinit__(self):
        self.scores = NULL
        self.grad = NULL

    def __dealloc__(self):
        free(self.scores)
        free(self.grad)

    cdef inline bint step(self, Py_ssize_t k, ScaledWeights w, const Schedule* sched,
                          long long t, double* loss) noexcept nogil:
        return _row_step(self, k, w, step_size(sched, t), self.lam, 0.0, False)

    cdef void count_iterate(self) noexcept nogil:
        cdef int k
        if self.b_sum != NULL:
            for k in range(self.K):
                self.b_sum[k] += self.b[k]


cdef inline bint _row_step(RowSteps rows, Py_ssize_t k, ScaledWeights w, double eta,
                           double lam, double l1, bint with_l1) noexcept nogil:
    """The step of ``RowSteps`` and ``RowStepsL1`` on row ``k`` of the current
    order (``with_l1`` is a constant at each inlined call); False for a row of
    weight 0, which takes no part."""
    cdef const double* x
    cdef const int* ind
    cdef int nnz
    cdef double y, sw
    fetch_row(rows.ds, k, &x, &ind, &nnz, &y, &sw)
    if sw == 0.0:
        return False
    _sgd_step(w, rows.b, rows.loss, x, ind, nnz, y, sw, eta, lam, l1, with_l1,
              rows.fit_intercept, rows.intercept_decay, rows.bound_steps, rows.scores,
              rows.grad)
    return True


@cython.final
cdef class RowStepsL1:
    """``RowSteps`` with the L1 penalty (``_sgd_step`` with ``with_l1``): its
    own compiled pass (``sgd_pass`` is fused over the kinds of steps), so that
    the L2-only row loop is unchanged."""

    cdef Py_ssize_t n_examples
    cdef RowSteps rows
    cdef double lam, l1          # the L2 strength (the shrink's), and the L1 strength C

    cdef inline bint step(self, Py_ssize_t k, ScaledWeights w, const Schedule* sched,
                          long long t, double* loss) noexcept nogil:
        return _row_step(self.rows, k, w, step_size(sched, t), self.lam, self.l1, True)

    cdef void count_iterate(self) noexcept nogil:
        self.rows.count_iterate()


ctypedef fused Steps:
    RowSteps
    RowStepsL1
    SequenceSteps


cdef inline double sgd_pass(Steps steps, ScaledWeights w, const Schedule* sched,
                            long long* t) noexcept nogil:
    """One SGD pass over ``steps`` (rows or sequences, in their current order)
    on the weights ``w``.

    ``steps.step(k, w, sched, t, &loss)`` makes update ``t`` on the ``k``-th
    example, writes its loss at the pre-step weights (0 when the trainer does
    not track it) and returns whether it stepped (an example of weight 0 does
    not). Each step advances ``t``; with averaging on, every iterate after a
    step joins the lazy running sum (``ScaledWeights.count_iterate``, and
    ``steps.count_iterate`` for state kept beside ``w``, the intercept).
    Returns the summed loss, NaN when an example's loss is not finite
    (divergence: the pass stops there). A fused function: each kind of steps
    gets its own compiled loop, with direct calls.
    """
    cdef Py_ssize_t k
    cdef double loss, total = 0.0
    for k in range(steps.n_examples):
        if not steps.step(k, w, sched, t[0], &loss):
            continue
        if Steps is SequenceSteps:     # (the row steps track no loss)
            if not isfinite(loss):
                return NAN
            total += loss
        t[0] += 1
        if w.averaged:
            w.count_iterate(1.0)
            steps.count_iterate()
    return total


cdef double sgd_pass_sequences(SequenceSteps steps, ScaledWeights w, const Schedule* sched,
                               long long* t) noexcept nogil:
    """``sgd_pass`` over sequences (for ``_crf_sgd``)."""
    return sgd_pass(steps, w, sched, t)


@cython.final
cdef class SequenceSteps:
    """SGD steps on the sequences of a ``SequenceData`` (``_crf_sgd``): the
    CRF log-likelihood's gradient by ``CRFContext.add_gradient``."""

    cdef bint step(self, Py_ssize_t k, ScaledWeights w, const Schedule* sched, long long t,
                   double* loss) noexcept nogil:
        """One step on sequence ``order[k]``; with the L1 penalty (the module
        docstring) the sequence's weights are caught up before they are read
        and after the step."""
        cdef Py_ssize_t s = self.ds.order[k]
        cdef double eta = step_size(sched, t), ll
        cdef const int* y = &self.ds.labels[0] + self.ds.offsets[s]
        cdef bint with_l1 = self.l1 != 0.0
        if with_l1:
            _sequence_l1(w, self.ds, s, self.ctx.n_attributes)
        self.ctx.load_transitions(w)
        self.ctx.load_emissions(self.ds, s, w)
        self.ctx.finish_emissions(NULL)
        ll = self.ctx.loglik(y)
        loss[0] = -ll
        if not isfinite(ll):
            return True                # (the pass stops: divergence)
        w.shrink(1.0 - eta * self.lam)
        self.ctx.add_gradient(self.ds, s, y, w, eta / w.scale, self.fit_intercept)
        if with_l1:
            w.l1_add(eta * self.l1)
            _sequence_l1(w, self.ds, s, self.ctx.n_attributes)
        return True

    cdef void count_iterate(self) noexcept nogil:
        pass


cdef RowStepsL1 with_l1(RowSteps rows, double l1):
    """``rows`` with the L1 penalty ``l1 ||w||_1`` besides their L2 shrink."""
    cdef RowStepsL1 steps = RowStepsL1()
    steps.rows, steps.n_examples = rows, rows.n_examples
    steps.lam, steps.l1 = rows.lam, l1
    return steps


cdef RowSteps row_steps(RowDataset ds, Loss loss, double lam, double[::1] b, b_sum,
                        bint fit_intercept, double intercept_decay, bint bound_steps=False):
    """The steps of a pass over ``ds`` with the L2 strength ``lam`` and the
    intercept ``b`` (and its running sum ``b_sum``, or None)."""
    cdef RowSteps steps = RowSteps()
    cdef double[::1] bs
    steps.ds, steps.loss, steps.n_examples, steps.lam = ds, loss, ds.n_samples, lam
    steps.K = b.shape[0]
    steps.b = &b[0]
    steps.b_sum = NULL
    if b_sum is not None:
        bs = b_sum
        steps.b_sum = &bs[0]
    steps._arrays = (b, b_sum)
    steps.fit_intercept, steps.intercept_decay = fit_intercept, intercept_decay
    steps.bound_steps = bound_steps
    steps.scores = <double*>malloc(steps.K * sizeof(double))
    steps.grad = <double*>malloc(steps.K * sizeof(double))
    if steps.scores == NULL or steps.grad == NULL:
        raise MemoryError()
    return steps


@dataclass
class LinearSGDState(PassCounters):
    """A linear model's weights and SGD counters (picklable).

    Attributes
    ----------
    coef : ndarray of shape (n_features * n_outputs,)
        C-order ``(n_features, n_outputs)`` weights.
    intercept : ndarray of shape (n_outputs,)
    avg_coef, avg_intercept : ndarray or None
        Running sums of the iterates (averaged SGD).
    l1_q : ndarray of shape (n_features * n_outputs,) or None
        With an L1 penalty: Tsuruoka et al.'s ``q``, the penalty applied to
        each weight so far.
    l1_u : float
        Their ``u``, the total penalty so far.
    n_iterates : float
        Iterates in the sums.
    t, seed : int
        As in ``PassCounters`` (keywords only).
    eta0 : float or None
        The step size in use (None until chosen).
    """

    coef: np.ndarray
    intercept: np.ndarray
    avg_coef: object = None
    avg_intercept: object = None
    n_iterates: float = 0.0
    eta0: object = None
    l1_q: object = None
    l1_u: float = 0.0

    @classmethod
    def zeros(cls, n_features, n_outputs, *, average, seed, l1=False):
        size = n_features * n_outputs
        state = cls(coef=np.zeros(size), intercept=np.zeros(n_outputs), seed=seed)
        if average:
            state.avg_coef, state.avg_intercept = np.zeros(size), np.zeros(n_outputs)
        if l1:
            state.l1_q = np.zeros(size)
        return state

    def model(self):
        """``(coef, intercept)``: the average of the iterates when averaging.

        With an L1 penalty the average is taken on the last iterate's support
        (its weights at 0 are 0): an average of sparse iterates is dense, and
        the support is what the penalty selected."""
        if self.avg_coef is not None and self.n_iterates > 0:
            coef = self.avg_coef / self.n_iterates
            if self.l1_q is not None:
                coef[self.coef == 0.0] = 0.0
            return coef, self.avg_intercept / self.n_iterates
        return self.coef, self.intercept


@dataclass
class LinearSGDOptions:
    """The constants of an ``sgd_epochs`` call (module docstring).

    Attributes
    ----------
    lam : float
        L2 strength (scikit-learn's ``alpha`` times its L2 share).
    l1 : float
        L1 strength (``alpha`` times ``l1_ratio``; 0: L2 only, else the state
        needs ``l1_q``).
    learning_rate : {'optimal', 'constant', 'invscaling'}
        ``eta_t = 1 / (alpha (t + t0))`` (``alpha = lam + l1``), ``eta0``, or
        ``eta0 / (t + 1)^power_t`` (scikit-learn's ``'invscaling'``).
    power_t : float
        The exponent of ``'invscaling'``.
    eta0, t0 : float
    intercept_decay : float
    """

    lam: float = 1e-4
    l1: float = 0.0
    learning_rate: str = "optimal"
    eta0: float = 0.01
    t0: float = 1.0
    intercept_decay: float = 1.0
    power_t: float = 0.25


@dataclass
class LinearSGDResult:
    """What ``sgd_epochs`` reports: passes completed, and whether the weights
    overflowed."""

    epochs: int
    diverged: bool


cdef Schedule _schedule(options, ScheduleKind kind):
    """The linear schedule of ``options`` (a ``LinearSGDOptions``)."""
    cdef Schedule sched
    sched.kind = kind
    sched.eta0, sched.alpha, sched.t0, sched.power = (
        options.eta0, options.lam + options.l1, options.t0, options.power_t)
    return sched


_SCHEDULES = {"constant": CONSTANT, "optimal": OPTIMAL, "invscaling": INVSCALING}


def sgd_epochs(RowDataset ds, state, options, *, Loss loss=None, int n_epochs=1,
               bint shuffle=True, bint fit_intercept=True, bint bound_steps=False):
    """Run ``n_epochs`` passes of plain SGD over ``ds``, updating ``state`` in place.

    The penalty and the schedule are the options' constants; the rest comes
    with each call, as for ``psa_epochs``.

    Parameters
    ----------
    ds : RowDataset
    state : LinearSGDState
    options : LinearSGDOptions
    loss : Loss or None
        Binary margin loss (one output); None with several outputs selects
        the multinomial log loss, ``y`` then holding class indices.
    n_epochs : int
    shuffle : bool
        Shuffle the rows before each pass.
    fit_intercept : bool
    bound_steps : bool
        Regression: a step moves its row's prediction at most to the target
        (``_numeric.bound_step``).

    Returns
    -------
    result : LinearSGDResult
    """
    cdef int K = state.intercept.shape[0]
    if K == 1 and loss is None:
        raise ValueError("a binary loss is required when n_outputs == 1")
    if state.coef.shape[0] != ds.n_features * K:
        raise ValueError("coef/intercept shapes do not match the data")
    cdef double l1 = options.l1
    if l1 > 0 and state.l1_q is None:
        raise ValueError("an L1 penalty needs the state's l1_q")
    cdef ScaledWeights w = ScaledWeights(state.coef, K, state.avg_coef, state.n_iterates,
                                         state.l1_q if l1 > 0 else None, state.l1_u)
    cdef double[::1] b = state.intercept
    cdef RowSteps steps = row_steps(ds, loss, options.lam, b, state.avg_intercept,
                                    fit_intercept, options.intercept_decay, bound_steps)
    cdef RowStepsL1 steps_l1 = with_l1(steps, l1) if l1 > 0 else None
    cdef Schedule sched = _schedule(
        options, _SCHEDULES[options.learning_rate])
    cdef int _epoch, epochs_run = 0
    cdef bint diverged = False
    cdef long long t = state.t
    cdef unsigned int rng = state.rng_state()
    with nogil:
        for _epoch in range(n_epochs):
            if shuffle:
                ds.shuffle(&rng)
            if steps_l1 is not None:
                sgd_pass(steps_l1, w, &sched, &t)
            else:
                sgd_pass(steps, w, &sched, &t)
            epochs_run += 1
            if not w.is_finite() or not all_finite(&b[0], K):
                diverged = True
                break
        if w.has_l1:
            w.l1_apply_all()
        w.fold()
    state.t, state.seed, state.n_iterates = t, rng, w.n_iterates
    if w.has_l1:
        state.l1_u = w.l1_u
    return LinearSGDResult(epochs=epochs_run, diverged=diverged)


def trial_pass(RowDataset ds, double[::1] coef, double[::1] intercept, options, *,
               Loss loss=None, int n_outputs=1, bint fit_intercept=True,
               bint bound_steps=False, RowDataset held_out=None):
    """One pass with the constant step ``options.eta0`` from (copies of) the
    weights; returns the regularized objective after the pass (``inf`` when
    it diverges), the L1 term ``l1 ||w||_1`` included (the pass then steps
    with the cumulative L1 penalty, from nothing owed).

    Used by the step-size calibration (Bottou's recipe): the arrays given are
    not modified. With ``held_out`` the objective is that of its rows (the
    step whose pass generalises best, rather than fits its own rows best).
    ``options`` is a ``LinearSGDOptions`` (its ``learning_rate`` is ignored:
    the step is constant).
    """
    cdef int K = n_outputs
    cdef double lam = options.lam, l1 = options.l1
    coef_c = np.array(coef, dtype=np.float64)
    intercept_c = np.array(intercept, dtype=np.float64)
    cdef double[::1] ic = intercept_c
    cdef ScaledWeights w = ScaledWeights(coef_c, K, None, 0.0,
                                         np.zeros_like(coef_c) if l1 > 0 else None)
    cdef RowSteps steps = row_steps(ds, loss, lam, ic, None, fit_intercept, 1.0,
                                    bound_steps)
    cdef RowStepsL1 steps_l1 = with_l1(steps, l1) if l1 > 0 else None
    cdef Schedule sched = _schedule(options, CONSTANT)
    cdef const double* x
    cdef const int* ind
    cdef int nnz, k
    cdef Py_ssize_t i
    cdef long long t = 0
    cdef double y, sw, obj = 0.0, wsum = 0.0, val, sq_norm
    cdef RowDataset scored = held_out if held_out is not None else ds
    with nogil:
        if steps_l1 is not None:
            sgd_pass(steps_l1, w, &sched, &t)
        else:
            sgd_pass(steps, w, &sched, &t)
        if w.has_l1:
            w.l1_apply_all()
        w.fold()
        if not w.is_finite() or not all_finite(&ic[0], K):
            obj = 1e300
        else:
            for i in range(scored.n_samples):
                fetch_row(scored, i, &x, &ind, &nnz, &y, &sw)
                w.dot(x, ind, nnz, steps.scores)
                for k in range(K):
                    steps.scores[k] += ic[k]
                if K == 1:
                    val = loss.loss(steps.scores[0], y)
                else:
                    val = softmax_loss(steps.scores, <int>y, K, steps.grad)
                obj += sw * val
                wsum += sw
            if wsum > 0:
                obj /= wsum
    if obj >= 1e300 or not np.isfinite(obj):
        return np.inf
    # (the kernel's own sum, not np.dot: waking a threaded BLAS costs more
    # than the trial pass over 1000 rows)
    sq_norm = w.sq_norm()
    if l1 > 0:
        return obj + l1 * float(np.abs(coef_c).sum()) + 0.5 * lam * sq_norm
    return obj + 0.5 * lam * sq_norm
