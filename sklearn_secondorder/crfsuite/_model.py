"""The deployed model of `sklearn_secondorder.crfsuite.CRF`: compact, file-backed.

``CRFModel`` holds what a CRFsuite model file holds: the labels, the
attributes that have a non-zero weight, the state weights (sparse) and the
transition weights. It predicts on the shared CRF core (through the sequence package's
``viterbi_labels``, ``token_marginals``), saves to / loads from a ``.npz`` file (no pickle inside,
``allow_pickle=False``), and pickles at that size. ``Tagger`` wraps it with
pycrfsuite's ``Tagger`` methods.
"""
import io
from collections import namedtuple

import numpy as np
import scipy.sparse as sp

from ..sequence import path_log_likelihood, sequence_batch, token_marginals, viterbi_labels
from ..sequence._input import _is_item_sequence, vectorize_dicts

FORMAT = "sklearn-secondorder-crf/1"

#: pycrfsuite's ``Tagger.info()`` result (``ParsedDump``'s fields).
ModelInfo = namedtuple("ModelInfo", "header labels attributes state_features transitions")


class CRFModel:
    """A trained linear-chain CRF as CRFsuite stores it (non-zero weights only).

    Parameters
    ----------
    labels : list of str
        In the order of their first appearance in the training data (as
        CRFsuite's ``labels()``).
    attributes : list of str
        The attributes with at least one non-zero state weight, in the
        order of their first appearance.
    state : array-like or sparse matrix of shape (n_attributes, n_labels)
        The state weights.
    transitions : ndarray of shape (n_labels, n_labels)
        ``transitions[i, j]``: the weight of label ``i`` followed by ``j``.
    """

    def __init__(self, labels, attributes, state, transitions):
        self.labels = [str(lab) for lab in labels]
        self.attributes = [str(a) for a in attributes]
        L, A = len(self.labels), len(self.attributes)
        state = sp.csr_matrix(state, dtype=np.float64)
        transitions = np.asarray(transitions, dtype=np.float64)
        if state.shape != (A, L) or transitions.shape != (L, L):
            raise ValueError(f"a CRF model of {A} attributes and {L} labels needs state "
                             f"weights of shape {(A, L)} and transitions of shape {(L, L)}; "
                             f"got {state.shape} and {transitions.shape}.")
        state.eliminate_zeros()
        self.state = state
        self.transitions = transitions
        self._flat = None
        self._vocabulary = None
        self._size = None

    # ---- inference ----------------------------------------------------------
    @property
    def vocabulary(self):
        """Attribute name -> row."""
        if self._vocabulary is None:
            self._vocabulary = {a: i for i, a in enumerate(self.attributes)}
        return self._vocabulary

    def _weights(self):
        """The flat weights (state block, transitions, zero biases)."""
        if self._flat is None:
            L = len(self.labels)
            self._flat = np.concatenate([self.state.toarray().ravel(),
                                         self.transitions.ravel(), np.zeros(L)])
        return self._flat

    def _data(self, X):
        data, indices, indptr, offsets = vectorize_dicts(X, self.vocabulary, grow=False)
        return sequence_batch(data, indices, indptr, offsets, len(self.attributes)), offsets

    @staticmethod
    def _split_empty(X):
        """``X`` without its empty sequences, and where the others go (an empty
        sequence is tagged ``[]``, as pycrfsuite does)."""
        X = list(X)
        keep = [i for i, seq in enumerate(X) if not hasattr(seq, "__len__") or len(seq)]
        return [X[i] for i in keep], keep, len(X)

    def tag(self, X):
        """Predict the Viterbi labels of every sequence.

        Parameters
        ----------
        X : list of sequences
            Token features in pycrfsuite's forms.

        Returns
        -------
        labels : list of lists of str
            The labels of every sequence.
        """
        X, keep, n = self._split_empty(X)
        out = [[] for _ in range(n)]
        if X:
            ds, offsets = self._data(X)
            idx = viterbi_labels(ds, self._weights(), len(self.labels))
            names = np.asarray(self.labels, dtype=object)[idx]
            for i, a, b in zip(keep, offsets[:-1], offsets[1:]):
                out[i] = names[a:b].tolist()
        return out

    def marginals(self, X):
        """Compute ``p(y_t = label | x)`` for every token of every sequence.

        Parameters
        ----------
        X : list of sequences
            Token features in pycrfsuite's forms.

        Returns
        -------
        marginals : list of ndarray
            One ``(n_tokens, n_labels)`` array per sequence (labels in
            ``labels`` order).
        """
        X, keep, n = self._split_empty(X)
        out = [np.zeros((0, len(self.labels))) for _ in range(n)]
        if X:
            ds, offsets = self._data(X)
            P = token_marginals(ds, self._weights(), len(self.labels))
            for i, a, b in zip(keep, offsets[:-1], offsets[1:]):
                out[i] = P[a:b]
        return out

    def log_probability(self, xseq, yseq):
        """Compute ``log p(yseq | xseq)``: the path's score minus ``log Z``.

        Parameters
        ----------
        xseq : list
            One sequence of token features.
        yseq : list of str
            A label per token.

        Returns
        -------
        log_p : float
            The log-probability of the label sequence.
        """
        idx = {lab: i for i, lab in enumerate(self.labels)}
        try:
            path = np.array([idx[lab] for lab in yseq])
        except KeyError as exc:
            raise ValueError(f"label {exc.args[0]!r} is not a label of the model") from None
        data, indices, indptr, _ = vectorize_dicts([xseq], self.vocabulary, grow=False)
        if len(path) != indptr.size - 1:
            raise ValueError(f"yseq has {len(path)} labels for {indptr.size - 1} tokens.")
        M = sp.csr_matrix((data, indices, indptr), shape=(indptr.size - 1, len(self.attributes)))
        emissions = np.asarray((M @ self.state).toarray())
        return path_log_likelihood(emissions, self.transitions, path)

    # ---- description -------------------------------------------------------------
    def state_features(self):
        """Return the non-zero state weights by name.

        Returns
        -------
        weights : dict
            ``{(attribute, label): weight}``.
        """
        S = self.state.tocoo()
        return {(self.attributes[r], self.labels[c]): float(v)
                for r, c, v in zip(S.row, S.col, S.data)}

    def transition_features(self):
        """Return the non-zero transition weights by name.

        Returns
        -------
        weights : dict
            ``{(label_from, label_to): weight}``.
        """
        rows, cols = np.nonzero(self.transitions)
        return {(self.labels[i], self.labels[j]): float(self.transitions[i, j])
                for i, j in zip(rows, cols)}

    def to_bytes(self):
        """Serialise the model as the content of its file.

        Returns
        -------
        content : bytes
            A compressed ``.npz`` (no pickled objects).
        """
        buf = io.BytesIO()
        np.savez_compressed(
            buf, format=np.array(FORMAT), labels=np.array(self.labels, dtype=str),
            attributes=np.array(self.attributes, dtype=str),
            state_data=self.state.data, state_indices=self.state.indices.astype(np.int32),
            state_indptr=self.state.indptr.astype(np.int64), transitions=self.transitions)
        return buf.getvalue()

    @classmethod
    def from_bytes(cls, content):
        """Read a model from ``to_bytes``' content.

        Parameters
        ----------
        content : bytes
            The content of a model file.

        Returns
        -------
        model : CRFModel
            The model.
        """
        with np.load(io.BytesIO(content), allow_pickle=False) as f:
            if "format" not in f or str(f["format"]) != FORMAT:
                raise ValueError("not a model file of sklearn_secondorder.crfsuite.CRF")
            labels, attributes = f["labels"].tolist(), f["attributes"].tolist()
            state = sp.csr_matrix((f["state_data"], f["state_indices"], f["state_indptr"]),
                                  shape=(len(attributes), len(labels)))
            return cls(labels, attributes, state, f["transitions"])

    def save(self, path):
        """Write the model file.

        Parameters
        ----------
        path : str or path-like
            Where to write.

        Returns
        -------
        size : int
            The size of the file in bytes.
        """
        content = self.to_bytes()
        with open(path, "wb") as fh:
            fh.write(content)
        return len(content)

    @classmethod
    def load(cls, path):
        """Read a model file: this package's, or CRFsuite's (with python-crfsuite).

        Parameters
        ----------
        path : str or path-like
            The model file.

        Returns
        -------
        model : CRFModel
            The model.
        """
        with open(path, "rb") as fh:
            content = fh.read()
        if content[:4] == b"lCRF":          # CRFsuite's model file magic
            return cls._from_crfsuite(path)
        return cls.from_bytes(content)

    @classmethod
    def _from_crfsuite(cls, path):
        try:
            import pycrfsuite
        except ImportError as exc:      # pragma: no cover - pycrfsuite is a test extra
            raise ValueError(f"{path} is a CRFsuite model: reading it needs "
                             "python-crfsuite (pip install python-crfsuite)") from exc
        tagger = pycrfsuite.Tagger()
        tagger.open(path)
        info = tagger.info()
        labels = sorted(info.labels, key=lambda lab: int(info.labels[lab]))
        attributes = sorted(info.attributes, key=lambda a: int(info.attributes[a]))
        li = {lab: i for i, lab in enumerate(labels)}
        ai = {a: i for i, a in enumerate(attributes)}
        state = sp.lil_matrix((len(attributes), len(labels)))
        for (a, lab), w in info.state_features.items():
            state[ai[a], li[lab]] = w
        trans = np.zeros((len(labels), len(labels)))
        for (a, b), w in info.transitions.items():
            trans[li[a], li[b]] = w
        tagger.close()
        return cls(labels, attributes, state, trans)

    def info(self):
        """Describe the model as pycrfsuite's ``Tagger.info()`` does.

        Returns
        -------
        info : ModelInfo
            ``header`` (``size``, ``num_labels``, ``num_attrs``,
            ``num_features``), ``labels`` and ``attributes`` (name -> id),
            ``state_features``, ``transitions``.
        """
        return ModelInfo(
            header={"size": str(self.size), "num_labels": str(len(self.labels)),
                    "num_attrs": str(len(self.attributes)),
                    "num_features": str(self.state.nnz + np.count_nonzero(self.transitions))},
            labels={lab: str(i) for i, lab in enumerate(self.labels)},
            attributes={a: str(i) for i, a in enumerate(self.attributes)},
            state_features=self.state_features(),
            transitions=self.transition_features())

    @property
    def size(self):
        """The size of the model file, in bytes."""
        if self._size is None:
            self._size = len(self.to_bytes())
        return self._size

    # ---- pickling: the model file's bytes (deployment size) --------------------------
    def __reduce__(self):
        return (CRFModel.from_bytes, (self.to_bytes(),))


class Tagger:
    """The methods of pycrfsuite's ``Tagger`` on a `CRFModel`.

    ``tag``, ``set``, ``marginal``, ``probability``, ``labels`` and ``info``,
    as ``pycrfsuite.Tagger`` (``CRF.tagger_``).

    Parameters
    ----------
    model : CRFModel
        The model.
    """

    def __init__(self, model):
        self.model = model
        self._xseq = None
        self._marginals = None

    def labels(self):
        """Return the labels of the model, in CRFsuite's order.

        Returns
        -------
        labels : list of str
            The labels.
        """
        return list(self.model.labels)

    def set(self, xseq):
        """Set the sequence that ``tag()`` / ``marginal()`` / ``probability()`` read.

        Parameters
        ----------
        xseq : list
            One sequence of token features (pycrfsuite's forms).
        """
        self._xseq = xseq.items() if _is_item_sequence(xseq) else xseq
        self._marginals = None

    def _current(self, xseq):
        if xseq is not None:
            self.set(xseq)
        if self._xseq is None:
            raise ValueError("no sequence: pass xseq or call set(xseq) first")
        return self._xseq

    def tag(self, xseq=None):
        """Predict the labels of ``xseq`` (or of the sequence given to ``set``).

        Parameters
        ----------
        xseq : list, default=None
            One sequence of token features.

        Returns
        -------
        labels : list of str
            The Viterbi labels.
        """
        return self.model.tag([self._current(xseq)])[0]

    def probability(self, yseq):
        """Return ``p(yseq | x)`` for the sequence given to ``set``.

        Parameters
        ----------
        yseq : list of str
            A label per token.

        Returns
        -------
        p : float
            The probability of the label sequence.
        """
        return float(np.exp(self.model.log_probability(self._current(None), yseq)))

    def marginal(self, y, pos):
        """Return ``p(y_pos = y | x)`` for the sequence given to ``set``.

        Parameters
        ----------
        y : str
            A label.
        pos : int
            A token position.

        Returns
        -------
        p : float
            The marginal probability.
        """
        if self._marginals is None:
            self._marginals = self.model.marginals([self._current(None)])[0]
        try:
            j = self.model.labels.index(y)
        except ValueError:
            raise ValueError(f"{y!r} is not a label of the model") from None
        if not 0 <= pos < self._marginals.shape[0]:
            raise IndexError(f"position {pos} is out of range for a sequence of "
                             f"{self._marginals.shape[0]} tokens")
        return float(self._marginals[pos, j])

    def info(self):
        """Return the model's description (pycrfsuite's ``ParsedDump`` fields).

        Returns
        -------
        info : ModelInfo
            ``header``, ``labels``, ``attributes``, ``state_features``,
            ``transitions``.
        """
        return self.model.info()
