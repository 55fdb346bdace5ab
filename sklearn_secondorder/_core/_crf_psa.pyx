"""Periodic Step-size Adaptation (PSA) for CRFs, on the lazy core.

PSA (Hsu, Chang, Huang and Lee, NIPS 2009 workshop, Algorithm 1): SGD with a
step size per parameter, ``theta <- (1 - eta lam) theta + eta o grad log p(y|x)``
(the gradient of ``-log p(y|x) + lam/2 ||theta||^2``), one update per
sequence; every ``2b`` updates, from the snapshots ``theta(t)``,
``theta(t+b)``, ``theta(t+2b)``, each step size is adapted (Eqs. 6-10).
Windows are aligned on the global update counter (``t = 0, 2b, 4b, ...``).

The weights are a ``LazyStepState`` (``_lazy_steps``: one record per
weight, the same core as the linear kernel ``_psa_fast``), in
``CRFContext``'s layout: blocks of ``H = n_states`` records, the ``A``
attribute rows, the ``H`` transition rows (``from``), then the bias. All of
them carry the penalty (as CRFsuite's). An update brings the blocks it reads
to ``t`` (``touch``) as the emissions are read, shrinks each at its first
visit (``last == t``; then ``last = t + 1``), adds the tokens' gradient
terms, and, at the end of a window's half, applies that event to the blocks
it stepped (in cache), so that ``last`` always means "every event up to it
applied". Every block is caught up at the end of each pass.

With the L1 penalty (CRFsuite's ``c1``) a row's first visit also owes the
step's ``eta C``, and every weight the sequence touched is clipped once its
gradient terms are in (clipping twice is clipping once).

``SharedPass`` is the same pass on several threads sharing the one state
(``n_jobs``): rounds of sequences inferred at the round's start, the
forward-backward passes shared out, the steps applied in order by the
owners of the rows (``doc/core.md``, "Threads on one state").
"""
from libc.math cimport NAN, isfinite

from ._block_ops cimport block_add, block_emit, block_shrink
from ._crf_infer cimport CRFContext
from ._crf_rounds cimport (RoundArrays, ThreadRows, infer_round, list_own_nonzeros,
                           sequence_labels, sequences_round_end, start_inference,
                           thread_rows)
from ._dataset cimport SequenceData
from ._lazy_records cimport Block, Layout, block_at, labels_of, width_of
from ._lazy_steps cimport (L2Only, LazyCore, Log1pRate, Penalty, RateRule, SeriesRate, WithL1,
                           apply_event, catch_up_all, flush_block, l1_clip, l1_owe, last_event,
                           layout_of, make_core, touch)
from ._numeric cimport now_seconds
from ._prefetch cimport prefetch_block
from ._shared_state cimport Barrier, barrier_abort, barrier_init, barrier_wait
from ._shared_state cimport line_shift_of, owner_of

# the lazy core's event walk inlined into this module's passes, by name
cdef extern from "_lazy_inline.h":
    pass

from ._lazy_steps import PSAResult

import numpy as np


cdef inline void _shrink(Block r, Py_ssize_t n, double lam, double l1,
                         const Penalty* pen) noexcept nogil:
    """One update's shrink of ``n`` weights, ``v *= max(0, 1 - eta lam)``
    (and, with the L1 penalty, the step's ``eta C`` owed; clipped later)."""
    cdef Py_ssize_t h
    cdef double f
    if Penalty is L2Only:
        block_shrink(r.v, r.eta, lam, n)
    else:
        for h in range(n):
            f = 1.0 - r.eta[h] * lam
            f = f if f > 0.0 else 0.0
            r.v[h] *= f
            l1_owe(r, h, f, r.eta[h] * l1)


cdef inline void _visit(Block r, Py_ssize_t H, long long t, double lam, double l1,
                        const Penalty* pen, Py_ssize_t* stepped, Py_ssize_t* n_stepped,
                        Py_ssize_t row) noexcept nogil:
    """A row's first visit in update ``t``: its shrink, and it is listed as
    stepped."""
    if r.last[0] == t:
        r.last[0] = t + 1
        _shrink(r, H, lam, l1, pen)
        stepped[n_stepped[0]] = row
        n_stepped[0] += 1


cdef inline void _add(Block r, Py_ssize_t H, double x, const double* d,
                      const unsigned char* mask) noexcept nogil:
    """A token's gradient term on one row: ``v[h] += eta[h] x d[h]`` (only
    the weights that exist, ``mask`` not NULL)."""
    cdef Py_ssize_t h
    if mask == NULL:
        block_add(r.v, r.eta, x, d, H)
    else:
        for h in range(H):
            if mask[h]:
                r.v[h] += r.eta[h] * x * d[h]


cdef inline void _emit_held(double* em, Block r, Py_ssize_t w, const int* labels,
                            double x) noexcept nogil:
    """The emission scores of an attribute that holds only its trained
    labels' weights: ``em[labels[s]] += x v[s]``."""
    cdef Py_ssize_t s
    for s in range(w):
        em[labels[s]] += x * r.v[s]


cdef inline void _add_held(Block r, Py_ssize_t w, const int* labels, double x,
                           const double* d) noexcept nogil:
    """A token's gradient term on a row that holds only its trained labels'
    weights: ``v[s] += eta[s] x d[labels[s]]``."""
    cdef Py_ssize_t s
    for s in range(w):
        r.v[s] += r.eta[s] * x * d[labels[s]]


cdef double _update(const Layout* L, SequenceData ds, Py_ssize_t s, CRFContext ctx,
                    const LazyCore* c, const Penalty* pen, const RateRule* rule, long long t,
                    bint fit_intercept, Py_ssize_t* stepped) noexcept nogil:
    """One update on sequence ``s`` at time ``t``: the blocks read to ``t``,
    ``-log p(y|x)`` at ``theta(t)``, then line 5 of Algorithm 1; returns the
    loss (NaN at divergence)."""
    cdef Py_ssize_t H = ctx.n_states, A = ctx.n_attributes, j, h, i, tt, n_stepped = 0
    cdef Py_ssize_t trans_row = A, bias_row = A + H, T, w
    cdef long long r, kk, first = ds.offsets[s], ev = last_event(c, t)
    cdef const int* y = &ds.labels[0] + first
    cdef double lam = c.lam, l1 = c.l1, ll
    cdef double* d = ctx.tmp
    cdef double* em
    cdef const unsigned char* mk = ctx.allowed
    cdef Block row, bias = block_at(L, bias_row)
    # theta(t): the transitions (row i of H: from label i), the bias (read
    # even when not fitted) and the sequence's attribute rows
    for j in range(trans_row, bias_row + 1):
        touch(block_at(L, j), H, t, ev, lam, l1, c, pen, rule)
    for i in range(H):
        row = block_at(L, trans_row + i)
        for h in range(H):
            ctx.trans[i * H + h] = row.v[h]
    ctx.finish_transitions()
    T = ds.offsets[s + 1] - first
    ctx.T = <int>T
    for tt in range(T):
        em = ctx.emit + tt * H
        for h in range(H):
            em[h] = bias.v[h]
        r = first + tt
        for kk in range(ds.indptr[r], ds.indptr[r + 1]):
            j = ds.indices[kk]
            if j >= A:                 # an attribute unknown to the model
                continue
            row = block_at(L, j)
            w = width_of(L, j)
            touch(row, w, t, ev, lam, l1, c, pen, rule)
            if L.record_at == NULL:
                block_emit(em, row.v, ds.data[kk], H)
            else:                      # (the row's trained labels only)
                _emit_held(em, row, w, labels_of(L, j), ds.data[kk])
    ctx.finish_emissions(NULL)
    ll = ctx.loglik(y)
    if not isfinite(ll):
        return ll
    # the step: each row shrunk at its first visit, then the tokens' terms;
    # the weights that do not exist (mask 0) get no gradient term and stay 0
    for tt in range(T):
        for h in range(H):
            d[h] = -ctx.marg[tt * H + h]
        d[y[tt]] += 1.0
        r = first + tt
        for kk in range(ds.indptr[r], ds.indptr[r + 1]):
            j = ds.indices[kk]
            if j >= A:
                continue
            row = block_at(L, j)
            if L.record_at == NULL:
                _visit(row, H, t, lam, l1, pen, stepped, &n_stepped, j)
                _add(row, H, ds.data[kk], d, NULL if mk == NULL else mk + j * H)
            else:
                w = width_of(L, j)
                _visit(row, w, t, lam, l1, pen, stepped, &n_stepped, j)
                _add_held(row, w, labels_of(L, j), ds.data[kk], d)
        if fit_intercept:
            _visit(bias, H, t, lam, l1, pen, stepped, &n_stepped, bias_row)
            _add(bias, H, 1.0, d, NULL if mk == NULL else mk + bias_row * H)
    # the transitions: shrink and the edge marginals, then the observed pairs
    for i in range(H):
        row = block_at(L, trans_row + i)
        _shrink(row, H, lam, l1, pen)
        for h in range(H):
            row.v[h] -= row.eta[h] * (ctx.edge[i * H + h] if mk == NULL
                                      else ctx.edge[i * H + h] * mk[(A + i) * H + h])
        row.last[0] = t + 1
        stepped[n_stepped] = trans_row + i
        n_stepped += 1
    for tt in range(1, T):
        row = block_at(L, trans_row + y[tt - 1])
        h = y[tt]
        row.v[h] += row.eta[h] if mk == NULL else row.eta[h] * mk[(A + y[tt - 1]) * H + h]
    if Penalty is WithL1:            # the clips, after every gradient term
        for i in range(n_stepped):
            row = block_at(L, stepped[i])
            for h in range(width_of(L, stepped[i])):
                l1_clip(row, h)
    if c.b > 0 and (t + 1) % c.b == 0:   # the stepped rows take the event at once
        for i in range(n_stepped):
            apply_event(block_at(L, stepped[i]), width_of(L, stepped[i]),
                        ((t + 1) // c.b) & 1, c)
    return -ll


cdef double _pass(SequenceData ds, const Layout* L, CRFContext ctx, const LazyCore* c,
                  const Penalty* pen, const RateRule* rule, long long* t, bint fit_intercept,
                  Py_ssize_t* stepped) noexcept nogil:
    """One pass in the current order; returns the summed ``-log p(y|x)``, or
    NaN at divergence."""
    cdef Py_ssize_t k, s, nxt, A = ctx.n_attributes
    cdef long long kk
    cdef double loss, loss_sum = 0.0
    for k in range(ds.n_sequences):
        s = ds.order[k]
        if k + 1 < ds.n_sequences:
            # the attribute rows the next sequence touches (mostly cold;
            # written out here, not in a function: _prefetch.h says why)
            nxt = ds.order[k + 1]
            for kk in range(ds.indptr[ds.offsets[nxt]], ds.indptr[ds.offsets[nxt + 1]]):
                if ds.indices[kk] < A:
                    prefetch_block(L, ds.indices[kk])
        loss = _update(L, ds, s, ctx, c, pen, rule, t[0], fit_intercept, stepped)
        if not isfinite(loss):
            return loss
        loss_sum += loss
        t[0] += 1
    return loss_sum


cdef Py_ssize_t _max_row_nnz(SequenceData ds):
    """The most non-zeros a sequence has (its tokens' attributes)."""
    cdef Py_ssize_t s, most = 0
    for s in range(ds.n_sequences):
        most = max(most, ds.indptr[ds.offsets[s + 1]] - ds.indptr[ds.offsets[s]])
    return most


# ---- one call's passes, their specialisation picked once ------------------

cdef class SharedPass


cdef class KernelJob:
    """What one pass of a ``psa_epochs`` call needs (``run_picked`` runs it
    in the specialisation its constants choose): a pass (``_pass``) and the
    catch-up of every block, or thread ``k``'s part of a shared pass
    (``sh``)."""
    cdef SequenceData ds
    cdef Layout L
    cdef LazyCore c
    cdef CRFContext ctx
    cdef long long t
    cdef unsigned int rng
    cdef bint fit_intercept
    cdef Py_ssize_t n_blocks
    cdef Py_ssize_t[::1] stepped   # the rows an update steps
    cdef double loss_sum           # the pass's summed -log p(y|x)
    cdef bint diverged
    cdef double flush_seconds      # the pass's catch-up
    cdef SharedPass sh
    cdef int k


include "_lazy_pick.pxi"


cdef long long run_specialised(KernelJob job, const Penalty* pen,
                               const RateRule* rule) noexcept nogil:
    """One pass of ``job`` for one penalty kind and rate rule; returns the
    time after it."""
    cdef double t_flush
    if job.sh is not None:
        return _shared_rounds(job.sh, job.sh.ds, job.ctx, job.k, pen, rule)
    job.loss_sum = _pass(job.ds, &job.L, job.ctx, &job.c, pen, rule, &job.t, job.fit_intercept,
                         &job.stepped[0])
    t_flush = now_seconds()
    job.diverged = not isfinite(job.loss_sum)
    job.diverged |= not catch_up_all(&job.L, job.n_blocks, -1, job.t, &job.c, pen, rule)
    job.flush_seconds = now_seconds() - t_flush
    return job.t


cdef object _epochs(KernelJob job, state, int n_epochs, bint shuffle):
    """``psa_epochs`` on one thread: ``n_epochs`` passes, stopped at the
    first that diverges."""
    cdef double t_start
    result = PSAResult(epochs=0, diverged=False)
    for _ in range(n_epochs):
        t_start = now_seconds()
        with nogil:
            if shuffle:
                job.ds.shuffle(&job.rng)
            run_picked(job, &job.c)
        result.flush_seconds.append(job.flush_seconds)
        if job.diverged:
            break
        result.epochs += 1
        result.seconds.append(now_seconds() - t_start)
    state.t, state.seed = job.t, job.rng
    result.diverged = job.diverged
    result.mean_loss = (job.loss_sum / job.ds.n_sequences
                        if job.ds.n_sequences and not job.diverged else 0.0)
    return result


# ---- a pass shared by threads ---------------------------------------------

#: Sequences a thread infers in one round of a shared pass: the sequences of
#: a round are scored at the weights of its start, so a sequence's
#: marginals miss the updates of at most ``n_threads * SHARED_ROUND_SEQUENCES
#: - 1`` sequences before it.
SHARED_ROUND_SEQUENCES = 4


cdef class SharedPass:
    """What the threads of one shared CRF pass read and write (``psa_epochs``
    with ``threads``); thread ``k`` runs ``SharedPass.run(k)``.

    The round's buffers and each thread's own rows are a ``RoundArrays``
    (the partial emissions: a thread's own attribute rows, the bias in
    thread 0's; the transitions at the round's start, each row by its
    owner); per thread besides, the rows an update stepped and a
    ``CRFContext``.
    """
    cdef SequenceData ds
    cdef object state         # (L points into its records: held while the pass lives)
    cdef Layout L
    cdef LazyCore c
    cdef Barrier barrier
    cdef int n_threads, line_shift
    cdef Py_ssize_t H, A
    cdef bint fit_intercept
    cdef long long t
    cdef RoundArrays ra
    cdef Py_ssize_t[:, ::1] stepped
    cdef double[::1] losses   # each thread's summed -log p(y|x), 8 apart
    cdef list contexts

    def __cinit__(self, SequenceData ds, state, options, int n_threads, bint fit_intercept,
                  allowed, Py_ssize_t seqs_per_thread):
        cdef Py_ssize_t H = state.n_outputs
        self.ds = ds
        self.state = state
        self.L = layout_of(state)
        self.c = make_core(options, state)
        self.n_threads = n_threads
        self.line_shift = line_shift_of(self.L.stride)
        self.H, self.A = H, state.n_blocks - H - 1
        self.ra = RoundArrays(ds, n_threads, H, n_threads * seqs_per_thread)
        self.fit_intercept = fit_intercept
        self.t = state.t
        barrier_init(&self.barrier, n_threads)
        self.stepped = np.zeros((n_threads, self.ra.most_nnz + H + 8), dtype=np.intp)
        self.losses = np.zeros(8 * n_threads)
        self.contexts = []
        for _ in range(n_threads):
            ctx = CRFContext(H, 1, ds.max_len, self.A)
            ctx.set_allowed(allowed)
            self.contexts.append(ctx)

    def abort(self):
        """Release the threads waiting in the pass (one could not start)."""
        barrier_abort(&self.barrier)

    def run(self, int k):
        """Thread ``k``'s part of the pass; returns the time after it."""
        cdef KernelJob job = KernelJob.__new__(KernelJob)
        cdef long long t
        job.sh, job.k, job.ctx = self, k, self.contexts[k]
        with nogil:
            t = run_picked(job, &self.c)
        return t


cdef long long _shared_rounds(SharedPass sh, SequenceData ds, CRFContext ctx, int k,
                              const Penalty* pen, const RateRule* rule) noexcept nogil:
    """Thread ``k`` of ``J``, each round of sequences: (a) its own rows
    brought to the round's start ``t`` and read (``_read_round``); barrier;
    (f) the sequences it draws from the round's queue: the emissions summed
    in thread order, ``-log p(y|x)`` and the marginals (``CRFContext``),
    into the round's buffers; barrier; (b) each sequence in order, at its
    own time: the step on the rows ``k`` owns (``_step_sequence``).
    Returns the time after the pass, every owned block flushed to it."""
    cdef const LazyCore* c = &sh.c
    cdef int J = sh.n_threads, sense = 0
    cdef Py_ssize_t H = sh.H, A = sh.A, bias_row = sh.A + sh.H
    cdef Py_ssize_t q0 = 0, q1, q, j, n_own, rnd = 0
    cdef long long t = sh.t
    cdef double loss_sum = 0.0
    cdef bint diverged = False, finite = True
    cdef ThreadRows rows = thread_rows(sh.ra, k, H)
    while q0 < ds.n_sequences and not diverged:
        q1 = sequences_round_end(ds, q0, sh.ra.round_seqs, sh.ra.round_tokens, sh.ra.round_nnz,
                                 last_event(c, t) + c.b - t if c.b > 0 else -1)
        if k == 0:
            start_inference(&sh.ra.rb, rnd)
        n_own = list_own_nonzeros(ds, q0, q1, A, bias_row, sh.line_shift, J, k, &rows)
        _read_round(sh, ds, &rows, k, n_own, rows.tok_off[q1 - q0], t, pen, rule)
        if not barrier_wait(&sh.barrier, &sense):
            return t
        # (f) inference of this thread's sequences of the round
        infer_round(ctx, ds, q0, q1, J, &sh.ra.rb, rnd, 1.0, rows.tok_off)
        if not barrier_wait(&sh.barrier, &sense):
            return t
        # (b) the steps on the owned rows, in the order, each at its time
        for q in range(q0, q1):
            if not isfinite(sh.ra.loss_round[q - q0]):
                diverged = True
                break
            loss_sum += sh.ra.loss_round[q - q0]
            _step_sequence(sh, ds, ctx, &rows, k, q, q0, t, pen, rule)
            t += 1
        q0 = q1
        rnd += 1
    if diverged:
        sh.losses[8 * k] = NAN
        return t
    for j in range(A + H + 1):
        if owner_of(j, bias_row, sh.line_shift, J) == k:
            finite &= flush_block(&sh.L, j, True, t, c, pen, rule)
    sh.losses[8 * k] = loss_sum if finite else NAN
    return t


cdef inline void _read_round(SharedPass sh, SequenceData ds, const ThreadRows* rows, int k,
                             Py_ssize_t n_own, Py_ssize_t n_tokens, long long t,
                             const Penalty* pen, const RateRule* rule) noexcept nogil:
    """(a) Thread ``k``'s rows of a round brought to ``t``: the owned
    non-zeros of the round's ``n_tokens`` tokens (``list_own_nonzeros``)
    read into the partial emissions, the owned transition rows into the
    round's transitions, and (thread 0) the bias."""
    cdef const LazyCore* c = &sh.c
    cdef const Layout* L = &sh.L
    cdef Py_ssize_t H = sh.H, trans_row = sh.A, bias_row = sh.A + sh.H, i, h, tt, e, j, w
    cdef long long ev = last_event(c, t)
    cdef double lam = c.lam, l1 = c.l1
    cdef bint bias_own = k == 0
    cdef double* em
    cdef Block row, bias = block_at(L, bias_row)
    for i in range(H):
        if owner_of(trans_row + i, bias_row, sh.line_shift, sh.n_threads) == k:
            row = block_at(L, trans_row + i)
            touch(row, H, t, ev, lam, l1, c, pen, rule)
            for h in range(H):
                sh.ra.trans_round[i * H + h] = row.v[h]
    if bias_own:
        touch(bias, H, t, ev, lam, l1, c, pen, rule)
    for tt in range(n_tokens):
        em = &sh.ra.em_part[k, tt, 0]
        for h in range(H):
            em[h] = bias.v[h] if bias_own else 0.0
        for e in range(rows.ends[tt], rows.ends[tt + 1]):
            if e + 4 < n_own:
                prefetch_block(L, rows.own_block[e + 4])
            j = rows.own_block[e]
            row = block_at(L, j)
            w = width_of(L, j)
            touch(row, w, t, ev, lam, l1, c, pen, rule)
            if L.record_at == NULL:
                block_emit(em, row.v, ds.data[rows.own_at[e]], H)
            else:
                _emit_held(em, row, w, labels_of(L, j), ds.data[rows.own_at[e]])


cdef inline void _step_sequence(SharedPass sh, SequenceData ds, CRFContext ctx,
                                const ThreadRows* rows, int k, Py_ssize_t q, Py_ssize_t q0,
                                long long t, const Penalty* pen,
                                const RateRule* rule) noexcept nogil:
    """(b) ``_update``'s step of sequence ``q`` of the round from ``q0``, at
    time ``t``, on the rows thread ``k`` owns: the shrink at a row's first
    visit, the tokens' terms, the transitions, the clips, the events."""
    cdef const LazyCore* c = &sh.c
    cdef const Layout* L = &sh.L
    cdef int J = sh.n_threads, shift = sh.line_shift
    cdef Py_ssize_t H = sh.H, A = sh.A, trans_row = sh.A, bias_row = sh.A + sh.H
    cdef Py_ssize_t T, tok = rows.tok_off[q - q0], tt, e, i, h, j, w, n_stepped = 0
    cdef long long ev = last_event(c, t)
    cdef double lam = c.lam, l1 = c.l1, x
    cdef const unsigned char* mk = ctx.allowed
    cdef double* d = rows.work
    cdef Py_ssize_t* stepped = &sh.stepped[k, 0]
    cdef const int* y = sequence_labels(ds, q, &T)
    cdef Block row, bias = block_at(L, bias_row)
    for tt in range(T):
        for h in range(H):
            d[h] = -sh.ra.marg_round[(tok + tt) * H + h]
        d[y[tt]] += 1.0
        for e in range(rows.ends[tok + tt], rows.ends[tok + tt + 1]):
            j = rows.own_block[e]
            row = block_at(L, j)
            w = width_of(L, j)
            if row.last[0] <= t:          # (t + 1: visited in this update)
                touch(row, w, t, ev, lam, l1, c, pen, rule)
            x = ds.data[rows.own_at[e]]
            if L.record_at == NULL:
                _visit(row, H, t, lam, l1, pen, stepped, &n_stepped, j)
                _add(row, H, x, d, NULL if mk == NULL else mk + j * H)
            else:
                _visit(row, w, t, lam, l1, pen, stepped, &n_stepped, j)
                _add_held(row, w, labels_of(L, j), x, d)
        if sh.fit_intercept and k == 0:
            if bias.last[0] <= t:
                touch(bias, H, t, ev, lam, l1, c, pen, rule)
            _visit(bias, H, t, lam, l1, pen, stepped, &n_stepped, bias_row)
            _add(bias, H, 1.0, d, NULL if mk == NULL else mk + bias_row * H)
    for i in range(H):
        if owner_of(trans_row + i, bias_row, shift, J) != k:
            continue
        row = block_at(L, trans_row + i)
        if row.last[0] <= t:
            touch(row, H, t, ev, lam, l1, c, pen, rule)
        _shrink(row, H, lam, l1, pen)
        for h in range(H):
            x = sh.ra.edge_round[(q - q0) * H * H + i * H + h]
            row.v[h] -= row.eta[h] * (x if mk == NULL else x * mk[(A + i) * H + h])
        row.last[0] = t + 1
        stepped[n_stepped] = trans_row + i
        n_stepped += 1
    for tt in range(1, T):
        if owner_of(trans_row + y[tt - 1], bias_row, shift, J) == k:
            row = block_at(L, trans_row + y[tt - 1])
            h = y[tt]
            row.v[h] += (row.eta[h] if mk == NULL
                         else row.eta[h] * mk[(A + y[tt - 1]) * H + h])
    if Penalty is WithL1:
        for i in range(n_stepped):
            row = block_at(L, stepped[i])
            for h in range(width_of(L, stepped[i])):
                l1_clip(row, h)
    if c.b > 0 and (t + 1) % c.b == 0:
        for i in range(n_stepped):
            apply_event(block_at(L, stepped[i]), width_of(L, stepped[i]),
                        ((t + 1) // c.b) & 1, c)


def shared_pass(SharedPass sh, threads):
    """One pass of ``sh`` on ``threads`` (a ``ThreadRunner``: thread ``k``
    runs ``sh.run(k)``); returns the time after it and the summed
    ``-log p(y|x)`` (NaN at divergence: a non-finite loss or weight)."""
    try:
        times = threads.map(sh.run, range(sh.n_threads))
    except BaseException:
        sh.abort()
        raise
    losses = np.asarray(sh.losses)[::8]
    return times[0], (float(losses[0]) if np.all(np.isfinite(losses)) else float("nan"))


def _shared_epochs(SequenceData ds, state, options, int n_epochs, bint shuffle,
                   bint fit_intercept, allowed, threads):
    """``psa_epochs`` on ``threads``: each pass one ``shared_pass``."""
    cdef unsigned int rng = state.seed if state.seed != 0 else 1
    result = PSAResult(epochs=0, diverged=False)
    loss_sum = 0.0
    for _ in range(n_epochs):
        began = now_seconds()
        if shuffle:
            ds.shuffle(&rng)
        sh = SharedPass(ds, state, options, threads.n_threads, fit_intercept, allowed,
                        SHARED_ROUND_SEQUENCES)
        state.t, loss_sum = shared_pass(sh, threads)
        if not np.isfinite(loss_sum):
            result.diverged = True
            break
        result.epochs += 1
        result.seconds.append(now_seconds() - began)
        result.flush_seconds.append(0.0)
    state.seed = rng
    result.mean_loss = (loss_sum / ds.n_sequences
                        if ds.n_sequences and not result.diverged else 0.0)
    return result


def psa_epochs(SequenceData ds, state, options, *, int n_epochs=1, bint shuffle=True,
               bint fit_intercept=True, allowed=None, threads=None):
    """Run ``n_epochs`` passes of PSA (Algorithm 1) over ``ds``.

    Parameters
    ----------
    ds : SequenceData (with labels)
    state : LazyStepState
        ``n_attributes + n_states + 1`` blocks of ``n_states`` weights
        (``CRFContext``'s layout); updated in place, ``t`` and ``seed``
        included. Every block is current at ``t`` on return.
    options : PSAOptions
        ``lam`` (L2 on every weight, bias and transitions included),
        ``period`` (``b``), ``psa_alpha``, ``psa_beta``, ``kappa``, and
        ``l1`` (the L1 strength; the state then needs L1 records).
    n_epochs : int
    shuffle, fit_intercept : bool
    allowed : uint8 ndarray of shape (n_weights,) or None
        The weights that exist (``CRFContext.set_allowed``: CRFsuite's
        feature set); the others get no gradient term and stay 0. None: all.
        A state made with ``exists`` (``LazyStepState.zeros``) holds only
        the attribute rows' existing weights, so a touch costs them alone.
    threads : ThreadRunner or None
        With two threads or more, the passes are shared (``SharedPass``):
        each thread owns a share of the rows (``owner_of``), which it alone
        reads and writes; the sequences go by in rounds, each inferred at
        the weights of the round's start (stale by at most ``n_threads *
        SHARED_ROUND_SEQUENCES - 1`` updates) and then stepped in order,
        every thread on its own rows. The model depends on the number of
        threads, not on their timing. (``flush_seconds`` are 0: the flush is
        the threads'.)

    Returns
    -------
    result : PSAResult
        With ``mean_loss``, ``seconds`` (per pass, the end-of-pass catch-up
        included) and ``flush_seconds`` (that catch-up alone).
    """
    if not ds.has_labels:
        raise ValueError("labels are required for training")
    if not options.period >= 1:
        raise ValueError("period must be >= 1")
    cdef Py_ssize_t H = state.n_outputs
    state.prepare()
    if state.n_blocks < H + 1:
        raise ValueError("state does not match n_states")
    if options.l1 > 0 and not state.has_l1:
        raise ValueError("the L1 penalty needs L1 records (LazyStepState.with_l1)")
    if threads is not None and threads.n_threads > 1 and ds.n_sequences > 1:
        return _shared_epochs(ds, state, options, n_epochs, shuffle, fit_intercept, allowed,
                              threads)
    cdef KernelJob job = KernelJob.__new__(KernelJob)
    job.ds, job.L, job.c = ds, layout_of(state), make_core(options, state)
    job.ctx = CRFContext(H, 1, ds.max_len, state.n_blocks - H - 1)
    job.ctx.set_allowed(allowed)
    job.t, job.rng = state.t, state.seed if state.seed != 0 else 1
    job.fit_intercept, job.n_blocks = fit_intercept, state.n_blocks
    # the rows an update steps: at most its non-zeros, the transitions, the bias
    job.stepped = np.zeros(_max_row_nnz(ds) + H + 1, dtype=np.intp)
    return _epochs(job, state, n_epochs, shuffle)
