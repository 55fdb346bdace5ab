"""Deployment-size models: what prediction needs, nothing of the training state.

``deploy(estimator, kind)`` is what ``skso train`` writes by default
(without ``--keep-state``):

- a linear model is the estimator after ``strip_training_state()`` (step
  sizes, averages and snapshots dropped), with ``sparsify()`` when the
  non-zero weights are few enough that CSR is smaller than the dense array
  (hashed features: most columns are never seen);
- a tagger is a `CompactTagger`: CRFsuite's compact form for hashed
  features. CRFsuite stores the attributes that have a weight and their
  weights; here the attributes are the hashed columns that have a non-zero
  weight (``columns``) and their state weights, with the transitions and the
  per-label bias. The training state of a tagger (per-weight step sizes,
  window snapshots, averages over all ``2**hash_bits`` columns) is several
  times the full weight array, which itself is mostly zeros.
"""
import numpy as np
import scipy.sparse as sp

from ..sequence import mean_neg_log_likelihood, sequence_batch, token_marginals, viterbi_labels


class CompactTagger:
    """A trained linear-chain CRF over hashed columns, non-zero columns only.

    Predicts exactly as the tagger it was made from (the columns it drops
    have zero weights, which add nothing to a token's scores).

    Parameters
    ----------
    classes : ndarray of shape (n_labels,)
        The labels (the tagger's ``classes_``).
    n_features : int
        The columns of the data (``2**hash_bits``).
    columns : ndarray of int
        The sorted columns with a non-zero state weight.
    state : ndarray of shape (n_columns, n_states)
        Their state weights.
    transitions : ndarray of shape (n_states, n_states)
        ``transitions[i, j]``: the weight of state ``i`` followed by ``j``.
    intercept : ndarray of shape (n_states,)
        The per-state bias.

    Attributes
    ----------
    classes_ : ndarray of shape (n_labels,)
        The labels.
    n_latent : int
        Hidden states per label (``n_states / n_labels``).
    """

    def __init__(self, classes, n_features, columns, state, transitions, intercept):
        self.classes_ = np.asarray(classes)
        self.n_features = int(n_features)
        self.columns = np.asarray(columns, dtype=np.int32)
        self.state = np.ascontiguousarray(state, dtype=np.float64)
        self.transitions = np.ascontiguousarray(transitions, dtype=np.float64)
        self.intercept = np.ascontiguousarray(intercept, dtype=np.float64)
        H = self.transitions.shape[0]
        if (self.state.shape != (self.columns.size, H) or self.intercept.shape != (H,)
                or H % self.classes_.size):
            raise ValueError(f"inconsistent compact tagger: {self.columns.size} columns, "
                             f"state {self.state.shape}, transitions "
                             f"{self.transitions.shape}, {self.classes_.size} labels")
        self.n_latent = H // self.classes_.size
        self._flat = None

    @classmethod
    def from_estimator(cls, est, n_features):
        """The compact form of a fitted tagger of this package.

        Parameters
        ----------
        est : estimator
            A fitted ``PSASequenceTagger``, ``ASFSequenceTagger`` or
            ``SGDSequenceTagger`` trained on CSR rows of ``n_features`` columns.
        n_features : int
            The columns of the data.

        Returns
        -------
        model : CompactTagger
            Its non-zero columns and weights.
        """
        W = est.coef_                            # (n_states, n_attributes seen so far)
        H = W.shape[0]
        columns = np.flatnonzero(np.any(W != 0, axis=0))
        trans = np.fromiter(est.transition_features_.values(), dtype=np.float64,
                            count=H * H).reshape(H, H)
        return cls(est.classes_, n_features, columns, W[:, columns].T, trans, est.intercept_)

    @property
    def n_weights(self):
        """The weights stored (state, transitions and bias)."""
        return self.state.size + self.transitions.size + self.intercept.size

    # ---- the CRF core on the compact weights ----------------------------------------
    def _weights(self):
        if self._flat is None:
            self._flat = np.concatenate([self.state.ravel(), self.transitions.ravel(),
                                         self.intercept])
        return self._flat

    def _data(self, X, offsets, y=None):
        """The tokens ``X`` (CSR over ``n_features`` columns) on the compact
        columns: the columns the model has no weight for are dropped."""
        X = sp.csr_matrix(X)
        pos = np.searchsorted(self.columns, X.indices)
        pos_c = np.minimum(pos, max(self.columns.size - 1, 0))
        keep = (pos < self.columns.size) & (self.columns[pos_c] == X.indices) \
            if self.columns.size else np.zeros(X.indices.size, dtype=bool)
        rows = np.repeat(np.arange(X.shape[0]), np.diff(X.indptr))
        counts = np.bincount(rows[keep], minlength=X.shape[0])
        indptr = np.concatenate(([0], np.cumsum(counts))).astype(np.int64)
        labels = None
        if y is not None:
            labels = (np.searchsorted(self.classes_, y) * self.n_latent).astype(np.int32)
        return sequence_batch(np.ascontiguousarray(X.data[keep], dtype=np.float64),
                              pos[keep].astype(np.int32), indptr,
                              np.asarray(offsets, dtype=np.int64), max(self.columns.size, 1),
                              labels=labels)

    def decode(self, X, offsets):
        """The Viterbi labels of the sentences of a chunk.

        Parameters
        ----------
        X : sparse matrix of shape (n_tokens, n_features)
            The tokens of all the sentences.
        offsets : ndarray of shape (n_sentences + 1,)
            Sentence ``s`` is tokens ``offsets[s]:offsets[s+1]``.

        Returns
        -------
        labels : ndarray of shape (n_tokens,)
            The label of every token.
        """
        return self.classes_[viterbi_labels(self._data(X, offsets), self._weights(),
                                            self.transitions.shape[0], self.n_latent)]

    def neg_log_likelihood(self, X, offsets, y):
        """``sum over sentences of -log p(labels | sentence)``: the CRF's loss.

        Parameters
        ----------
        X : sparse matrix of shape (n_tokens, n_features)
            The tokens of all the sentences.
        offsets : ndarray of shape (n_sentences + 1,)
            Sentence boundaries.
        y : ndarray of shape (n_tokens,)
            The labels (all in ``classes_``).

        Returns
        -------
        loss : float
            The total (``inf`` when not finite).
        """
        n = len(offsets) - 1
        return mean_neg_log_likelihood(self._data(X, offsets, y), self._weights(),
                                       self.transitions.shape[0], self.n_latent) * n

    # ---- the taggers' prediction API --------------------------------------------
    @staticmethod
    def _stack(X):
        X = [sp.csr_matrix(x) for x in X]
        offsets = np.concatenate(([0], np.cumsum([x.shape[0] for x in X]))).astype(np.int64)
        return sp.vstack(X, format="csr"), offsets

    def predict(self, X):
        """Best label sequence of each sentence (Viterbi), as the tagger's ``predict``.

        Parameters
        ----------
        X : list of sparse matrices
            One ``(n_tokens, n_features)`` matrix per sentence
            (``SavedModel.iter_chunks`` reads them from a file).

        Returns
        -------
        y_pred : list of lists of labels
            The labels of every sentence.
        """
        if not len(X):
            return []
        M, offsets = self._stack(X)
        labels = self.decode(M, offsets)
        return [labels[a:b].tolist() for a, b in zip(offsets[:-1], offsets[1:])]

    def predict_marginals(self, X):
        """Compute the marginal probability of each label at each token.

        Parameters
        ----------
        X : list of sparse matrices
            One ``(n_tokens, n_features)`` matrix per sentence.

        Returns
        -------
        marginals : list of lists of dict
            ``{label: p(y_t = label | x)}`` for every token of every sentence.
        """
        if not len(X):
            return []
        M, offsets = self._stack(X)
        P = token_marginals(self._data(M, offsets), self._weights(),
                            self.transitions.shape[0], self.n_latent)
        names = self.classes_.tolist()
        return [[dict(zip(names, row)) for row in P[a:b].tolist()]
                for a, b in zip(offsets[:-1], offsets[1:])]

    # ---- pickling: the arrays only ---------------------------------------------------
    def __getstate__(self):
        state = dict(vars(self))
        state["_flat"] = None
        return state


def deploy(est, kind, n_features):
    """What prediction needs of a fitted estimator (``skso train``'s default file).

    Parameters
    ----------
    est : estimator
        The trained estimator (a linear model is changed in place).
    kind : {'linear', 'regressor', 'tagger'}
        The kind of ``--model``.
    n_features : int
        The columns of the data.

    Returns
    -------
    model : object
        The linear estimator without its training state (sparse weights
        when smaller), or a `CompactTagger`.
    """
    if kind == "tagger":
        return CompactTagger.from_estimator(est, n_features)
    est.strip_training_state()
    coef = np.asarray(est.coef_)
    # CSR costs an index (4 bytes) beside each float64, and a row pointer
    # per row (a regressor's coef_ of shape (n_features,) is one row)
    n_rows = coef.shape[0] if coef.ndim == 2 else 1
    if 12 * np.count_nonzero(coef) + 8 * (n_rows + 1) < 8 * coef.size:
        est.sparsify()
    return est
