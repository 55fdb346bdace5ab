# Linear-chain CRF core: sequences as CSR + offsets, a reusable inference
# context (emissions, scaled forward-backward, marginals, Viterbi) and the
# flat parameter buffer with the scale trick and a lazy running sum of
# iterates. Trainer-agnostic, as CRFsuite's encoder: the SGD-type trainers
# (here and in other modules) only read the context's marginals.
#
# Parameter layout (one flat float64 buffer, H = n_states = n_labels * n_latent):
#   [0, A*H)                     state block, C-order (n_attributes, H)
#   [A*H, A*H + H*H)             transitions, C-order (from, to)
#   [A*H + H*H, A*H + H*H + H)   per-state bias (the intercept)

cdef class SequenceData:
    cdef const double[::1] data
    cdef const int[::1] indices
    cdef const long long[::1] indptr       # token rows, length n_tokens + 1
    cdef const long long[::1] offsets      # first token of each sequence, length n_sequences + 1
    cdef const int[::1] labels             # label index per token (may be empty)
    cdef readonly Py_ssize_t n_sequences
    cdef readonly Py_ssize_t n_tokens
    cdef readonly Py_ssize_t n_features
    cdef readonly int max_len
    cdef readonly bint has_labels
    cdef Py_ssize_t[::1] order

    cdef void shuffle(self, unsigned int* seed) noexcept nogil


cdef class CRFWeights:
    cdef double[::1] v_arr
    cdef double* v
    cdef double[::1] u_arr
    cdef double* u                         # running sum of iterates: S = u + avg_coef * v
    cdef readonly Py_ssize_t n_attributes
    cdef readonly int n_states
    cdef readonly int n_labels
    cdef readonly int n_latent
    cdef readonly Py_ssize_t size
    cdef readonly Py_ssize_t trans_offset
    cdef readonly Py_ssize_t bias_offset
    cdef readonly double scale
    cdef readonly double avg_coef
    cdef readonly double n_iterates
    cdef readonly bint averaged

    cdef void shrink(self, double factor) noexcept nogil
    cdef void fold(self) noexcept nogil
    cdef void count_iterate(self) noexcept nogil
    cdef void reset_to_average(self) noexcept nogil
    cdef bint is_finite(self) noexcept nogil
    cdef double sq_norm(self) noexcept nogil


cdef class CRFContext:
    cdef readonly int n_states
    cdef readonly int n_latent
    cdef readonly int capacity
    cdef readonly int T
    cdef double* emit        # (cap, H) raw scores  x.W + b
    cdef double* state       # (cap, H) exp(emit - row max), masked when constrained
    cdef double* rowmax      # (cap,)
    cdef double* trans       # (H, H) transition scores
    cdef double* exp_trans   # (H, H) exp(trans - max)
    cdef double trans_max
    cdef double* alpha       # (cap, H) normalised forward variables
    cdef double* beta        # (cap, H) scaled backward variables
    cdef double* norm        # (cap,) forward normalisers
    cdef double* tmp         # (H,)
    cdef double* marg        # (cap, H) node marginals, free lattice
    cdef double* edge        # (H, H) edge marginals summed over positions, free lattice
    cdef double* marg_c      # (cap, H) node marginals, label-constrained lattice (latent)
    cdef double* edge_c      # (H, H)
    cdef int* back           # (cap, H) Viterbi back pointers
    cdef double* vscore      # (2, H) Viterbi scores
    cdef int* path           # (cap,)

    cdef int ensure_capacity(self, int T) except -1 nogil
    cdef void load_emissions(self, SequenceData ds, Py_ssize_t s, CRFWeights w) noexcept nogil
    cdef void load_transitions(self, CRFWeights w) noexcept nogil
    cdef void finish_emissions(self) noexcept nogil
    cdef void finish_emissions_constrained(self, const int* labels) noexcept nogil
    cdef double forward(self, const int* labels) noexcept nogil
    cdef void backward(self, const int* labels, double* marg, double* edge) noexcept nogil
    cdef double forward_backward(self, const int* labels, double* marg, double* edge) noexcept nogil
    cdef double path_score(self, const int* labels) noexcept nogil
    cdef double viterbi(self) noexcept nogil
    cdef double loglik(self, const int* labels) noexcept nogil
    cdef void add_gradient(self, SequenceData ds, Py_ssize_t s, const int* labels,
                           CRFWeights target, double gain, bint fit_intercept) noexcept nogil
