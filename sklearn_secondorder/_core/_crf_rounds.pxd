# A round of a CRF pass shared by threads (_crf_psa.SharedPass and
# _crf_sgd.SharedSGDPass, "Threads on one state" in doc/core.md): where a
# round ends, each thread's own non-zeros of its sentences, and the round's
# inference, drawn by the threads from a queue. The kernels' own parts -- how a
# row is brought to the round's start and read, and the steps -- stay in
# their modules. Inline: every kernel module that cimports these gets its
# own copy.
from libc.math cimport isfinite

from ._crf_infer cimport CRFContext
from ._dataset cimport SequenceData
from ._shared_state cimport draw, owner_of


ctypedef struct RoundBuffers:
    # what the threads of a round share (each written by one thread, read
    # by all after a barrier); H = n_states
    Py_ssize_t H
    Py_ssize_t round_tokens    # the tokens a round holds at most
    # (n_threads, round_tokens, H): each thread's share of the emission scores
    double* em_part
    double* trans_round        # (H, H): the transitions at the round's start
    double* marg_round         # (round_tokens, H): the node marginals
    double* edge_round         # (round sequences, H, H): the edge marginals
    double* loss_round         # (round sequences,): -log p(y|x) (NaN: divergence)
    # the next sequence to infer, a counter for even and one for odd rounds
    # (on cache lines of their own: [0] and [8])
    long* next_seq


cdef class RoundArrays:
    # the arrays of a shared pass's rounds (RoundBuffers points into them),
    # and each thread's own rows (one row a thread): its non-zeros of the
    # round (attribute row, position), where each token ends, where each
    # sequence starts, which thread infers each sequence, its work space
    cdef readonly Py_ssize_t round_seqs, round_tokens, round_nnz, most_nnz
    cdef double[:, :, ::1] em_part
    cdef double[::1] trans_round, marg_round, edge_round, loss_round, work
    cdef int[:, ::1] own_block, own_at, ends, tok_off
    cdef long[::1] next_seq
    cdef RoundBuffers rb


ctypedef struct ThreadRows:
    # thread k's rows of a RoundArrays
    double* work         # its work space (2 H doubles and more, on lines of its own)
    int* own_block       # its non-zeros of the round: attribute row,
    int* own_at          # position in the round's tokens,
    int* ends            # where each token's end,
    int* tok_off         # and where each sequence starts


cdef inline ThreadRows thread_rows(RoundArrays ra, int k, Py_ssize_t H) noexcept nogil:
    """Thread ``k``'s rows of ``ra`` (``H`` labels)."""
    cdef ThreadRows r
    r.work = &ra.work[k * 8 * (H // 8 + 2)]
    r.own_block = &ra.own_block[k, 0]
    r.own_at = &ra.own_at[k, 0]
    r.ends = &ra.ends[k, 0]
    r.tok_off = &ra.tok_off[k, 0]
    return r


cdef inline Py_ssize_t sequences_round_end(SequenceData ds, Py_ssize_t q0,
                                           Py_ssize_t round_seqs, Py_ssize_t max_tokens,
                                           Py_ssize_t max_nnz,
                                           long long to_event) noexcept nogil:
    """The end of the round that starts at sequence ``q0`` of the order:
    ``round_seqs`` sequences, fewer if their tokens or non-zeros would pass
    the buffers (at least one), and none past the sequence of the next
    event (``to_event`` updates away; < 0: none). It depends on the data
    only, so that every thread cuts the rounds alike."""
    cdef Py_ssize_t q = q0, n = ds.n_sequences, tokens = 0, nnz = 0, s, nt, nz
    while q < n and q - q0 < round_seqs and to_event != 0:
        s = ds.order[q]
        nt = ds.offsets[s + 1] - ds.offsets[s]
        nz = ds.indptr[ds.offsets[s + 1]] - ds.indptr[ds.offsets[s]]
        if q > q0 and (tokens + nt > max_tokens or nnz + nz > max_nnz):
            break
        tokens += nt
        nnz += nz
        to_event -= 1
        q += 1
    return q


cdef inline Py_ssize_t list_own_nonzeros(SequenceData ds, Py_ssize_t q0, Py_ssize_t q1,
                                         Py_ssize_t n_attributes, Py_ssize_t bias_row,
                                         int shift, int n_threads, int k,
                                         ThreadRows* rows) noexcept nogil:
    """Thread ``k``'s non-zeros of the round's tokens (sequences ``q0 <= q <
    q1`` of the order): their attribute rows ``rows.own_block`` and
    positions ``rows.own_at``, listed without a branch per non-zero (every
    entry is written, the count moves on for the owned ones);
    ``rows.ends[t]`` where token ``t``'s end, ``rows.tok_off[q - q0]`` a
    sequence's first token in the round. Returns the count."""
    cdef Py_ssize_t q, s, j, tok = 0, n_own = 0
    cdef long long r, kk
    rows.ends[0] = 0
    rows.tok_off[0] = 0
    for q in range(q0, q1):
        s = ds.order[q]
        for r in range(ds.offsets[s], ds.offsets[s + 1]):
            for kk in range(ds.indptr[r], ds.indptr[r + 1]):
                j = ds.indices[kk]
                rows.own_block[n_own] = <int>j
                rows.own_at[n_own] = <int>kk
                n_own += j < n_attributes and owner_of(j, bias_row, shift, n_threads) == k
            tok += 1
            rows.ends[tok] = <int>n_own
        rows.tok_off[q - q0 + 1] = <int>tok
    return n_own


cdef inline const int* sequence_labels(SequenceData ds, Py_ssize_t q,
                                       Py_ssize_t* T) noexcept nogil:
    """The labels of sequence ``q`` of the order, and its length ``T``."""
    cdef Py_ssize_t s = ds.order[q], first = ds.offsets[s]
    T[0] = ds.offsets[s + 1] - first
    return &ds.labels[0] + first


cdef inline void start_inference(const RoundBuffers* rb, Py_ssize_t rnd) noexcept nogil:
    """Round ``rnd``'s queue of sequences to infer, to its start (by thread
    0, in (a): the queue of round ``rnd - 2``, the last to use it, was
    drained before that round's second meeting)."""
    rb.next_seq[8 * (rnd & 1)] = 0


cdef inline void infer_round(CRFContext ctx, SequenceData ds, Py_ssize_t q0, Py_ssize_t q1,
                             int n_threads, const RoundBuffers* rb, Py_ssize_t rnd,
                             double scale, const int* tok_off) noexcept nogil:
    """A thread's share of round ``rnd``'s inference: the sequences ``q0 <=
    q < q1`` are drawn one at a time from the round's queue by whichever
    thread is free (a thread that loses its core delays no one), and for
    each the emissions (the threads' shares summed in thread order, times
    ``scale``) and the round's transitions (times ``scale``), ``-log
    p(y|x)`` and the marginals (``CRFContext.loglik``) go into the round's
    buffers. What a sequence's inference writes does not depend on the
    thread that makes it: the model stays the same."""
    cdef Py_ssize_t H = rb.H, q, s, T, tok, tt, h, i
    cdef double x, ll
    cdef bint have_transitions = False
    cdef long* next_seq = rb.next_seq + 8 * (rnd & 1)
    while True:
        q = q0 + draw(next_seq)
        if q >= q1:
            break
        if not have_transitions:
            for i in range(H * H):
                ctx.trans[i] = scale * rb.trans_round[i]
            ctx.finish_transitions()
            have_transitions = True
        s = ds.order[q]
        T = ds.offsets[s + 1] - ds.offsets[s]
        ctx.T = <int>T
        tok = tok_off[q - q0]
        for tt in range(T):
            for h in range(H):
                x = 0.0
                for i in range(n_threads):
                    x += rb.em_part[(i * rb.round_tokens + tok + tt) * H + h]
                ctx.emit[tt * H + h] = scale * x
        ctx.finish_emissions(NULL)
        ll = ctx.loglik(&ds.labels[0] + ds.offsets[s])
        rb.loss_round[q - q0] = -ll
        if isfinite(ll):
            for i in range(T * H):
                rb.marg_round[tok * H + i] = ctx.marg[i]
            for i in range(H * H):
                rb.edge_round[(q - q0) * H * H + i] = ctx.edge[i]
