"""Linear-chain CRF inference, trainer-agnostic (as CRFsuite's encoder).

Model. For a sequence ``x_1..x_T`` (sparse token rows) and hidden states
``h_t`` in ``{0..H-1}`` (``H = n_labels * n_latent``; state ``h`` belongs to
label ``h // n_latent``)::

    score(h) = sum_t [x_t . W[:, h_t] + b[h_t]] + sum_{t>0} A[h_{t-1}, h_t]
    log p(h | x) = score(h) - log Z(x)

With ``n_latent = 1`` this is the usual CRF. With ``n_latent > 1`` it is the
latent-dynamic CRF (DPLVM) of Sun et al. (ICDM 2010, Section II.A):
``p(y | x) = sum over h with label(h_t) = y_t of p(h | x)``, computed by a
forward pass over the label-constrained lattice.

The weights are the linear core's ``ScaledWeights`` over ``A + H + 1`` blocks
of ``H`` (``CRFContext``'s layout: attribute rows, transition rows, the bias).

Inference (``CRFContext``). Emissions are read from the token's non-zeros
into reused buffers (capacity grows only when T grows, as CRFsuite's
``crf1dc_set_num_items``). Forward-backward runs in exp space with one
normaliser per position (``log Z = sum_t log c_t`` plus the maxima taken out
before ``exp``), giving node marginals, edge marginals summed over positions,
and ``log Z``. Viterbi runs in log space. ``add_gradient`` is the gradient
sink the SGD-type trainers (``_crf_sgd``) use: ``gain * d log p(y|x) / dw``,
applied sparsely.
"""
import numpy as np
cimport numpy as cnp
from libc.math cimport exp, log, isfinite, INFINITY
from libc.stdlib cimport malloc, realloc, free
from libc.string cimport memset

from ._dataset cimport SequenceData
from ._numeric cimport all_finite
from ._weights cimport ScaledWeights

cnp.import_array()

# ---------------------------------------------------------------------------
# Inference context
# ---------------------------------------------------------------------------
cdef inline double _dmax(double a, double b) noexcept nogil:
    return a if a > b else b


cdef class CRFContext:
    """Reusable buffers and inference for one sequence at a time.

    Parameters
    ----------
    n_states : int
        ``H = n_labels * n_latent``.
    n_latent : int, default=1
    capacity : int, default=16
        Initial maximum length; grows (only) when a longer sequence comes.
    n_attributes : int, default=0
        ``A``: the weights are ``A`` attribute rows, ``H`` transition rows
        (``from``) and the bias row, of ``H`` weights each.
    """

    def __cinit__(self, int n_states, int n_latent=1, int capacity=16,
                  Py_ssize_t n_attributes=0):
        cdef int H = n_states
        if H < 1 or n_latent < 1 or H % n_latent != 0 or n_attributes < 0:
            raise ValueError("invalid n_states / n_latent / n_attributes")
        self.n_states = H
        self.n_latent = n_latent
        self.n_attributes = n_attributes
        self.trans_offset = n_attributes * H
        self.bias_offset = self.trans_offset + H * H
        self.capacity = 0
        self.T = 0
        self.trans = <double*>malloc(H * H * sizeof(double))
        self.exp_trans = <double*>malloc(H * H * sizeof(double))
        self.edge = <double*>malloc(H * H * sizeof(double))
        self.edge_c = <double*>malloc(H * H * sizeof(double))
        self.tmp = <double*>malloc(H * sizeof(double))
        self.vscore = <double*>malloc(2 * H * sizeof(double))
        if (self.trans == NULL or self.exp_trans == NULL or self.edge == NULL
                or self.edge_c == NULL or self.tmp == NULL or self.vscore == NULL):
            raise MemoryError()
        memset(self.trans, 0, H * H * sizeof(double))
        memset(self.exp_trans, 0, H * H * sizeof(double))
        self.trans_max = 0.0
        self.allowed = NULL
        self.allowed_ref = None
        self.ensure_capacity(max(capacity, 1))

    def set_allowed(self, allowed):
        """Restrict the gradient to the weights that exist (CRFsuite's model).

        CRFsuite generates a state feature only for an (attribute, label)
        pair seen in training, and a transition feature only for a label
        bigram seen (unless told to generate all of them): the other weights
        do not exist. ``allowed`` is a uint8 mask over the flat layout
        (``(n_attributes + H + 1) * H``), 1 where a weight exists; the
        gradient sink (``add_gradient``) leaves the others at their value,
        zero, so neither the emissions nor the penalties see them. ``None``
        lifts the restriction.
        """
        cdef const unsigned char[::1] m
        if allowed is None:
            self.allowed = NULL
            self.allowed_ref = None
            return
        arr = np.ascontiguousarray(allowed, dtype=np.uint8)
        if arr.ndim != 1 or arr.size != self.bias_offset + self.n_states:
            raise ValueError(f"allowed has {arr.size} entries; the weights have "
                             f"{self.bias_offset + self.n_states}")
        m = arr
        self.allowed_ref = arr
        self.allowed = &m[0] if arr.size else NULL

    def __dealloc__(self):
        free(self.emit)
        free(self.state)
        free(self.rowmax)
        free(self.trans)
        free(self.exp_trans)
        free(self.alpha)
        free(self.beta)
        free(self.norm)
        free(self.tmp)
        free(self.marg)
        free(self.edge)
        free(self.marg_c)
        free(self.edge_c)
        free(self.back)
        free(self.vscore)
        free(self.path)

    cdef int ensure_capacity(self, int T) except -1 nogil:
        """Grow the per-position buffers when ``T`` exceeds the capacity."""
        cdef Py_ssize_t n
        cdef int cap
        if T <= self.capacity:
            return 0
        cap = T if T > 2 * self.capacity else 2 * self.capacity
        n = <Py_ssize_t>cap * self.n_states
        self.emit = <double*>realloc(self.emit, n * sizeof(double))
        self.state = <double*>realloc(self.state, n * sizeof(double))
        self.alpha = <double*>realloc(self.alpha, n * sizeof(double))
        self.beta = <double*>realloc(self.beta, n * sizeof(double))
        self.marg = <double*>realloc(self.marg, n * sizeof(double))
        self.marg_c = <double*>realloc(self.marg_c, n * sizeof(double))
        self.back = <int*>realloc(self.back, n * sizeof(int))
        self.rowmax = <double*>realloc(self.rowmax, cap * sizeof(double))
        self.norm = <double*>realloc(self.norm, cap * sizeof(double))
        self.path = <int*>realloc(self.path, cap * sizeof(int))
        if (self.emit == NULL or self.state == NULL or self.alpha == NULL
                or self.beta == NULL or self.marg == NULL or self.marg_c == NULL
                or self.back == NULL or self.rowmax == NULL or self.norm == NULL
                or self.path == NULL):
            with gil:
                raise MemoryError()
        self.capacity = cap
        return 0

    cdef void load_transitions(self, ScaledWeights w) noexcept nogil:
        """Transition scores ``scale * v`` and their shifted exponentials."""
        cdef int i, H = self.n_states
        cdef const double* a = w.v + self.trans_offset
        for i in range(H * H):
            self.trans[i] = w.scale * a[i]
        self.finish_transitions()

    cdef void finish_transitions(self) noexcept nogil:
        """``trans_max`` and ``exp_trans = exp(trans - trans_max)`` from the
        transition scores in ``trans`` (however a trainer's layout filled them)."""
        cdef int i, H = self.n_states
        cdef double m = -INFINITY
        for i in range(H * H):
            if self.trans[i] > m:
                m = self.trans[i]
        self.trans_max = m
        for i in range(H * H):
            self.exp_trans[i] = exp(self.trans[i] - m)

    cdef void load_emissions(self, SequenceData ds, Py_ssize_t s, ScaledWeights w) noexcept nogil:
        """``emit[t, h] = scale * (x_t . v[:, h] + v_bias[h])`` over the non-zeros."""
        cdef int H = self.n_states
        cdef int t, h
        cdef long long i, k, first = ds.offsets[s]
        cdef double x
        cdef double* e
        cdef const double* row
        cdef const double* bias = w.v + self.bias_offset
        cdef Py_ssize_t n_attr = self.n_attributes
        cdef Py_ssize_t j
        self.T = <int>(ds.offsets[s + 1] - first)
        for t in range(self.T):
            e = self.emit + <Py_ssize_t>t * H
            for h in range(H):
                e[h] = bias[h]
            i = first + t
            for k in range(ds.indptr[i], ds.indptr[i + 1]):
                j = ds.indices[k]
                if j >= n_attr:          # attribute unknown to the model
                    continue
                x = ds.data[k]
                row = w.v + j * H
                for h in range(H):
                    e[h] += x * row[h]
            for h in range(H):
                e[h] *= w.scale

    cdef void finish_emissions(self, const int* labels) noexcept nogil:
        """``state[t, h] = exp(emit[t, h] - max emit[t, .])`` over the states of
        label ``labels[t]`` (the others get 0), or over all states when
        ``labels`` is NULL (the free lattice). The maximum is taken over those
        states, so that the label-constrained lattice cannot underflow where
        the free one would not."""
        cdef int H = self.n_states, nl = self.n_latent
        cdef int t, h, lo = 0, hi = H
        cdef double m
        cdef double* e
        cdef double* st
        for t in range(self.T):
            e = self.emit + <Py_ssize_t>t * H
            st = self.state + <Py_ssize_t>t * H
            if labels != NULL:
                lo = labels[t] * nl
                hi = lo + nl
            m = e[lo]
            for h in range(lo + 1, hi):
                if e[h] > m:
                    m = e[h]
            self.rowmax[t] = m
            for h in range(H):
                st[h] = exp(e[h] - m) if lo <= h < hi else 0.0

    cdef double forward(self, const int* labels) noexcept nogil:
        """Normalised forward pass; returns ``log Z`` (free lattice when
        ``labels`` is NULL, else the lattice with ``label(h_t) = labels[t]``)."""
        cdef int H = self.n_states, nl = self.n_latent, T = self.T
        cdef int t, i, j, lab
        cdef double total, a, logz = 0.0
        cdef double* al
        cdef const double* prev
        cdef const double* st
        cdef const double* E
        for t in range(T):
            al = self.alpha + <Py_ssize_t>t * H
            st = self.state + <Py_ssize_t>t * H
            if t == 0:
                for j in range(H):
                    al[j] = st[j]
            else:
                prev = al - H
                for j in range(H):
                    self.tmp[j] = 0.0
                for i in range(H):
                    a = prev[i]
                    if a == 0.0:
                        continue
                    E = self.exp_trans + <Py_ssize_t>i * H
                    for j in range(H):
                        self.tmp[j] += a * E[j]
                for j in range(H):
                    al[j] = self.tmp[j] * st[j]
                logz += self.trans_max
            if labels != NULL:
                lab = labels[t]
                for j in range(H):
                    if j // nl != lab:
                        al[j] = 0.0
            total = 0.0
            for j in range(H):
                total += al[j]
            self.norm[t] = total
            if not total > 0.0:
                return -INFINITY if total == 0.0 else total
            for j in range(H):
                al[j] /= total
            logz += log(total) + self.rowmax[t]
        return logz

    cdef void backward(self, const int* labels, double* marg, double* edge) noexcept nogil:
        """Scaled backward pass after ``forward(labels)``: node marginals
        ``marg[t, h]`` and edge marginals summed over positions ``edge[i, j]``."""
        cdef int H = self.n_states, nl = self.n_latent, T = self.T
        cdef int t, i, j, lab
        cdef double s, e, ai, inv
        cdef double* be
        cdef const double* nb
        cdef const double* st
        cdef const double* al
        cdef const double* E
        cdef double* ed
        for i in range(H * H):
            edge[i] = 0.0
        be = self.beta + <Py_ssize_t>(T - 1) * H
        for j in range(H):
            be[j] = 1.0
        for t in range(T - 2, -1, -1):
            nb = self.beta + <Py_ssize_t>(t + 1) * H
            st = self.state + <Py_ssize_t>(t + 1) * H
            inv = 1.0 / self.norm[t + 1]
            if labels != NULL:
                lab = labels[t + 1]
                for j in range(H):
                    self.tmp[j] = st[j] * nb[j] * inv if j // nl == lab else 0.0
            else:
                for j in range(H):
                    self.tmp[j] = st[j] * nb[j] * inv
            be = self.beta + <Py_ssize_t>t * H
            al = self.alpha + <Py_ssize_t>t * H
            for i in range(H):
                E = self.exp_trans + <Py_ssize_t>i * H
                ed = edge + <Py_ssize_t>i * H
                ai = al[i]
                s = 0.0
                for j in range(H):
                    e = E[j] * self.tmp[j]
                    s += e
                    ed[j] += ai * e
                be[i] = s
        for i in range(T * H):
            marg[i] = self.alpha[i] * self.beta[i]

    cdef double forward_backward(self, const int* labels, double* marg,
                                 double* edge) noexcept nogil:
        cdef double logz = self.forward(labels)
        if isfinite(logz):
            self.backward(labels, marg, edge)
        return logz

    cdef double path_score(self, const int* labels) noexcept nogil:
        """Unnormalised score of a state path (``labels`` are state indices)."""
        cdef int t, H = self.n_states
        cdef double s = 0.0
        for t in range(self.T):
            s += self.emit[<Py_ssize_t>t * H + labels[t]]
            if t > 0:
                s += self.trans[labels[t - 1] * H + labels[t]]
        return s

    cdef double viterbi(self) noexcept nogil:
        """Best state path into ``self.path``; returns its score."""
        cdef int H = self.n_states, T = self.T
        cdef int t, i, j, best_j
        cdef double a, sc, best
        cdef double* cur = self.vscore
        cdef double* nxt = self.vscore + H
        cdef double* swp
        cdef const double* e
        cdef const double* A
        cdef int* bp
        for j in range(H):
            cur[j] = self.emit[j]
        for t in range(1, T):
            bp = self.back + <Py_ssize_t>t * H
            for j in range(H):
                nxt[j] = -INFINITY
                bp[j] = 0
            for i in range(H):
                a = cur[i]
                A = self.trans + <Py_ssize_t>i * H
                for j in range(H):
                    sc = a + A[j]
                    if sc > nxt[j]:
                        nxt[j] = sc
                        bp[j] = i
            e = self.emit + <Py_ssize_t>t * H
            for j in range(H):
                nxt[j] += e[j]
            swp = cur
            cur = nxt
            nxt = swp
        best_j = 0
        best = cur[0]
        for j in range(1, H):
            if cur[j] > best:
                best = cur[j]
                best_j = j
        self.path[T - 1] = best_j
        for t in range(T - 1, 0, -1):
            self.path[t - 1] = self.back[<Py_ssize_t>t * H + self.path[t]]
        return best

    cdef double loglik(self, const int* labels) noexcept nogil:
        """``log p(y | x)`` with the marginals the gradient needs.

        ``n_latent == 1``: ``score(y) - log Z`` and the free-lattice marginals.
        ``n_latent > 1``: ``log Z_constrained - log Z`` and both sets of
        marginals (``marg_c``/``edge_c`` for the constrained lattice).
        """
        cdef double logz, logz_c
        if self.n_latent == 1:
            logz = self.forward_backward(NULL, self.marg, self.edge)
            return self.path_score(labels) - logz
        self.finish_emissions(labels)
        logz_c = self.forward_backward(labels, self.marg_c, self.edge_c)
        self.finish_emissions(NULL)
        if not isfinite(logz_c):
            return logz_c
        logz = self.forward_backward(NULL, self.marg, self.edge)
        return logz_c - logz

    cdef void add_gradient(self, SequenceData ds, Py_ssize_t s, const int* labels,
                           ScaledWeights target, double gain, bint fit_intercept) noexcept nogil:
        """``target.v += gain * grad log p(y | x)`` (after ``loglik``), sparsely.

        The gradient is ``E_{p(h|y,x)}[f] - E_{p(h|x)}[f]``: observed minus
        expected counts for a plain CRF. Only the state rows of the attributes
        present, the bias and the transitions are touched; with averaging on,
        ``u -= C * step`` keeps the running sum of past iterates unchanged.
        With ``set_allowed``, the weights that do not exist get no step (a
        multiplication by the 0/1 mask, so the loop stays branch-free).
        """
        cdef int H = self.n_states, T = self.T, nl = self.n_latent
        cdef int t, h, i
        cdef long long r, k, first = ds.offsets[s]
        cdef Py_ssize_t j, p, n_attr = self.n_attributes
        cdef double c, step, C = target.avg_coef
        cdef double* d = self.tmp
        cdef double* v = target.v
        cdef double* u = target.u
        cdef bint avg = target.averaged and C != 0.0
        cdef const unsigned char* mk = self.allowed
        cdef const double* mt
        cdef const double* mc
        for t in range(T):
            mt = self.marg + <Py_ssize_t>t * H
            if nl == 1:
                for h in range(H):
                    d[h] = -mt[h]
                d[labels[t]] += 1.0
            else:
                mc = self.marg_c + <Py_ssize_t>t * H
                for h in range(H):
                    d[h] = mc[h] - mt[h]
            r = first + t
            for k in range(ds.indptr[r], ds.indptr[r + 1]):
                j = ds.indices[k]
                if j >= n_attr:
                    continue
                c = gain * ds.data[k]
                p = j * H
                if mk != NULL:
                    for h in range(H):
                        step = c * d[h] * mk[p + h]
                        v[p + h] += step
                        if avg:
                            u[p + h] -= C * step
                elif avg:
                    for h in range(H):
                        step = c * d[h]
                        v[p + h] += step
                        u[p + h] -= C * step
                else:
                    for h in range(H):
                        v[p + h] += c * d[h]
            if fit_intercept:
                p = self.bias_offset
                for h in range(H):
                    step = gain * d[h]
                    v[p + h] += step
                    if avg:
                        u[p + h] -= C * step
        # transitions: observed (or constrained-expected) minus expected counts
        p = self.trans_offset
        if nl == 1:
            for i in range(H * H):
                step = -gain * self.edge[i]
                if mk != NULL:
                    step *= mk[p + i]
                v[p + i] += step
                if avg:
                    u[p + i] -= C * step
            for t in range(1, T):
                i = labels[t - 1] * H + labels[t]
                step = gain if mk == NULL else gain * mk[p + i]
                v[p + i] += step
                if avg:
                    u[p + i] -= C * step
        else:
            for i in range(H * H):
                step = gain * (self.edge_c[i] - self.edge[i])
                if mk != NULL:
                    step *= mk[p + i]
                v[p + i] += step
                if avg:
                    u[p + i] -= C * step

    # ---- Python hooks (tests) --------------------------------------------------
    def py_infer(self, emissions, transitions, labels=None):
        """Inference on given scores (tests).

        Parameters
        ----------
        emissions : ndarray of shape (T, H)
        transitions : ndarray of shape (H, H)
        labels : ndarray of shape (T,) or None
            Label indices; with ``n_latent > 1`` constrains the lattice.

        Returns
        -------
        result : dict
            ``log_z`` (free), ``marginals`` (T, H), ``edge`` (H, H),
            ``viterbi`` (T,), ``viterbi_score``; with labels also ``log_z_c``,
            ``marginals_c``, ``edge_c`` (constrained lattice) and ``loglik``.
        """
        cdef double[:, ::1] em = np.ascontiguousarray(emissions, dtype=np.float64)
        cdef double[:, ::1] tr = np.ascontiguousarray(transitions, dtype=np.float64)
        cdef int H = self.n_states
        cdef int T = em.shape[0]
        cdef int t, h, i
        cdef double m
        cdef int[::1] lab
        if em.shape[1] != H or tr.shape[0] != H or tr.shape[1] != H or T < 1:
            raise ValueError("bad shapes")
        self.ensure_capacity(T)
        self.T = T
        for t in range(T):
            for h in range(H):
                self.emit[t * H + h] = em[t, h]
        m = -INFINITY
        for i in range(H * H):
            self.trans[i] = tr[i // H, i % H]
            m = _dmax(m, self.trans[i])
        self.trans_max = m
        for i in range(H * H):
            self.exp_trans[i] = exp(self.trans[i] - m)
        self.finish_emissions(NULL)
        out = {}
        if labels is not None:
            lab = np.ascontiguousarray(labels, dtype=np.int32)
            if self.n_latent > 1:
                self.finish_emissions(&lab[0])
                out["log_z_c"] = self.forward_backward(&lab[0], self.marg_c, self.edge_c)
                self.finish_emissions(NULL)
                out["marginals_c"] = np.array(<double[:T * H]>self.marg_c).reshape(T, H)
                out["edge_c"] = np.array(<double[:H * H]>self.edge_c).reshape(H, H)
            else:
                out["path_score"] = self.path_score(&lab[0])
            out["loglik"] = self.loglik(&lab[0])
        out["log_z"] = self.forward_backward(NULL, self.marg, self.edge)
        out["marginals"] = np.array(<double[:T * H]>self.marg).reshape(T, H)
        out["edge"] = np.array(<double[:H * H]>self.edge).reshape(H, H)
        out["viterbi_score"] = self.viterbi()
        out["viterbi"] = np.array(<int[:T]>self.path)
        return out


# ---------------------------------------------------------------------------
# Prediction and objective
# ---------------------------------------------------------------------------
cdef CRFContext context_for(ScaledWeights w, int n_latent, int capacity, allowed=None):
    """An inference context for the CRF weights ``w`` (``A + H + 1`` blocks of
    ``H``), its gradient restricted to ``allowed`` (``CRFContext.set_allowed``)."""
    cdef int H = w.n_outputs
    if w.n_features < H + 1:
        raise ValueError("the weights are too small for the CRF layout")
    ctx = CRFContext(H, n_latent, capacity, w.n_features - H - 1)
    ctx.set_allowed(allowed)
    return ctx


def viterbi_decode(SequenceData ds, ScaledWeights w, int n_latent=1):
    """Best label per token (Viterbi over hidden states, mapped to labels)."""
    out = np.empty(ds.n_tokens, dtype=np.int32)
    cdef int[::1] o = out
    cdef CRFContext ctx = context_for(w, n_latent, ds.max_len)
    cdef Py_ssize_t s, bad = -1
    cdef int t, nl = n_latent
    cdef long long first
    with nogil:
        ctx.load_transitions(w)
        for s in range(ds.n_sequences):
            ctx.load_emissions(ds, s, w)
            if not all_finite(ctx.emit, <Py_ssize_t>ctx.T * ctx.n_states):
                bad = s                  # the max-product would pick an arbitrary path
                break
            ctx.viterbi()
            first = ds.offsets[s]
            for t in range(ctx.T):
                o[first + t] = ctx.path[t] // nl
    if bad >= 0:
        raise ValueError(f"non-finite token scores in sequence {bad}: its feature values "
                         "are too large for the model (scale the features as in training)")
    return out


def label_marginals(SequenceData ds, ScaledWeights w, int n_latent=1):
    """``p(y_t = label | x)`` per token, shape (n_tokens, n_labels)."""
    cdef CRFContext ctx = context_for(w, n_latent, ds.max_len)
    cdef int H = ctx.n_states, nl = n_latent, L = H // n_latent
    out = np.zeros((ds.n_tokens, L), dtype=np.float64)
    cdef double[:, ::1] o = out
    cdef Py_ssize_t s
    cdef int t, h
    cdef long long first
    cdef double logz
    cdef bint bad = False
    with nogil:
        ctx.load_transitions(w)
        for s in range(ds.n_sequences):
            ctx.load_emissions(ds, s, w)
            ctx.finish_emissions(NULL)
            logz = ctx.forward_backward(NULL, ctx.marg, ctx.edge)
            if not isfinite(logz):
                bad = True
                break
            first = ds.offsets[s]
            for t in range(ctx.T):
                for h in range(H):
                    o[first + t, h // nl] += ctx.marg[<Py_ssize_t>t * H + h]
    if bad:
        raise ValueError("non-finite log partition: the feature values (or the model "
                         "weights) are too large; scale the features as in training")
    return out


def loglik_gradient(SequenceData ds, ScaledWeights w, int n_latent=1, bint fit_intercept=True,
                    allowed=None):
    """Total ``log p(y | x)`` over the sequences and its gradient (flat).

    The gradient is accumulated by the same sparse ``add_gradient`` the
    trainers use (tests compare it with finite differences); ``allowed``
    restricts it to the weights that exist (``CRFContext.set_allowed``).
    """
    if not ds.has_labels:
        raise ValueError("labels are required")
    grad = np.zeros(w.n_features * w.n_outputs, dtype=np.float64)
    cdef ScaledWeights g = ScaledWeights(grad, w.n_outputs)
    cdef CRFContext ctx = context_for(w, n_latent, ds.max_len, allowed)
    cdef Py_ssize_t s
    cdef double total = 0.0
    cdef const int* lab = &ds.labels[0]
    with nogil:
        ctx.load_transitions(w)
        for s in range(ds.n_sequences):
            ctx.load_emissions(ds, s, w)
            ctx.finish_emissions(NULL)
            total += ctx.loglik(lab + ds.offsets[s])
            ctx.add_gradient(ds, s, lab + ds.offsets[s], g, 1.0, fit_intercept)
    return total, grad


def objective(SequenceData ds, ScaledWeights w, double alpha, int n_latent=1):
    """``alpha/2 ||w||^2 + mean over sequences of -log p(y | x)`` (inf if not finite)."""
    cdef CRFContext ctx = context_for(w, n_latent, ds.max_len)
    cdef Py_ssize_t s
    cdef double total = 0.0, ll, logz, logz_c
    cdef const int* lab = &ds.labels[0]
    cdef const int* y
    with nogil:
        ctx.load_transitions(w)
        for s in range(ds.n_sequences):
            ctx.load_emissions(ds, s, w)
            ctx.finish_emissions(NULL)
            y = lab + ds.offsets[s]
            logz = ctx.forward(NULL)
            if ctx.n_latent == 1:
                ll = ctx.path_score(y) - logz
            else:
                ctx.finish_emissions(y)
                logz_c = ctx.forward(y)
                ll = logz_c - logz
            total -= ll
        total = total / ds.n_sequences + 0.5 * alpha * w.sq_norm()
    return total if isfinite(total) else np.inf
