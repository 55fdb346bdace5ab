# Linear-chain CRF inference: a reusable context (emissions, scaled
# forward-backward, marginals, Viterbi) over the linear core's weight classes.
# Trainer-agnostic, as CRFsuite's encoder: the trainers read its marginals.
#
# Parameter layout (one flat float64 buffer, H = n_states = n_labels * n_latent):
#   [0, A*H)                     state block, C-order (n_attributes, H)
#   [A*H, A*H + H*H)             transitions, C-order (from, to)
#   [A*H + H*H, A*H + H*H + H)   per-state bias (the intercept)

from ._dataset cimport SequenceData
from ._weights cimport ScaledWeights


cdef class CRFContext:
    cdef readonly int n_states
    cdef readonly int n_latent
    cdef readonly Py_ssize_t n_attributes
    cdef readonly Py_ssize_t trans_offset
    cdef readonly Py_ssize_t bias_offset
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
    cdef const unsigned char* allowed   # (A+H+1)*H: 1 where a weight exists, or NULL (all)
    cdef object allowed_ref             # the array behind ``allowed``

    cdef int ensure_capacity(self, int T) except -1 nogil
    cdef void load_emissions(self, SequenceData ds, Py_ssize_t s, ScaledWeights w) noexcept nogil
    cdef void load_transitions(self, ScaledWeights w) noexcept nogil
    cdef void finish_transitions(self) noexcept nogil
    cdef void finish_emissions(self, const int* labels) noexcept nogil
    cdef double forward(self, const int* labels) noexcept nogil
    cdef void backward(self, const int* labels, double* marg, double* edge) noexcept nogil
    cdef double forward_backward(self, const int* labels, double* marg,
                                 double* edge) noexcept nogil
    cdef double path_score(self, const int* labels) noexcept nogil
    cdef double viterbi(self) noexcept nogil
    cdef double loglik(self, const int* labels) noexcept nogil
    cdef void add_gradient(self, SequenceData ds, Py_ssize_t s, const int* labels,
                           ScaledWeights target, double gain, bint fit_intercept) noexcept nogil


cdef CRFContext context_for(ScaledWeights w, int n_latent, int capacity, allowed=*)
