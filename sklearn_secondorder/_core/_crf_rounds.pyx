"""The arrays of a CRF pass shared by threads (``_crf_rounds.pxd``)."""
from ._dataset cimport SequenceData

import numpy as np


cdef class RoundArrays:
    """The round buffers and the threads' own rows of a shared CRF pass on
    ``n_threads`` threads (``_crf_psa.SharedPass``, ``_crf_sgd.SharedSGDPass``).

    A round holds at most ``round_seqs`` sequences, ``round_tokens`` tokens
    (32 a sequence, or the longest sequence) and ``round_nnz`` non-zeros (32
    a token, or the most a sequence has): ``sequences_round_end`` cuts the
    rounds so.
    """

    def __cinit__(self, SequenceData ds, int n_threads, Py_ssize_t H, Py_ssize_t round_seqs):
        cdef Py_ssize_t s
        self.most_nnz = 0
        for s in range(ds.n_sequences):
            self.most_nnz = max(self.most_nnz,
                                ds.indptr[ds.offsets[s + 1]] - ds.indptr[ds.offsets[s]])
        self.round_seqs = round_seqs
        self.round_tokens = max(round_seqs * 32, ds.max_len)
        self.round_nnz = max(self.round_tokens * 32, self.most_nnz)
        self.em_part = np.zeros((n_threads, self.round_tokens, H))
        self.trans_round = np.zeros(H * H)
        self.marg_round = np.zeros(self.round_tokens * H)
        self.edge_round = np.zeros(round_seqs * H * H)
        self.loss_round = np.zeros(round_seqs)
        self.own_block = np.zeros((n_threads, self.round_nnz), dtype=np.intc)
        self.own_at = np.zeros((n_threads, self.round_nnz), dtype=np.intc)
        # (rows of their own cache lines: every thread writes its row)
        self.ends = np.zeros((n_threads, self.round_tokens + 16), dtype=np.intc)
        self.tok_off = np.zeros((n_threads, round_seqs + 16), dtype=np.intc)
        self.next_seq = np.zeros(16, dtype="l")      # (C long)
        self.work = np.zeros(n_threads * 8 * (H // 8 + 2))
        self.rb.H, self.rb.round_tokens = H, self.round_tokens
        self.rb.em_part = &self.em_part[0, 0, 0]
        self.rb.trans_round = &self.trans_round[0]
        self.rb.marg_round = &self.marg_round[0]
        self.rb.edge_round = &self.edge_round[0]
        self.rb.loss_round = &self.loss_round[0]
        self.rb.next_seq = &self.next_seq[0]
