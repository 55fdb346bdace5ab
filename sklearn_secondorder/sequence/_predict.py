"""Prediction and the named weights of the sequence taggers (``TaggerPredictionMixin``).

``predict`` (Viterbi), ``predict_single``, ``predict_marginals``, ``score``,
and the fitted model's named weights (``attributes_``, ``state_features_``,
``transition_features_``, ``coef_``, ``intercept_``), from the flat weights
``_model`` of ``_BaseSequenceTagger`` (``_base.py``), as ``linear/_predict.py``
is for the linear models.
"""

import numpy as np

from .._compat import check_is_fitted
from .._core._crf_infer import label_marginals, viterbi_decode
from .._core._weights import ScaledWeights
from ._input import (
    KIND_DICTS,
    KIND_FLAT,
    flatten_labels,
)


class TaggerPredictionMixin:
    """Prediction from the flat weights and the named weights of
    ``_BaseSequenceTagger`` (see the module docstring)."""

    def _model_weights(self):
        # an unpickled model may hold read-only (memory-mapped) arrays
        return ScaledWeights(np.require(self._model, requirements=["C", "W"]), self._n_states())

    def _predict_data(self, X):
        check_is_fitted(self)
        batch = self._to_data(X)
        return batch.sequence_data(self._state.crf.n_attributes), batch.offsets, batch.kind

    def predict(self, X):
        """Best label sequence of each sequence (Viterbi).

        With ``n_latent > 1`` the best hidden-state path is decoded and mapped
        to its labels (an approximation of the most probable label path).

        Parameters
        ----------
        X : list of sequences, or {array-like, sparse matrix}
            The sequences to tag, in the form used for fitting.

        Returns
        -------
        y_pred : list of lists of labels, or ndarray of shape (n_samples,)
            An array when ``X`` is a plain 2-D array / sparse matrix.
        """
        ds, offsets, kind = self._predict_data(X)
        labels = self.classes_[viterbi_decode(ds, self._model_weights(), self._n_latent())]
        if kind == KIND_FLAT:
            return labels
        return [labels[a:b].tolist() for a, b in zip(offsets[:-1], offsets[1:])]

    def predict_single(self, xseq):
        """Predict the labels of one sequence (sklearn-crfsuite's ``predict_single``).

        Parameters
        ----------
        xseq : list of dict, or {array-like, sparse matrix} of shape (n_tokens, n_features)
            One sequence: per-token feature dicts or a 2-D array.

        Returns
        -------
        y_pred : list
            The label of every token (``predict([xseq])[0]``).
        """
        return self.predict([xseq])[0]

    def predict_marginals(self, X):
        """Compute the marginal probability of each label at each token.

        The marginals come from a forward-backward pass over each sequence.

        Parameters
        ----------
        X : list of sequences, or {array-like, sparse matrix}
            The sequences, in the form used for fitting.

        Returns
        -------
        marginals : list of lists of dict
            ``{label: p(y_t = label | x)}`` for every token of every sequence
            (one-token sequences for a plain 2-D array).
        """
        ds, offsets, _ = self._predict_data(X)
        P = label_marginals(ds, self._model_weights(), self._n_latent())
        names = self.classes_.tolist()
        return [[dict(zip(names, row)) for row in P[a:b].tolist()]
                for a, b in zip(offsets[:-1], offsets[1:])]

    def score(self, X, y):
        """Return the flat token accuracy of ``predict(X)`` against ``y``.

        Parameters
        ----------
        X : list of sequences, or {array-like, sparse matrix}
            The sequences, in the form used for fitting.
        y : list of label lists, or array-like of shape (n_samples,)
            The true label of every token.

        Returns
        -------
        score : float
            The fraction of tokens, over all sequences, whose predicted label
            is the true one.
        """
        y_pred = self.predict(X)
        if isinstance(y_pred, np.ndarray):
            return float(np.mean(np.asarray(y).ravel() == y_pred))
        true = flatten_labels(y, [len(s) for s in y_pred])
        pred = np.asarray([lab for s in y_pred for lab in s])
        return float(np.mean(true == pred))

    # ---- named weights ------------------------------------------------------------
    def _state_names(self):
        nl = self._n_latent()
        names = self.classes_.tolist()
        if nl == 1:
            return names
        return [(lab, k) for lab in names for k in range(nl)]

    @property
    def attributes_(self):
        """Attribute names, by column (feature dicts) or column indices."""
        check_is_fitted(self)
        if self._kind == KIND_DICTS:
            names = [None] * len(self.vocabulary_)
            for key, j in self.vocabulary_.items():
                names[j] = key
            return names
        if hasattr(self, "feature_names_in_"):
            return self.feature_names_in_.tolist()
        return list(range(self._state.crf.n_attributes))

    def _blocks(self):
        check_is_fitted(self)
        A = self._state.crf.n_attributes
        H = self.classes_.size * self._n_latent()
        w = self._model
        return (w[:A * H].reshape(A, H), w[A * H:A * H + H * H].reshape(H, H),
                w[A * H + H * H:])

    @property
    def state_features_(self):
        """``{(attribute, label): weight}`` for the non-zero state weights.

        With ``n_latent > 1`` the label is ``(label, k)``, the k-th hidden
        state of the label.
        """
        W, _, _ = self._blocks()
        attrs, states = self.attributes_, self._state_names()
        rows, cols = np.nonzero(W)
        return {(attrs[r], states[c]): float(W[r, c]) for r, c in zip(rows, cols)}

    @property
    def transition_features_(self):
        """``{(label_from, label_to): weight}`` for all transitions."""
        _, A, _ = self._blocks()
        states = self._state_names()
        H = len(states)
        return {(states[i], states[j]): float(A[i, j]) for i in range(H) for j in range(H)}

    @property
    def intercept_(self):
        """Per-label bias added to every token's scores (zero unless ``fit_intercept``)."""
        return self._blocks()[2].copy()

    @property
    def coef_(self):
        """State weights as an array of shape (n_states, n_attributes)."""
        return self._blocks()[0].T.copy()

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        tags.target_tags.required = True
        return tags
