"""Inference on a trained linear-chain CRF given by its flat weights.

These are the sequence package's documented entry points for the layers
above it (the CRFsuite facade, ``crfsuite/``, and the command line's compact
tagger, ``cli/``), so that they name no ``_core`` module. The flat layout is
the taggers' (``sequence/_base.py``): the C-order state block
``(n_attributes, n_states)``, then the ``(n_states, n_states)`` transitions,
then the ``n_states`` biases; ``n_states`` is ``n_labels`` times the hidden
states per label (``n_latent``, 1 without hidden states).
"""
import numpy as np

from .._core._crf_infer import CRFContext, label_marginals, objective, viterbi_decode
from .._core._dataset import SequenceData
from .._core._weights import ScaledWeights

__all__ = ["sequence_batch", "viterbi_labels", "token_marginals", "path_log_likelihood",
           "mean_neg_log_likelihood"]


def sequence_batch(data, indices, indptr, offsets, n_attributes, labels=None):
    """Stacked token rows (CSR) and sequence offsets as one batch for inference.

    Parameters
    ----------
    data, indices, indptr : ndarray
        The tokens' attribute values as a CSR matrix of ``n_attributes``
        columns (``vectorize_dicts``' output).
    offsets : ndarray of int
        Sequence ``s`` is the rows ``offsets[s]:offsets[s + 1]``.
    n_attributes : int
    labels : int32 ndarray of shape (n_tokens,), default=None
        Each token's state index (``mean_neg_log_likelihood`` needs them).

    Returns
    -------
    batch : object
        Opaque; pass it to ``viterbi_labels``, ``token_marginals`` or
        ``mean_neg_log_likelihood``.
    """
    return SequenceData(data, indices, indptr, offsets, labels, n_attributes)


def _weights(flat, n_labels):
    return ScaledWeights(np.ascontiguousarray(flat, dtype=np.float64), int(n_labels))


def viterbi_labels(batch, flat, n_states, n_latent=1):
    """The best label path of every sequence (Viterbi).

    Parameters
    ----------
    batch : object
        From ``sequence_batch``.
    flat : ndarray of shape ((n_attributes + n_states + 1) * n_states,)
        The weights in the flat layout (module docstring).
    n_states : int
        The labels times ``n_latent``.
    n_latent : int, default=1
        Hidden states per label.

    Returns
    -------
    labels : int32 ndarray of shape (n_tokens,)
        Label indices, the sequences one after another.
    """
    return viterbi_decode(batch, _weights(flat, n_states), n_latent)


def token_marginals(batch, flat, n_states, n_latent=1):
    """``p(y_t = label | x)`` of every token (forward-backward).

    Parameters
    ----------
    batch : object
        From ``sequence_batch``.
    flat : ndarray
        The weights in the flat layout (module docstring).
    n_states : int
        The labels times ``n_latent``.
    n_latent : int, default=1
        Hidden states per label (their marginals summed per label).

    Returns
    -------
    marginals : ndarray of shape (n_tokens, n_labels)
    """
    return label_marginals(batch, _weights(flat, n_states), n_latent)


def mean_neg_log_likelihood(batch, flat, n_states, n_latent=1):
    """The mean over the sequences of ``-log p(labels | x)``.

    Parameters
    ----------
    batch : object
        From ``sequence_batch`` with ``labels``.
    flat : ndarray
        The weights in the flat layout (module docstring).
    n_states : int
        The labels times ``n_latent``.
    n_latent : int, default=1
        Hidden states per label (a label's states summed over).

    Returns
    -------
    loss : float
        ``inf`` when not finite.
    """
    return objective(batch, _weights(flat, n_states), 0.0, n_latent)


def path_log_likelihood(emissions, transitions, path):
    """``log p(path | x)``: the path's score minus ``log Z``.

    Parameters
    ----------
    emissions : ndarray of shape (T, n_labels)
        The tokens' state scores.
    transitions : ndarray of shape (n_labels, n_labels)
    path : ndarray of int of shape (T,)
        Label indices.

    Returns
    -------
    loglik : float
    """
    transitions = np.asarray(transitions, dtype=np.float64)
    out = CRFContext(transitions.shape[0]).py_infer(emissions, transitions, path)
    return out["loglik"]
