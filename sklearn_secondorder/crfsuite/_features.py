"""The CRF's feature set: CRFsuite's feature generation as a mask over the flat
weights (before training), and the compact model deployed from a trained tagger
(after)."""
import numpy as np
import scipy.sparse as sp

from ._model import CRFModel


def feature_mask(batch, label_idx, n_labels, *, min_freq, all_states, all_transitions):
    """CRFsuite's feature generation as a 0/1 mask over the flat weights.

    A state feature ``(attribute, label)`` exists when the attribute occurs
    on a token of that label in training (``all_states``: for every label),
    a transition feature ``(a, b)`` when label ``a`` is followed by ``b``
    (``all_transitions``: every pair); a feature's frequency is the sum of
    the attribute's values over those tokens (the number of bigrams for a
    transition; 0 for a feature only ``all_*`` generates), and features of
    frequency below ``min_freq`` are dropped (CRFsuite keeps
    ``freq >= min_freq``).

    Returns
    -------
    mask : uint8 ndarray of shape ((A + L + 1) * L,) or None
        None when every weight exists.
    """
    A, L, n_tok = batch.n_features, n_labels, batch.n_tokens
    if all_states and all_transitions and min_freq <= 0:
        return None
    # one product gives both: real part the frequency, imaginary part the
    # number of occurrences (> 0, so a pair seen with value 0 is not lost)
    M = sp.csr_matrix((batch.data + 1j, batch.indices, batch.indptr), shape=(n_tok, A))
    Y = sp.csr_matrix((np.ones(n_tok), (np.arange(n_tok), label_idx)), shape=(n_tok, L))
    F = (M.T @ Y).tocoo()
    seen = F.data.imag > 0
    state = np.full((A, L), 1 if (all_states and min_freq <= 0) else 0, dtype=np.uint8)
    state[F.row[seen], F.col[seen]] = F.data.real[seen] >= min_freq
    starts = batch.offsets[:-1]
    inner = np.ones(n_tok, dtype=bool)
    inner[starts] = False                    # tokens with a predecessor in their sequence
    t = np.nonzero(inner)[0]
    counts = np.zeros((L, L))
    np.add.at(counts, (label_idx[t - 1], label_idx[t]), 1.0)
    trans = np.where(counts > 0, counts >= min_freq,
                     all_transitions and min_freq <= 0).astype(np.uint8)
    return np.concatenate([state.ravel(), trans.ravel(), np.ones(L, dtype=np.uint8)])


def deployed_model(tagger, batch, classes, mask, flat=None):
    """The compact model: labels in first-appearance order, the attributes
    with a non-zero weight, the weights that exist (of ``flat``, weights in
    the tagger's flat layout, when given: l2sgd's best pass; else the
    tagger's)."""
    A, L = tagger.n_attributes_, classes.size
    if flat is None:
        flat = tagger.flat_weights_
    flat = np.asarray(flat, dtype=np.float64)
    W = flat[:A * L].reshape(A, L)
    T = flat[A * L:A * L + L * L].reshape(L, L)
    _, first = np.unique(batch.labels, return_index=True)
    perm = np.argsort(first, kind="stable")
    W, T = W[:, perm], T[perm][:, perm]
    used = np.flatnonzero(np.any(W != 0, axis=1))
    names = [None] * A
    for key, j in tagger.vocabulary_.items():
        names[j] = key
    return CRFModel(classes[perm].tolist(), [names[j] for j in used], W[used], T)
