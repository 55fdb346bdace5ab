"""The CRF log-likelihood and gradient over CRFsuite's feature set (compact).

CRFsuite gives a weight only to the (attribute, label) pairs and label
bigrams seen in training (``sequence/_feature_set.py``). In the core's dense
layout the other weights are zero, so scoring a token's attributes against
all ``H`` labels and accumulating their gradient (``CRFContext.add_gradient``)
does ``H`` multiply-adds per non-zero where CRFsuite does one per existing
feature (one to three labels for most attributes). This pass keeps the
weights as a compact vector, one entry per existing feature, read through a
CSR table (``attr_ptr``: the features of attribute ``j`` are ``attr_ptr[j] ..
attr_ptr[j + 1]``, their labels in ``feat_label``, ids consecutive) plus the
ids of the transitions and biases (-1: absent). Emissions and gradient cost
O(existing features of the sequence's attributes); forward-backward and the
marginals are ``CRFContext``'s (``forward_backward``, ``path_score``), the
same scaled recursions as everywhere else. L-BFGS (``sequence/_lbfgs.py``)
evaluates its objective with it: one pass over the sequences per call, nogil;
with ``n_jobs`` threads, one call per contiguous range of sequences on each
thread (``begin``, ``end``), each with its own context and gradient buffer.
"""
import numpy as np

from ._crf_infer cimport CRFContext
from ._dataset cimport SequenceData


cdef struct FeatureTable:
    # the compact layout (module docstring) and its weights
    const double* w
    const long long* attr_ptr     # attribute j's features: attr_ptr[j] .. attr_ptr[j + 1]
    const int* feat_label         # each state feature's label
    const long long* trans_id     # transition (i, j)'s feature at i * H + j, or -1
    const long long* bias_id      # label h's bias feature, or -1
    int H


cdef inline void _emissions(CRFContext ctx, SequenceData ds, const FeatureTable* ft,
                            long long first) noexcept nogil:
    """The emission scores of the sequence whose first token is ``first``
    (``ctx.T`` tokens), from the compact weights."""
    cdef int t, h, H = ft.H
    cdef long long k, f
    cdef double x
    cdef double* e
    for t in range(ctx.T):
        e = ctx.emit + <Py_ssize_t>t * H
        for h in range(H):
            e[h] = ft.w[ft.bias_id[h]] if ft.bias_id[h] >= 0 else 0.0
        for k in range(ds.indptr[first + t], ds.indptr[first + t + 1]):
            x = ds.data[k]
            for f in range(ft.attr_ptr[ds.indices[k]], ft.attr_ptr[ds.indices[k] + 1]):
                e[ft.feat_label[f]] += x * ft.w[f]


cdef inline void _add_counts(CRFContext ctx, SequenceData ds, const FeatureTable* ft,
                             long long first, const int* y, double* grad) noexcept nogil:
    """The sequence's observed minus expected counts (``ctx``'s marginals),
    on the existing features only, added to ``grad``."""
    cdef int t, h, H = ft.H
    cdef long long k, f, fid
    cdef Py_ssize_t i
    cdef double x
    cdef const double* mt
    for t in range(ctx.T):
        mt = ctx.marg + <Py_ssize_t>t * H
        for h in range(H):
            if ft.bias_id[h] >= 0:
                grad[ft.bias_id[h]] += (1.0 if h == y[t] else 0.0) - mt[h]
        for k in range(ds.indptr[first + t], ds.indptr[first + t + 1]):
            x = ds.data[k]
            for f in range(ft.attr_ptr[ds.indices[k]], ft.attr_ptr[ds.indices[k] + 1]):
                h = ft.feat_label[f]
                grad[f] += x * ((1.0 if h == y[t] else 0.0) - mt[h])
        if t > 0:
            fid = ft.trans_id[y[t - 1] * H + y[t]]
            if fid >= 0:
                grad[fid] += 1.0
    for i in range(H * H):
        if ft.trans_id[i] >= 0:
            grad[ft.trans_id[i]] -= ctx.edge[i]


def compact_loglik_gradient(SequenceData ds, const double[::1] w, const long long[::1] attr_ptr,
                            const int[::1] feat_label, const long long[::1] trans_id,
                            const long long[::1] bias_id, int n_states, double[::1] grad,
                            Py_ssize_t begin=0, Py_ssize_t end=-1):
    """Total ``log p(y | x)`` and its gradient (written to ``grad``) for the
    compact weights ``w`` (module docstring), over sequences ``begin .. end``.

    The pass holds no Python object while it runs (``with nogil``), and each
    call makes its own inference context, so calls on disjoint ranges with
    their own ``grad`` may run at the same time on several threads: that is
    how ``LBFGSSequenceTagger(n_jobs=...)`` splits one evaluation.

    Parameters
    ----------
    ds : SequenceData (with labels)
    w : ndarray of shape (n_features,)
        The compact weights.
    attr_ptr : int64 ndarray of shape (n_attributes + 1,)
        Attribute ``j``'s features are ``attr_ptr[j] .. attr_ptr[j + 1]``.
    feat_label : int32 ndarray of shape (n_state_features,)
        The label of each state feature.
    trans_id : int64 ndarray of shape (n_states * n_states,)
        The feature id of transition ``(i, j)`` at ``i * H + j``, or -1.
    bias_id : int64 ndarray of shape (n_states,)
        The feature id of label ``h``'s bias, or -1.
    n_states : int
    grad : ndarray like ``w``
        Overwritten with the gradient of the total log-likelihood.
    begin, end : int, default=0, -1
        The range of sequences summed over; ``end=-1`` is to the last one.

    Returns
    -------
    loglik : float
        ``sum log p(y | x)`` over the range (``-inf`` / NaN if the scores
        overflow).
    """
    if not ds.has_labels:
        raise ValueError("labels are required")
    if end < 0:
        end = ds.n_sequences
    if not 0 <= begin <= end <= ds.n_sequences:
        raise ValueError(f"the sequence range {begin}..{end} is not within "
                         f"0..{ds.n_sequences}")
    cdef int H = n_states
    cdef Py_ssize_t n_attr = attr_ptr.shape[0] - 1
    if ds.n_features > n_attr or trans_id.shape[0] != H * H or bias_id.shape[0] != H:
        raise ValueError("the feature table does not match the data")
    if grad.shape[0] != w.shape[0]:
        raise ValueError("grad must have the shape of w")
    cdef CRFContext ctx = CRFContext(H, 1, ds.max_len, 0)
    cdef FeatureTable ft
    cdef Py_ssize_t s, i
    cdef long long first
    cdef int T
    cdef double total = 0.0, ll
    ft.w, ft.attr_ptr, ft.feat_label = &w[0], &attr_ptr[0], &feat_label[0]
    ft.trans_id, ft.bias_id, ft.H = &trans_id[0], &bias_id[0], H
    grad[:] = 0.0
    with nogil:
        # transition scores from the compact weights, and their exponentials
        for i in range(H * H):
            ctx.trans[i] = w[trans_id[i]] if trans_id[i] >= 0 else 0.0
        ctx.finish_transitions()
        for s in range(begin, end):
            first = ds.offsets[s]
            T = <int>(ds.offsets[s + 1] - first)
            ctx.ensure_capacity(T)
            ctx.T = T
            _emissions(ctx, ds, &ft, first)
            ctx.finish_emissions(NULL)
            ll = ctx.forward_backward(NULL, ctx.marg, ctx.edge)
            ll = ctx.path_score(&ds.labels[first]) - ll
            total += ll
            _add_counts(ctx, ds, &ft, first, &ds.labels[first], &grad[0])
    return total


def feature_table(const unsigned char[::1] exists, Py_ssize_t n_attributes, int n_states):
    """The compact layout of the existing weights of the dense layout.

    Parameters
    ----------
    exists : uint8 ndarray of shape ((n_attributes + n_states + 1) * n_states,)
        The mask of ``observed_weights``.
    n_attributes, n_states : int

    Returns
    -------
    idx : int64 ndarray
        The dense positions of the compact weights, increasing (the attribute
        rows' features first, so they are ``0 .. attr_ptr[-1]``).
    attr_ptr, feat_label, trans_id, bias_id : ndarray
        ``compact_loglik_gradient``'s table.
    """
    H = n_states
    mask = np.asarray(exists, dtype=bool)
    idx = np.flatnonzero(mask).astype(np.int64)
    attr_ptr = np.searchsorted(idx, np.arange(n_attributes + 1, dtype=np.int64) * H)
    n_state = int(attr_ptr[n_attributes])
    feat_label = (idx[:n_state] % H).astype(np.int32)
    ids = np.full(mask.size, -1, dtype=np.int64)
    ids[idx] = np.arange(idx.size)
    trans_id = np.ascontiguousarray(ids[n_attributes * H:(n_attributes + H) * H])
    bias_id = np.ascontiguousarray(ids[(n_attributes + H) * H:])
    return idx, attr_ptr.astype(np.int64), feat_label, trans_id, bias_id


def sequence_offsets(SequenceData ds):
    """The first token of every sequence of ``ds``, and the total (a copy).

    Parameters
    ----------
    ds : SequenceData

    Returns
    -------
    offsets : int64 ndarray of shape (n_sequences + 1,)
        What the threads of ``compact_loglik_gradient`` are balanced on.
    """
    return np.array(ds.offsets, dtype=np.int64)
