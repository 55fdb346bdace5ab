"""CRFsuite's feature set: which weights of the dense CRF layout exist.

CRFsuite generates a state feature only for an (attribute, label) pair that
occurs in the training data, and a transition only for a label bigram that
occurs, unless ``feature.possible_states`` / ``feature.possible_transitions``
(sklearn-crfsuite's ``all_possible_states`` / ``all_possible_transitions``)
ask for all of them (``crf1d_feature.c``). The trainers of this package keep
the dense layout (``CRFContext``'s: attribute rows, transition rows, bias) and
mark the weights CRFsuite would have; the others stay at zero. That is also
what makes CRFsuite's trainers cheap: L-BFGS works on the marked weights only.
"""
import numpy as np


def observed_weights(batch, label_idx, n_attributes, n_states, *, all_possible_states,
                     all_possible_transitions, fit_intercept):
    """Boolean mask over the flat weights: the features CRFsuite would generate.

    Parameters
    ----------
    batch : SequenceBatch
        The training sequences.
    label_idx : int32 ndarray of shape (n_tokens,)
        Label index of every token.
    n_attributes, n_states : int
        The layout (``n_attributes >= batch.n_features``).
    all_possible_states : bool
        Every (attribute, label) pair of the attributes present in ``batch``.
    all_possible_transitions : bool
        Every label bigram.
    fit_intercept : bool
        Mark the bias (one per label; CRFsuite has none).

    Returns
    -------
    mask : ndarray of bool, shape ((n_attributes + n_states + 1) * n_states,)
    """
    H = n_states
    mask = np.zeros((n_attributes + H + 1) * H, dtype=bool)
    per_row = np.diff(batch.indptr)
    if all_possible_states:
        seen = np.unique(batch.indices)
        mask[:n_attributes * H].reshape(n_attributes, H)[seen] = True
    else:
        mask[batch.indices.astype(np.int64) * H + np.repeat(label_idx, per_row)] = True
    trans = mask[n_attributes * H:(n_attributes + H) * H]
    if all_possible_transitions:
        trans[:] = True
    else:
        first = np.zeros(label_idx.size, dtype=bool)
        first[batch.offsets[:-1]] = True              # a sequence's first token
        t = np.flatnonzero(~first)
        trans[label_idx[t - 1].astype(np.int64) * H + label_idx[t]] = True
    if fit_intercept:
        mask[(n_attributes + H) * H:] = True
    return mask
