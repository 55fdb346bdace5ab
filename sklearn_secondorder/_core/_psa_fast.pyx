"""PSA epochs (Hsu et al., Algorithm 1) on the shared core.

Mini-batch 1: each row with non-zero weight is one update ``t``. The weights
live in a ``LazyStepWeights`` (per-coordinate steps, lazy L2 decay and lazy
window-end adaptation), so a step costs O(nnz(x) n_outputs) whatever the
number of features, and the only O(n_features) work is the flush at the end
of a call (and the per-epoch finiteness check).

Two schedules for the events (every ``b`` updates), both with the arithmetic
of ``LazyStepWeights.catch_up``:

- lazy (high-dimensional models): a block is caught up across the events it
  missed when it is next touched, whole idle windows in closed form, so an
  event costs nothing and a touch loads the block's state once;
- sweep every block (small models: at most ``2 b`` times the mean non-zeros
  per row of blocks): ``LazyStepWeights.sweep_all`` applies each event to all
  blocks in storage order, a streaming loop that is cheaper than the
  data-dependent catch-up in the row loop when the whole model is in cache.
"""
import numpy as np
from libc.stdlib cimport malloc, free

from ._dataset cimport RowDataset, fetch_row, prefetch_row
from ._losses cimport Loss, softmax_loss
from ._weights cimport (LazyStepWeights, lazy_catch_up, decay_factor, prefetch_block,
                       row_emit, row_shrink_step)

cdef double DLOSS_CLIP = 1e12
cdef long long NO_SWEEP = 1LL << 62


def psa_epochs(RowDataset ds, dict state, *, Loss loss=None, int n_outputs=1,
               double alpha=1e-4, long long period=10, double psa_alpha=0.9999,
               double psa_beta=0.99, double kappa=0.9, int n_epochs=1,
               bint shuffle=True, bint fit_intercept=True, int sweep_all=-1):
    """Run ``n_epochs`` PSA passes over ``ds``, updating ``state`` in place.

    Parameters
    ----------
    ds : RowDataset
    state : dict
        ``ve`` (weights and step sizes) and ``snaps`` (window snapshots),
        float64 of shape ``((n_features + 1) * n_outputs, 2)``, the last block
        being the intercept; ``last`` and
        ``next_event`` (int64, ``n_features + 1``), ``t`` (updates so far) and
        ``seed`` (shuffling RNG state). Arrays are updated in place; ``t`` and
        ``seed`` are returned.
    loss : Loss or None
        Binary margin loss, or None (with ``n_outputs > 1``) for the
        multinomial log loss with class indices in ``y``.
    alpha : float
        L2 strength (the penalty ``alpha/2 ||w||^2``; the intercept is not
        penalised).
    period : int
        The paper's ``b``: step sizes adapt every ``2b`` updates.
    psa_alpha, psa_beta, kappa : float
        The paper's ``(alpha, beta, kappa)``.
    sweep_all : {-1, 0, 1}
        The event schedule: 1 sweeps every block at every event, 0 catches
        blocks up lazily at their next touch, -1 (default) sweeps when the
        number of blocks is at most ``2 b`` times the mean non-zeros per row.

    Returns
    -------
    info : dict
        ``t``, ``seed``, ``epochs``, ``diverged``, ``min_factor`` / ``max_factor`` (extreme
        step-size factors applied) and ``n_adaptations``.
    """
    cdef int K = n_outputs
    cdef Py_ssize_t d = ds.n_features
    if K == 1 and loss is None:
        raise ValueError("a binary loss is required when n_outputs == 1")
    cdef LazyStepWeights w = LazyStepWeights(
        state["ve"], state["snaps"], state["last"], state["next_event"], K, alpha, period,
        psa_alpha, psa_beta, kappa, d)
    if w.n_blocks != d + 1:
        raise ValueError("state does not match the number of features")
    cdef long long t = state["t"]
    cdef unsigned int rng = state["seed"] if state["seed"] != 0 else 1
    cdef double* scores = <double*>malloc(K * sizeof(double))
    cdef double* grad = <double*>malloc(K * sizeof(double))
    cdef long long b = period if period > 0 else 0
    cdef double mean_nnz = (<double>ds.indptr[ds.n_samples] / max(ds.n_samples, 1)
                            if ds.is_sparse else <double>d)
    if sweep_all == -1:
        sweep_all = d + 1 <= 2.0 * b * mean_nnz
    # sweeping: every block is current at each event (next_event == next_sweep)
    cdef long long next_sweep = (t // b + 1) * b if b > 0 and sweep_all else NO_SWEEP
    cdef bint sweeping = next_sweep != NO_SWEEP
    cdef long long tau
    cdef long long* last = w.last
    cdef long long* next_event = w.next_event
    cdef const double* x
    cdef const int* ind
    cdef int nnz, q, k, epoch, epochs_run = 0
    cdef Py_ssize_t i, j, p, nxt
    cdef long long kk
    cdef double y, sw, c, g, s, vv, e, gsw
    cdef double* v = w.v
    cdef double* eta = w.eta
    cdef double* rate = w.rate
    cdef bint diverged = False
    try:
        with nogil:
            if sweeping:
                w.catch_up_all(t)
            for epoch in range(n_epochs):
                if shuffle:
                    ds.shuffle(&rng)
                for i in range(ds.n_samples):
                    fetch_row(ds, i, &x, &ind, &nnz, &y, &sw)
                    if sw == 0.0:
                        continue
                    if not sweeping and ds.is_sparse and i + 1 < ds.n_samples:
                        # the next row's blocks: cold in a large model (and the
                        # row after's indices, to read them here next time)
                        prefetch_row(ds, i + 2)
                        nxt = ds.order_ptr[i + 1]
                        for kk in range(ds.indptr_ptr[nxt], ds.indptr_ptr[nxt + 1]):
                            prefetch_block(w, ds.indices_ptr[kk])
                    # 0. at an event time (sweeping), apply it to every block
                    if t == next_sweep:
                        w.sweep_all(t)
                        next_sweep += b
                    # 1. catch the row's coordinates (and the intercept) up to t
                    if K == 1 and sweeping:
                        # every block is current at the last event: one decay
                        # (a factor of exactly 1 when tau == t or without L2)
                        for q in range(nnz):
                            j = ind[q]
                            tau = last[j]
                            last[j] = t
                            v[2 * j] *= decay_factor(rate[j], t - tau)
                        s = 0.0
                        for q in range(nnz):
                            s += v[2 * ind[q]] * x[q]
                        scores[0] = s
                    elif K == 1:
                        s = 0.0
                        for q in range(nnz):
                            j = ind[q]
                            if next_event[j] <= t:
                                w.catch_up(j, t)
                            else:
                                # no event to cross: one decay (a factor of
                                # exactly 1 when tau == t or without L2)
                                tau = last[j]
                                last[j] = t
                                v[2 * j] *= decay_factor(rate[j], t - tau)
                        # (a separate loop: the decays above are independent)
                        for q in range(nnz):
                            s += v[2 * ind[q]] * x[q]
                        scores[0] = s
                    else:
                        for k in range(K):
                            scores[k] = 0.0
                        for q in range(nnz):
                            j = ind[q]
                            if next_event[j] <= t:       # (never when sweeping)
                                w.catch_up(j, t)
                            else:
                                lazy_catch_up(w, j, t)
                            row_emit(scores, v + 2 * j * K, x[q], K)
                    if fit_intercept:
                        if next_event[d] <= t:
                            w.catch_up(d, t)
                        # the intercept has no L2: nothing to decay
                        last[d] = t
                        for k in range(K):
                            scores[k] += v[2 * (d * K + k)]
                    # 2. loss derivative at theta(t)
                    if K == 1:
                        g = loss.dloss(scores[0], y)
                        grad[0] = DLOSS_CLIP if g > DLOSS_CLIP else (
                            -DLOSS_CLIP if g < -DLOSS_CLIP else g)
                    else:
                        softmax_loss(scores, <int>y, K, grad)
                    # 3. theta(t+1) = (1 - eta lam) theta(t) - eta sw grad x  (Alg. 1, line 5)
                    if K == 1:
                        gsw = sw * grad[0]
                        for q in range(nnz):
                            j = ind[q]
                            e = eta[2 * j]
                            c = 1.0 - e * alpha
                            if c < 0.0:
                                c = 0.0
                            v[2 * j] = c * v[2 * j] - e * gsw * x[q]
                            last[j] = t + 1
                    else:
                        for q in range(nnz):
                            j = ind[q]
                            row_shrink_step(v + 2 * j * K, alpha, sw, grad, x[q], K)
                            last[j] = t + 1
                    if fit_intercept:
                        for k in range(K):
                            p = d * K + k
                            v[2 * p] -= eta[2 * p] * sw * grad[k]
                        last[d] = t + 1
                    t += 1
                epochs_run += 1
                w.catch_up_all(t)
                if sweeping:   # every block's next event is the first multiple of b > t
                    next_sweep = (t // b + 1) * b
                if not w.is_finite():
                    diverged = True
                    break
    finally:
        free(scores)
        free(grad)
    return {"t": t, "seed": rng, "epochs": epochs_run, "diverged": diverged,
            "min_factor": w.min_factor, "max_factor": w.max_factor,
            "n_adaptations": w.n_adaptations}


def new_psa_state(Py_ssize_t n_features, int n_outputs, double eta0):
    """A fresh PSA state: zero weights, every step size ``eta0``."""
    size = (n_features + 1) * n_outputs
    ve = np.zeros((size, 2))
    ve[:, 1] = eta0
    return {
        "ve": ve, "snaps": np.zeros((size, 2)),
        "last": np.zeros(n_features + 1, dtype=np.int64),
        "next_event": np.zeros(n_features + 1, dtype=np.int64),
    }
