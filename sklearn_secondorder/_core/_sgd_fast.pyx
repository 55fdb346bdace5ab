"""Plain SGD on the shared core: the baseline every method here is compared to.

One step on row ``x`` (label ``y``, sample weight ``s``) at counter ``t``::

    eta  = 1 / (alpha (t + t0))            # or eta0 when learning_rate='constant'
    g    = s * dloss(w.x + b, y)           # loss derivative at the current weights
    w   *= 1 - eta alpha                   # O(1) with the scale trick
    w   -= eta g x                         # O(nnz)
    b   -= eta g intercept_decay

Zero-weight rows are skipped and do not advance ``t``. With ``n_outputs = K > 1``
the loss is the multinomial log loss over K scores.
"""
import numpy as np
from libc.stdlib cimport malloc, free

from ._dataset cimport RowDataset, fetch_row
from ._losses cimport Loss, softmax_loss
from ._numeric cimport all_finite, clip_dloss
from ._weights cimport ScaledWeights

cdef inline void _sgd_step(ScaledWeights w, double* b, Loss loss, const double* x,
                           const int* ind, int nnz, double y, double sw, double eta,
                           double alpha, bint fit_intercept, double intercept_decay,
                           double* scores, double* grad) noexcept nogil:
    """One plain SGD step."""
    cdef int k, K = w.n_outputs
    cdef double factor
    w.dot(x, ind, nnz, scores)
    for k in range(K):
        scores[k] += b[k]
    if K == 1:
        grad[0] = clip_dloss(loss.dloss(scores[0], y))
    else:
        softmax_loss(scores, <int>y, K, grad)
    for k in range(K):
        grad[k] = -eta * sw * grad[k]
    factor = 1.0 - eta * alpha
    if factor < 0.0:
        factor = 0.0
    if factor != 1.0:
        w.shrink(factor)
    w.add(x, ind, nnz, grad)
    if fit_intercept:
        for k in range(K):
            b[k] += grad[k] * intercept_decay


def sgd_epochs(RowDataset ds, double[::1] coef, double[::1] intercept, *,
               Loss loss=None, int n_outputs=1, double alpha=1e-4,
               str learning_rate="optimal", double eta0=0.01, double t0=1.0,
               long long t=0, int n_epochs=1, bint shuffle=True,
               unsigned int seed=1, bint fit_intercept=True,
               double intercept_decay=1.0, avg_coef=None, avg_intercept=None,
               double n_iterates=0.0):
    """Run ``n_epochs`` passes of plain SGD over ``ds``, updating arrays in place.

    Parameters
    ----------
    ds : RowDataset
    coef : ndarray of shape (n_features * n_outputs,)
        C-order ``(n_features, n_outputs)`` weights, updated in place.
    intercept : ndarray of shape (n_outputs,)
    loss : Loss or None
        Binary margin loss (``n_outputs == 1``); None with ``n_outputs > 1``
        selects the multinomial log loss, ``y`` then holding class indices.
    learning_rate : {'optimal', 'constant'}
        ``eta_t = 1 / (alpha (t + t0))`` or ``eta0``.
    t : int
        Step counter at the start (continues across calls).
    avg_coef, avg_intercept : ndarray or None
        Running sums of the iterates (averaged SGD), updated in place.

    Returns
    -------
    info : dict
        ``t``, ``n_iterates``, ``seed``, ``epochs`` run and ``diverged`` (bool).
    """
    cdef int K = n_outputs
    if K == 1 and loss is None:
        raise ValueError("a binary loss is required when n_outputs == 1")
    if coef.shape[0] != ds.n_features * K or intercept.shape[0] != K:
        raise ValueError("coef/intercept shapes do not match the data")
    cdef bint averaged = avg_coef is not None
    cdef ScaledWeights w = ScaledWeights(coef, K, avg_coef, n_iterates)
    cdef double[::1] b = intercept
    cdef double[::1] bsum = avg_intercept if averaged else np.zeros(K)
    cdef bint constant = learning_rate == "constant"
    cdef double* scores = <double*>malloc(K * sizeof(double))
    cdef double* grad = <double*>malloc(K * sizeof(double))
    cdef const double* x
    cdef const int* ind
    cdef int nnz, k, epoch, epochs_run = 0
    cdef Py_ssize_t i
    cdef double y, sw, eta
    cdef bint diverged = False
    cdef unsigned int rng = seed if seed != 0 else 1
    try:
        with nogil:
            for epoch in range(n_epochs):
                if shuffle:
                    ds.shuffle(&rng)
                for i in range(ds.n_samples):
                    fetch_row(ds, i, &x, &ind, &nnz, &y, &sw)
                    if sw == 0.0:
                        continue
                    eta = eta0 if constant else 1.0 / (alpha * (<double>t + t0))
                    _sgd_step(w, &b[0], loss, x, ind, nnz, y, sw, eta, alpha,
                              fit_intercept, intercept_decay, scores, grad)
                    t += 1
                    if averaged:
                        w.count_iterate(1.0)
                        for k in range(K):
                            bsum[k] += b[k]
                epochs_run += 1
                if not w.is_finite() or not all_finite(&b[0], K):
                    diverged = True
                    break
            w.fold()
    finally:
        free(scores)
        free(grad)
    return {"t": t, "n_iterates": w.n_iterates, "seed": rng, "epochs": epochs_run,
            "diverged": diverged}


def trial_pass(RowDataset ds, double[::1] coef, double[::1] intercept, *, Loss loss=None,
               int n_outputs=1, double alpha=1e-4, double eta=0.01, bint fit_intercept=True):
    """One pass with constant ``eta`` from (copies of) the weights; returns the
    regularized objective after the pass (``inf`` when it diverges).

    Used by the step-size calibration (Bottou's recipe): the arrays given are
    not modified.
    """
    cdef int K = n_outputs
    coef_c = np.array(coef, dtype=np.float64)
    intercept_c = np.array(intercept, dtype=np.float64)
    cdef double[::1] cc = coef_c
    cdef double[::1] ic = intercept_c
    cdef ScaledWeights w = ScaledWeights(cc, K)
    cdef double* scores = <double*>malloc(K * sizeof(double))
    cdef double* grad = <double*>malloc(K * sizeof(double))
    cdef const double* x
    cdef const int* ind
    cdef int nnz, k
    cdef Py_ssize_t i
    cdef double y, sw, obj = 0.0, wsum = 0.0, val
    try:
        with nogil:
            for i in range(ds.n_samples):
                fetch_row(ds, i, &x, &ind, &nnz, &y, &sw)
                if sw == 0.0:
                    continue
                _sgd_step(w, &ic[0], loss, x, ind, nnz, y, sw, eta, alpha,
                          fit_intercept, 1.0, scores, grad)
            w.fold()
            if not w.is_finite() or not all_finite(&ic[0], K):
                obj = 1e300
            else:
                for i in range(ds.n_samples):
                    fetch_row(ds, i, &x, &ind, &nnz, &y, &sw)
                    w.dot(x, ind, nnz, scores)
                    for k in range(K):
                        scores[k] += ic[k]
                    if K == 1:
                        val = loss.loss(scores[0], y)
                    else:
                        val = softmax_loss(scores, <int>y, K, grad)
                    obj += sw * val
                    wsum += sw
                if wsum > 0:
                    obj /= wsum
    finally:
        free(scores)
        free(grad)
    if obj >= 1e300 or not np.isfinite(obj):
        return np.inf
    return obj + 0.5 * alpha * float(np.dot(coef_c, coef_c))
