"""SGD-type CRF trainers on the linear core's ``ScaledWeights``: plain SGD,
averaged SGD and ASF (averaged SGD with feedback, Sun et al., ICDM 2010).

One step on sequence ``(x, y)`` at counter ``t``::

    eta = eta0 / (1 + alpha eta0 t) ** power      # alpha = lam + l1
    w  <- (1 - eta lam) w + eta grad log p(y | x; w)

the shrink O(1) by the scale trick and the gradient applied sparsely by
``CRFContext.add_gradient``. ``power=1`` is plain SGD (``1 / (alpha (t +
t0))`` with ``t0 = 1 / (alpha eta0)``, CRFsuite's l2sgd and Bottou's crfsgd),
``power=0.75`` Bottou's averaged-SGD schedule, ``power=0`` a constant step
(ASF). With averaging every iterate after a step is added to the lazy running
sum. With feedback (ASF, Fig. 1) the weights are reset to the average of all
iterates after every pass whose total count is triangular (1, 3, 6, 10, ...):
period ``c`` runs ``c`` passes.

The penalty comes split once, by the estimator (``_penalty.split_alpha``):
``lam``, the L2 strength, and ``l1``, the L1 strength (CRFsuite's ``c1``);
the schedule's ``alpha`` is the whole strength ``lam + l1``. With ``l1 > 0``
each step adds ``eta l1`` to Tsuruoka et al.'s cumulative penalty
(``SequenceSteps``, ``ScaledWeights``), every weight (bias and transitions
included) caught up when a step reads it and at the end of the call. With
averaging, the average is kept on the support of the current iterate: at a
feedback (``reset_to_average``) and in the model returned
(``CRFState.model``), a weight the penalty holds at 0 is 0. The averaged
model is therefore as sparse as the last iterate; the running sum itself
counts each iterate as the lazy catch-up left it (a weight's owed penalty
enters it when applied).

``SharedSGDPass`` is the same pass on several threads sharing the one state
(``n_jobs``, ASF's tagger): rounds of sequences inferred at the round's
start, the steps applied in order by the owners of the rows, each thread
with its own copy of ``ScaledWeights``' scalars (``doc/core.md``, "Threads
on one state").
"""
from dataclasses import dataclass, field

import numpy as np
from libc.math cimport NAN, isfinite, sqrt

from ._block_ops cimport row_l1_apply
from ._crf_infer cimport CRFContext, context_for
from ._crf_rounds cimport (RoundArrays, ThreadRows, infer_round, list_own_nonzeros,
                           sequence_labels, sequences_round_end, start_inference,
                           thread_rows)
from ._dataset cimport SequenceData
from ._numeric cimport now_seconds
from ._prefetch cimport prefetch_lines
from ._sgd_fast cimport (
    CONSTANT,
    POWER,
    Schedule,
    SequenceSteps,
    sgd_pass_sequences,
    step_size,
)
from ._shared_state cimport Barrier, barrier_abort, barrier_init, barrier_wait, owner_of
from ._weights cimport ScaledWeights


@dataclass
class CRFState:
    """A CRF's weights and the trainers' counters (picklable).

    Attributes
    ----------
    coef : ndarray of shape ((n_attributes + n_states + 1) * n_states,)
        The flat weights: attribute rows, transition rows (``from``), the
        bias row, ``n_states`` weights each (``CRFContext``'s layout).
    avg : ndarray like ``coef``, or None
        The running sum of the iterates (averaging trainers).
    n_states : int
    n_iterates : float
        Iterates in ``avg``.
    t : int
        Sequence updates so far.
    passes : int
        Passes so far (ASF's feedback schedule counts them).
    seed : int
        The shuffling RNG state.
    l1_q : ndarray like ``coef``, or None
        With an L1 penalty: Tsuruoka et al.'s ``q``, the penalty applied to
        each weight so far.
    l1_u : float
        Their ``u``, the total penalty so far.
    """

    coef: np.ndarray
    avg: object
    n_states: int
    n_iterates: float = 0.0
    t: int = 0
    passes: int = 0
    seed: int = 1
    l1_q: object = None
    l1_u: float = 0.0

    @classmethod
    def new(cls, n_attributes, n_states, *, averaged, seed, init=None, l1=False):
        """Weights ``init`` (a callable ``size -> array``; zeros by default)."""
        size = (n_attributes + n_states + 1) * n_states
        coef = np.zeros(size) if init is None else init(size)
        return cls(coef=coef, avg=np.zeros(size) if averaged else None,
                   n_states=n_states, seed=seed, l1_q=np.zeros(size) if l1 else None)

    @property
    def n_attributes(self):
        return self.coef.size // self.n_states - self.n_states - 1

    def add_attributes(self, n_new, init=None):
        """Insert ``n_new`` attribute rows after the existing ones, weights
        ``init(size)`` (zeros by default); the past iterates held those
        initial values too."""
        H, cut = self.n_states, self.n_attributes * self.n_states
        rows = np.zeros(n_new * H) if init is None else init(n_new * H)
        self.coef = np.concatenate([self.coef[:cut], rows, self.coef[cut:]])
        if self.avg is not None:
            self.avg = np.concatenate([self.avg[:cut], self.n_iterates * rows,
                                       self.avg[cut:]])
        if self.l1_q is not None:
            # (q = 0: a weight 0 all along owes the total u, as in the dense algorithm)
            self.l1_q = np.concatenate([self.l1_q[:cut], np.zeros(n_new * H),
                                        self.l1_q[cut:]])

    def weights(self, averaged=False, l1=False):
        """A ``ScaledWeights`` over ``coef`` (and ``avg`` when averaged, and
        the L1 penalty's ``l1_q`` when ``l1``)."""
        for name in ("coef", "avg", "l1_q"):
            if getattr(self, name) is not None:
                setattr(self, name, np.require(getattr(self, name), requirements=["C", "W"]))
        if l1 and self.l1_q is None:
            raise ValueError("an L1 penalty needs the state's l1_q")
        return ScaledWeights(self.coef, self.n_states, self.avg if averaged else None,
                             self.n_iterates, self.l1_q if l1 else None, self.l1_u)

    def model(self):
        """The weights a trainer returns: the average when it averages (with
        an L1 penalty, on the support of the last iterate: module docstring)."""
        if self.avg is None or self.n_iterates == 0:
            return self.coef.copy()
        model = self.avg / self.n_iterates
        if self.l1_q is not None:
            model[self.coef == 0.0] = 0.0
        return model


@dataclass
class CRFSGDOptions:
    """The constants of a CRF ``sgd_epochs`` call (module docstring).

    Attributes
    ----------
    eta0 : float
    power : float
        0 (constant), 0.75 (averaged SGD) or 1 (plain SGD).
    lam : float
        L2 strength (scikit-learn's ``alpha`` times its L2 share).
    l1 : float
        L1 strength (``alpha`` times ``l1_ratio``; 0: L2 only, else the state
        needs ``l1_q``).
    average : bool
        Keep the running sum of the iterates.
    feedback : bool
        ASF's feedback (needs ``average``).
    """

    eta0: float
    power: float = 0.0
    lam: float = 1e-4
    l1: float = 0.0
    average: bool = False
    feedback: bool = False


@dataclass
class CRFSGDResult:
    """What the CRF ``sgd_epochs`` reports.

    Attributes
    ----------
    epochs : int
    diverged : bool
    mean_loss : float
        Mean ``-log p(y|x)`` of the last pass, at the pre-step weights.
    seconds : list of float
        Wall time of each pass.
    feedbacks : list of int
        The pass counts after which the weights were reset to the average.
    """

    epochs: int
    diverged: bool
    mean_loss: float
    seconds: list = field(default_factory=list)
    feedbacks: list = field(default_factory=list)


cdef inline bint _is_triangular(long long p) noexcept nogil:
    """Whether ``p = c (c + 1) / 2`` for some integer c >= 1 (ASF feedback points)."""
    cdef long long c = <long long>((sqrt(8.0 * <double>p + 1.0) - 1.0) / 2.0)
    cdef long long k
    for k in range(c - 1, c + 2):
        if k >= 1 and k * (k + 1) // 2 == p:
            return True
    return False


def is_feedback_pass(long long p):
    """Whether ASF feeds back after pass ``p`` (1, 3, 6, 10, ...)."""
    return bool(_is_triangular(p))


# ---- a pass shared by threads ---------------------------------------------

def shared_round_sequences(int n_threads):
    """The sequences of one round of a shared pass on ``n_threads`` threads:
    8, or 2 a thread beyond 4 threads. The sequences of a round are scored
    at the weights of its start, and ASF's constant step makes it sensitive
    to late gradients: on 1200 CoNLL-2000 sentences, rounds of 4 a thread
    lost 0.25 / 0.68 points of token accuracy at 2 / 3 threads, rounds of 2
    a thread 0.08 / 0.13; a round of 8 keeps the work between two meetings
    well above the cost of a meeting (benchmarks/RESULTS.md)."""
    return max(8, 2 * n_threads)


# (a thread owns groups of 8 rows: 8 rows of H doubles are whole cache lines
# for any H, so that two threads rarely write one line)
DEF ROW_GROUP_SHIFT = 3


ctypedef struct Scalars:
    # a thread's copy of ScaledWeights' scalars (w = scale v, the running
    # sum u + avg_coef v of n_iterates iterates, the total L1 penalty l1_u):
    # every thread applies the same updates to them
    double scale, avg_coef, n_iterates, l1_u
    double _pad[4]


cdef class SharedSGDPass:
    """What the threads of one shared pass of ``sgd_epochs`` read and write
    (``threads``); thread ``k`` runs ``SharedSGDPass.run(k)``. The weights
    are ``ScaledWeights``' arrays (``v``, the running sum ``u``, the L1
    ``q``), each row group written by its owner only; the scalars are each
    thread's own copy. The round's buffers and each thread's own rows are
    a ``RoundArrays``, as ``_crf_psa.SharedPass``'s."""
    cdef SequenceData ds
    cdef ScaledWeights w
    cdef Schedule sched
    cdef Barrier barrier
    cdef int n_threads
    cdef Py_ssize_t H, A
    cdef double lam, l1, threshold
    cdef bint fit_intercept, feedback
    cdef long long t
    cdef unsigned char[::1] finite
    cdef Scalars* scalars
    cdef Scalars[::1] scalars_arr
    cdef RoundArrays ra
    cdef list contexts

    def __cinit__(self, SequenceData ds, ScaledWeights w, options, int n_threads,
                  bint fit_intercept, allowed, long long t, bint feedback=False):
        cdef Py_ssize_t H = w.n_outputs, k
        self.ds, self.w = ds, w
        self.n_threads = n_threads
        self.H, self.A = H, w.n_features - H - 1
        self.lam, self.l1 = options.lam, options.l1
        self.sched.kind = CONSTANT if options.power == 0.0 else POWER
        self.sched.eta0, self.sched.alpha = options.eta0, options.lam + options.l1
        self.sched.t0, self.sched.power = 0.0, options.power
        # (ScaledWeights.shrink's thresholds)
        self.threshold = 1e-4 if w.averaged else 1e-9
        self.fit_intercept = fit_intercept
        self.feedback = feedback
        self.finite = np.ones(8 * n_threads, dtype=np.uint8)
        self.t = t
        self.ra = RoundArrays(ds, n_threads, H, shared_round_sequences(n_threads))
        barrier_init(&self.barrier, n_threads)
        self.scalars_arr = np.zeros(n_threads, dtype=[("scale", "f8"), ("avg_coef", "f8"),
                                                      ("n_iterates", "f8"), ("l1_u", "f8"),
                                                      ("_pad", "f8", (4,))])
        self.scalars = &self.scalars_arr[0]
        for k in range(n_threads):
            self.scalars[k].scale = w.scale
            self.scalars[k].avg_coef = w.avg_coef
            self.scalars[k].n_iterates = w.n_iterates
            self.scalars[k].l1_u = w.l1_u
        self.contexts = [context_for(w, 1, ds.max_len, allowed) for _ in range(n_threads)]

    def abort(self):
        """Release the threads waiting in the pass (one could not start)."""
        barrier_abort(&self.barrier)

    def run(self, int k):
        """Thread ``k``'s part of the pass; returns its summed ``-log
        p(y|x)`` (NaN at divergence)."""
        cdef CRFContext ctx = self.contexts[k]
        cdef double loss
        with nogil:
            loss = _shared_sgd_rounds(self, self.ds, self.w, ctx, k)
        return loss

    def finish(self, ScaledWeights w):
        """Give ``w`` the scalars the threads ended with; returns the time
        after the pass and whether every weight is finite."""
        w.scale = self.scalars[0].scale
        w.avg_coef = self.scalars[0].avg_coef
        w.n_iterates = self.scalars[0].n_iterates
        w.l1_u = self.scalars[0].l1_u
        return self.t + self.ds.n_sequences, bool(np.all(np.asarray(self.finite)[::8]))


cdef inline void _l1_rows(ScaledWeights w, const Scalars* sc, Py_ssize_t p,
                          Py_ssize_t n) noexcept nogil:
    """``n`` weights from ``p`` caught up with the L1 penalty (``_sequence_l1``
    with a thread's scalars)."""
    row_l1_apply(w.v + p, w.l1_q + p, w.u + p if w.averaged else NULL, sc.l1_u,
                 sc.avg_coef, n)


cdef inline void _own_fold(ScaledWeights w, Scalars* sc, Py_ssize_t bias_row, int k,
                           int J) noexcept nogil:
    """``ScaledWeights.fold`` on the rows thread ``k`` owns, and its scalars."""
    cdef Py_ssize_t j, p, H = w.n_outputs
    for j in range(w.n_features):
        if owner_of(j, bias_row, ROW_GROUP_SHIFT, J) != k:
            continue
        for p in range(j * H, (j + 1) * H):
            if w.averaged and sc.avg_coef != 0.0:
                w.u[p] += sc.avg_coef * w.v[p]
            w.v[p] *= sc.scale
            if w.has_l1:
                w.l1_q[p] *= sc.scale
    sc.l1_u *= sc.scale
    sc.scale = 1.0
    sc.avg_coef = 0.0


cdef inline bint _own_end(ScaledWeights w, Scalars* sc, Py_ssize_t bias_row, int k, int J,
                          bint feedback) noexcept nogil:
    """The end of a pass on the rows thread ``k`` owns: with ``feedback``,
    ``ScaledWeights.reset_to_average`` (the L1 catch-up, the fold, the mean
    of the iterates on the current support); whether its weights are
    finite (``is_finite``)."""
    cdef Py_ssize_t j, p, H = w.n_outputs
    cdef double inv
    cdef bint finite = isfinite(sc.scale)
    feedback = feedback and w.averaged and sc.n_iterates > 0.0
    if feedback:
        inv = 1.0 / sc.n_iterates
    for j in range(w.n_features):
        if owner_of(j, bias_row, ROW_GROUP_SHIFT, J) != k:
            continue
        if feedback:
            if w.has_l1:
                _l1_rows(w, sc, j * H, H)
            for p in range(j * H, (j + 1) * H):
                if sc.avg_coef != 0.0:
                    w.u[p] += sc.avg_coef * w.v[p]
                w.v[p] *= sc.scale
                if w.has_l1:
                    w.l1_q[p] *= sc.scale
                if not w.has_l1 or w.v[p] != 0.0:
                    w.v[p] = w.u[p] * inv
        for p in range(j * H, (j + 1) * H):
            finite &= isfinite(w.v[p])
    if feedback:
        sc.l1_u *= sc.scale
        sc.scale = 1.0
        sc.avg_coef = 0.0
    return finite


cdef inline void _own_step(ScaledWeights w, Py_ssize_t p, Py_ssize_t n, const double* c,
                           double gain, double C, const unsigned char* mk) noexcept nogil:
    """``v[p:p+n] += gain c`` (the weights that exist), the running sum kept
    (``CRFContext.add_gradient``'s step on one row)."""
    cdef Py_ssize_t h
    cdef double step
    for h in range(n):
        step = gain * c[h]
        if mk != NULL:
            step *= mk[p + h]
        w.v[p + h] += step
        if w.averaged:
            w.u[p + h] -= C * step


cdef double _shared_sgd_rounds(SharedSGDPass sh, SequenceData ds, ScaledWeights w,
                               CRFContext ctx, int k) noexcept nogil:
    """Thread ``k`` of ``J``, each round of sequences: (a) the partial
    emissions of the round's tokens on the attribute rows ``k`` owns (and
    the bias, thread 0), its transition rows into the round's transitions
    (with the L1 penalty, those rows caught up first); barrier; (f) the
    sequences it draws from the round's queue: ``-log p(y|x)``, the marginals;
    barrier; (b) each sequence in order: the shrink on the thread's scalars
    (a fold on its own rows), ``add_gradient``'s step on its own rows, the
    L1 penalty, the iterate counted. Returns the summed loss (NaN at
    divergence)."""
    cdef int J = sh.n_threads, sense = 0
    cdef Py_ssize_t H = sh.H, A = sh.A, trans_row = sh.A, bias_row = sh.A + sh.H
    cdef Py_ssize_t n = ds.n_sequences, q0 = 0, q1, q, tt, tok, e, i, h, p
    cdef long long t = sh.t
    cdef double x, loss_sum = 0.0
    cdef Scalars* sc = &sh.scalars[k]
    cdef bint bias_own = k == 0, with_l1 = sh.l1 != 0.0
    cdef double* em
    cdef ThreadRows rows = thread_rows(sh.ra, k, H)
    cdef Py_ssize_t rnd = 0
    while q0 < n:
        q1 = sequences_round_end(ds, q0, sh.ra.round_seqs, sh.ra.round_tokens, sh.ra.round_nnz, -1)
        if k == 0:
            start_inference(&sh.ra.rb, rnd)
        # (a) this thread's rows of the round: listed, (L1) caught up, read
        list_own_nonzeros(ds, q0, q1, A, bias_row, ROW_GROUP_SHIFT, J, k, &rows)
        tok = rows.tok_off[q1 - q0]
        for i in range(H + 1):
            if owner_of(trans_row + i, bias_row, ROW_GROUP_SHIFT, J) != k:
                continue
            if with_l1:
                _l1_rows(w, sc, (trans_row + i) * H, H)
            if i < H:                # (infer_round scales them)
                for h in range(H):
                    sh.ra.trans_round[i * H + h] = w.v[(trans_row + i) * H + h]
        for tt in range(tok):
            em = &sh.ra.em_part[k, tt, 0]
            for h in range(H):
                em[h] = w.v[bias_row * H + h] if bias_own else 0.0
            for e in range(rows.ends[tt], rows.ends[tt + 1]):
                p = <Py_ssize_t>rows.own_block[e] * H
                if w.averaged:       # (the running sum's row, which (b) writes)
                    prefetch_lines(w.u + p, H * sizeof(double))
                if with_l1:
                    _l1_rows(w, sc, p, H)
                x = ds.data[rows.own_at[e]]
                for h in range(H):
                    em[h] += x * w.v[p + h]
        if not barrier_wait(&sh.barrier, &sense):
            return NAN
        # (f) inference of this thread's sequences of the round
        infer_round(ctx, ds, q0, q1, J, &sh.ra.rb, rnd, sc.scale, rows.tok_off)
        if not barrier_wait(&sh.barrier, &sense):
            return NAN
        # (b) the steps on this thread's rows, in the order
        for q in range(q0, q1):
            if not isfinite(sh.ra.loss_round[q - q0]):
                return NAN
            loss_sum += sh.ra.loss_round[q - q0]
            _step_sequence(sh, ds, w, ctx, &rows, k, q, q0, t)
            t += 1
            if w.averaged:
                sc.avg_coef += sc.scale
                sc.n_iterates += 1.0
        q0 = q1
        rnd += 1
    sh.finite[8 * k] = _own_end(w, sc, bias_row, k, J, sh.feedback)
    return loss_sum


cdef inline void _l1_own_rows(SharedSGDPass sh, ScaledWeights w, Scalars* sc,
                              const ThreadRows* rows, int k, Py_ssize_t tok,
                              Py_ssize_t T) noexcept nogil:
    """The L1 penalty onto the rows thread ``k`` owns that a sequence's
    ``T`` tokens from ``tok`` read: their attribute rows, the transitions,
    the bias."""
    cdef Py_ssize_t e, i, H = sh.H, trans_row = sh.A, bias_row = sh.A + sh.H
    for e in range(rows.ends[tok], rows.ends[tok + T]):
        _l1_rows(w, sc, <Py_ssize_t>rows.own_block[e] * H, H)
    for i in range(H + 1):
        if owner_of(trans_row + i, bias_row, ROW_GROUP_SHIFT, sh.n_threads) == k:
            _l1_rows(w, sc, (trans_row + i) * H, H)


cdef inline void _step_sequence(SharedSGDPass sh, SequenceData ds, ScaledWeights w,
                                CRFContext ctx, const ThreadRows* rows, int k, Py_ssize_t q,
                                Py_ssize_t q0, long long t) noexcept nogil:
    """(b) The step of sequence ``q`` of the round from ``q0``, at time
    ``t``, on the rows thread ``k`` owns: the shrink on the thread's scalars
    (a fold on its own rows), ``add_gradient``'s step, the L1 penalty."""
    cdef int J = sh.n_threads
    cdef Py_ssize_t H = sh.H, trans_row = sh.A, bias_row = sh.A + sh.H
    cdef Py_ssize_t T, tok = rows.tok_off[q - q0], tt, e, i, h
    cdef double eta = step_size(&sh.sched, t), gain
    cdef Scalars* sc = &sh.scalars[k]
    cdef const unsigned char* mk = ctx.allowed
    cdef double* d = rows.work
    cdef const int* y = sequence_labels(ds, q, &T)
    if sh.l1 != 0.0:              # (the rows a step reads, caught up first)
        _l1_own_rows(sh, w, sc, rows, k, tok, T)
    sc.scale *= 1.0 - eta * sh.lam
    if sc.scale < sh.threshold:
        _own_fold(w, sc, bias_row, k, J)
    gain = eta / sc.scale
    for tt in range(T):
        for h in range(H):
            d[h] = -sh.ra.marg_round[(tok + tt) * H + h]
        d[y[tt]] += 1.0
        for e in range(rows.ends[tok + tt], rows.ends[tok + tt + 1]):
            _own_step(w, <Py_ssize_t>rows.own_block[e] * H, H, d,
                      gain * ds.data[rows.own_at[e]], sc.avg_coef, mk)
        if sh.fit_intercept and k == 0:
            _own_step(w, bias_row * H, H, d, gain, sc.avg_coef, NULL)
    for i in range(H):
        if owner_of(trans_row + i, bias_row, ROW_GROUP_SHIFT, J) == k:
            for h in range(H):
                d[h] = -sh.ra.edge_round[(q - q0) * H * H + i * H + h]
            _own_step(w, (trans_row + i) * H, H, d, gain, sc.avg_coef, mk)
    d[0] = 1.0
    for tt in range(1, T):
        if owner_of(trans_row + y[tt - 1], bias_row, ROW_GROUP_SHIFT, J) == k:
            _own_step(w, (trans_row + y[tt - 1]) * H + y[tt], 1, d, gain, sc.avg_coef, mk)
    if sh.l1 != 0.0:
        sc.l1_u += eta * sh.l1 / sc.scale
        _l1_own_rows(sh, w, sc, rows, k, tok, T)


cdef _store(state, ScaledWeights w, long long t, long long passes, unsigned int rng):
    """A call's end: the counters, the RNG state and the L1 total into ``state``
    (the weights are ``w``'s own arrays, folded)."""
    state.t, state.passes, state.seed, state.n_iterates = t, passes, rng, w.n_iterates
    if w.has_l1:
        state.l1_u = w.l1_u


def _shared_sgd_epochs(SequenceData ds, state, options, int n_epochs, bint shuffle,
                       bint fit_intercept, threads):
    """``sgd_epochs`` on ``threads``: each pass one ``SharedSGDPass``."""
    cdef ScaledWeights w = state.weights(averaged=options.average, l1=options.l1 > 0)
    cdef long long t = state.t, passes = state.passes
    cdef unsigned int rng = state.seed if state.seed != 0 else 1
    result = CRFSGDResult(epochs=0, diverged=False, mean_loss=0.0)
    loss_sum = 0.0
    for _ in range(n_epochs):
        began = now_seconds()
        if shuffle:
            ds.shuffle(&rng)
        # (the threads end the pass: ASF's feedback, the finiteness check)
        feedback = options.feedback and _is_triangular(passes + 1)
        sh = SharedSGDPass(ds, w, options, threads.n_threads, fit_intercept,
                           getattr(state, "allowed", None), t, feedback)
        try:
            losses = threads.map(sh.run, range(threads.n_threads))
        except BaseException:
            sh.abort()
            raise
        t, finite = sh.finish(w)
        loss_sum = losses[0]
        if not np.isfinite(loss_sum):
            result.diverged = True
            break
        result.epochs += 1
        passes += 1
        if feedback:
            result.feedbacks.append(passes)
        result.seconds.append(now_seconds() - began)
        if not finite:
            result.diverged = True
            break
    if w.has_l1:
        w.l1_apply_all()
    w.fold()
    _store(state, w, t, passes, rng)
    result.mean_loss = (loss_sum / ds.n_sequences
                        if ds.n_sequences and not result.diverged else 0.0)
    return result


def sgd_epochs(SequenceData ds, state, options, *, int n_epochs=1, bint shuffle=True,
               bint fit_intercept=True, int n_latent=1, threads=None):
    """Run ``n_epochs`` SGD passes on the CRF log-likelihood.

    Parameters
    ----------
    ds : SequenceData (with labels)
    state : CRFState
        Updated in place (weights, running sum, counters).
    options : CRFSGDOptions
    n_epochs : int
    shuffle : bool
        Shuffle the sequences before each pass.
    fit_intercept : bool
        Train the bias row.
    n_latent : int
        Hidden states per label.
    threads : ThreadRunner or None
        With two threads or more (and ``n_latent == 1``), the passes are
        shared (``SharedSGDPass``): each thread owns groups of rows
        (``owner_of``), which it alone writes; the sequences go by in
        rounds, each inferred at the weights of the round's start (stale by
        at most ``shared_round_sequences(n_threads) - 1`` updates), then
        stepped in order, every thread on its own rows. The model depends on
        the number of threads, not on their timing.

    Returns
    -------
    result : CRFSGDResult
    """
    if not ds.has_labels:
        raise ValueError("labels are required for training")
    if options.feedback and not options.average:
        raise ValueError("feedback needs averaged weights")
    cdef double lam = options.lam, l1 = options.l1
    if not (options.eta0 > 0 and options.eta0 * (lam + l1) < 1.0):
        raise ValueError(f"eta0={options.eta0} must be positive with eta0 * alpha < 1")
    if ds.n_features > state.n_attributes:
        raise ValueError("the data have more attributes than the weights")
    if (threads is not None and threads.n_threads > 1 and n_latent == 1
            and ds.n_sequences > 1):
        return _shared_sgd_epochs(ds, state, options, n_epochs, shuffle, fit_intercept, threads)
    cdef ScaledWeights w = state.weights(averaged=options.average, l1=l1 > 0)
    cdef CRFContext ctx = context_for(w, n_latent, ds.max_len, getattr(state, "allowed", None))
    cdef SequenceSteps steps = SequenceSteps()
    steps.ds, steps.ctx, steps.n_examples = ds, ctx, ds.n_sequences
    steps.fit_intercept = fit_intercept
    steps.lam, steps.l1 = lam, l1
    cdef Schedule sched
    sched.kind = CONSTANT if options.power == 0.0 else POWER
    sched.eta0, sched.alpha, sched.t0, sched.power = options.eta0, lam + l1, 0.0, options.power
    cdef bint feedback = options.feedback
    cdef long long t = state.t, passes = state.passes
    cdef unsigned int rng = state.seed if state.seed != 0 else 1
    cdef int _epoch, epochs_run = 0
    cdef double loss_sum = 0.0, t_start
    cdef bint diverged = False, fb_now
    result = CRFSGDResult(epochs=0, diverged=False, mean_loss=0.0)
    with nogil:
        for _epoch in range(n_epochs):
            t_start = now_seconds()
            if shuffle:
                ds.shuffle(&rng)
            loss_sum = sgd_pass_sequences(steps, w, &sched, &t)
            if loss_sum != loss_sum:
                diverged = True
                break
            epochs_run += 1
            passes += 1
            fb_now = feedback and _is_triangular(passes)
            if fb_now:
                w.reset_to_average()
            with gil:
                result.seconds.append(now_seconds() - t_start)
                if fb_now:
                    result.feedbacks.append(passes)
            if not w.is_finite():
                diverged = True
                break
        if w.has_l1:
            w.l1_apply_all()
        w.fold()
    _store(state, w, t, passes, rng)
    result.epochs, result.diverged = epochs_run, diverged
    result.mean_loss = loss_sum / ds.n_sequences if ds.n_sequences and not diverged else 0.0
    return result
