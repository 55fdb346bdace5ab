"""Sequence input: lists of sequences -> stacked CSR token rows + offsets.

The public input of the sequence taggers is sklearn-crfsuite's: ``X`` a list
of sequences (one entry per sequence, so ``KFold`` / ``GridSearchCV`` split by
sequence) and ``y`` a list of label lists. A sequence is

* a list of tokens in any form ``pycrfsuite.ItemSequence`` accepts, with
  CRFsuite's attribute names (``vectorize_dicts``): per-token feature dicts
  (``str -> float | int | bool | str | bytes | dict | list``; a string value
  ``v`` of key ``k`` is the one-hot attribute ``"k:v"``, a nested dict
  ``{"d": {"e": 1}}`` the attribute ``"d:e"``) or lists of attribute names
  (value 1 each; a bare str token is the list of its characters, as
  pycrfsuite reads it), or a ``pycrfsuite.ItemSequence``, or
* a 2-D array or sparse matrix of shape ``(n_tokens, n_features)``.

A plain 2-D array or sparse matrix ``X`` is read as independent one-token
sequences (the tagger is then a multinomial linear model).

Internally the tokens of all sequences are stacked into one CSR matrix and
``offsets`` gives the first row of each sequence (seqlearn's layout, kept
private: it is not sample-aligned).
"""
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from numbers import Number, Real

import numpy as np
import scipy.sparse as sp
from sklearn.utils import check_array
from sklearn.utils.multiclass import check_classification_targets

from .._compat import validate_data
from .._core._dataset import SequenceData
from .._core._vectorize import vectorize
from .._validation import check_label_types

KIND_DICTS = "dicts"
KIND_ARRAYS = "arrays"
KIND_FLAT = "flat"


def input_kind(X):
    """Classify ``X`` as ``'dicts'``, ``'arrays'`` (list of 2-D sequences) or ``'flat'``.

    Raises
    ------
    ValueError
        If ``X`` is an empty list or its first sequence is empty.
    TypeError
        If ``X`` is a single sequence of dicts rather than a list of them.
    """
    if sp.issparse(X):
        return KIND_FLAT
    if isinstance(X, np.ndarray) and not (X.dtype == object and X.ndim == 1):
        return KIND_FLAT
    if isinstance(X, Iterator):
        raise TypeError(f"X is a {type(X).__name__}: pass a list of sequences (e.g. list(X)).")
    if not isinstance(X, (list, tuple, np.ndarray)):
        return KIND_FLAT  # array-likes (DataFrame, ...) go through validate_data
    if len(X) == 0:
        raise ValueError("X is empty: expected a non-empty list of sequences.")
    first = X[0]
    if _is_item_sequence(first):
        return KIND_DICTS
    if sp.issparse(first) or (isinstance(first, np.ndarray) and first.ndim == 2):
        return KIND_ARRAYS
    if isinstance(first, Mapping):
        raise TypeError(
            "X looks like a single sequence of feature dicts; pass a list of "
            "sequences, e.g. X = [sequence]."
        )
    if isinstance(first, (str, bytes)):
        raise TypeError(f"sequence 0 of X is a {type(first).__name__}; expected a list of "
                        "token feature dicts (or a 2-D array per sequence).")
    if isinstance(first, (list, tuple)):
        if len(first) == 0:
            raise ValueError("sequence 0 of X is empty: every sequence needs at least one token.")
        if isinstance(first[0], (Mapping, list, tuple, set, frozenset, str)):
            # feature dicts, or tokens as lists of attribute names (a bare
            # str too: pycrfsuite reads it as the list of its characters)
            return KIND_DICTS
        if not isinstance(first[0], (Number, np.number, np.bool_)):
            raise TypeError(
                f"token 0 of sequence 0 is a {type(first[0]).__name__}; each token must be a "
                "dict of features (name -> value), or each sequence a 2-D array (a plain "
                "2-D array of numbers is read as one-token sequences).")
    return KIND_FLAT


#: CRFsuite's separator between a key and a string value or a nested key
#: (pycrfsuite's ``to_item``): ``{"w": "x"}`` is attribute ``w:x``.
SEP = ":"


def _name(key):
    if isinstance(key, str):
        return key
    if isinstance(key, bytes):
        return key.decode("utf-8")
    raise TypeError(f"feature name {key!r} is a {type(key).__name__}; feature names must "
                    "be str (or bytes).")


def _value(key, val):
    if isinstance(val, (Real, np.number)) and not isinstance(val, complex):
        return float(val)
    raise TypeError(
        f"feature {key!r} has a value of type {type(val).__name__}; values must be str, "
        "bytes, float, int, bool, a dict, or a list / set of str (pycrfsuite's forms).")


def _flat_item(tok, prefix=""):
    """One token in any of pycrfsuite's ``ItemSequence`` forms -> ``(name, value)`` pairs.

    As pycrfsuite's ``to_item``: a dict maps a name to a number (its value),
    a str / bytes (attribute ``name:value`` of value 1), or a nested dict /
    list / set (its attributes, prefixed ``name:``); a list / tuple / set of
    names is each name with value 1.
    """
    if isinstance(tok, Mapping):
        for key, val in tok.items():
            key = prefix + _name(key)
            if isinstance(val, str):
                yield key + SEP + val, 1.0
            elif isinstance(val, bytes):
                yield key + SEP + val.decode("utf-8"), 1.0
            elif isinstance(val, (Mapping, list, tuple, set, frozenset)):
                yield from _flat_item(val, key + SEP)
            else:
                yield key, _value(key, val)
    elif isinstance(tok, (list, tuple, set, frozenset)):
        for key in tok:
            yield prefix + _name(key), 1.0
    else:
        raise TypeError(f"a token is a {type(tok).__name__}; expected a dict of features "
                        "(name -> value) or a list of feature names.")


def _is_item_sequence(seq):
    """A ``pycrfsuite.ItemSequence`` (read through its ``items()``)."""
    return type(seq).__name__ == "ItemSequence" and hasattr(seq, "items")


def _str_tokens_as_lists(X):
    """``X`` with each bare str token replaced by the list of its characters.

    pycrfsuite (and so sklearn-crfsuite) iterates a token given as a str:
    ``[["John", "runs"]]`` has the attributes ``J``, ``o``, ``h``, ``n`` (value 1
    each) at token 0, not the attribute ``John``. The compiled loop takes
    lists; only the sequences holding a str token are copied (the scan is
    ``str in map(type, seq)``, a C loop).
    """
    out = None
    for i, seq in enumerate(X):
        if isinstance(seq, (list, tuple)) and str in map(type, seq):
            if out is None:
                out = list(X)
            out[i] = [list(tok) if type(tok) is str else tok for tok in seq]
    return X if out is None else out


def vectorize_dicts(X, vocabulary, grow):
    """Token features (pycrfsuite's forms) -> CSR arrays, growing ``vocabulary`` when ``grow``.

    Every form ``pycrfsuite.ItemSequence`` accepts, with CRFsuite's attribute
    names: a token is a dict (values str, bytes, int, float, bool, or nested
    dicts / lists / sets: ``{"d": {"e": 1}}`` is attribute ``d:e``, a str
    value ``{"w": "x"}`` is ``w:x`` with value 1) or a list of attribute
    names (value 1 each), a bare str being the list of its characters (as
    pycrfsuite iterates it); a sequence may be a ``pycrfsuite.ItemSequence``.

    Parameters
    ----------
    X : list of sequences
    vocabulary : dict
        Attribute name -> column; new attributes get the next columns when
        ``grow`` is True, and are ignored otherwise (unseen at prediction).
    grow : bool

    Returns
    -------
    data, indices, indptr, offsets : ndarray
        float64, int32, int64, int64.

    The loop is compiled (``_core/_vectorize.pyx``); the forms other than a
    dict of str / number values go through ``_flat_item``.
    """
    data, indices, indptr, offsets = vectorize(_str_tokens_as_lists(X), vocabulary, grow,
                                               _flat_item, _is_item_sequence, SEP)
    if not np.all(np.isfinite(data)):
        raise ValueError("X contains NaN or infinite feature values.")
    return data, indices, indptr, offsets


def stack_arrays(X, n_features=None):
    """A list of 2-D arrays / sparse matrices -> CSR arrays and offsets."""
    blocks = []
    offsets = [0]
    for si, seq in enumerate(X):
        if not (sp.issparse(seq) or isinstance(seq, np.ndarray)):
            raise TypeError(f"sequence {si} of X is a {type(seq).__name__}; expected all "
                            "sequences to be 2-D arrays or sparse matrices.")
        if seq.ndim != 2:
            raise ValueError(f"sequence {si} of X has {seq.ndim} dimensions; expected 2.")
        if seq.shape[0] == 0:
            raise ValueError(f"sequence {si} of X is empty: every sequence needs at least "
                             "one token.")
        seq = check_array(seq, accept_sparse="csr", dtype=np.float64)
        if n_features is None:
            n_features = seq.shape[1]
        elif seq.shape[1] != n_features:
            raise ValueError(f"sequence {si} of X has {seq.shape[1]} features, but "
                             f"{n_features} were expected.")
        blocks.append(sp.csr_matrix(seq))
        offsets.append(offsets[-1] + seq.shape[0])
    M = sp.vstack(blocks, format="csr")
    M.sum_duplicates()
    return csr_arrays(M) + (np.asarray(offsets, dtype=np.int64), n_features)


def csr_arrays(M):
    """``(data, indices, indptr)`` of a CSR matrix with the kernel's dtypes."""
    M = sp.csr_matrix(M)
    return (np.ascontiguousarray(M.data, dtype=np.float64),
            np.ascontiguousarray(M.indices, dtype=np.int32),
            np.ascontiguousarray(M.indptr, dtype=np.int64))


def flatten_labels(y, lengths):
    """Check ``y`` against the sequence lengths and flatten it.

    Raises
    ------
    ValueError
        If ``y`` is None, or has a different number of sequences than ``X``,
        or a sequence of ``y`` differs in length from its sequence of ``X``.
    """
    if y is None:
        raise ValueError("requires y to be passed, but the target y is None.")
    if isinstance(y, (str, bytes)) or not hasattr(y, "__len__"):
        raise TypeError("y must be a list of label sequences.")
    if len(y) != len(lengths):
        raise ValueError(f"X has {len(lengths)} sequences but y has {len(y)}.")
    flat = []
    for si, (seq, n) in enumerate(zip(y, lengths)):
        if isinstance(seq, (str, bytes)) or not hasattr(seq, "__len__"):
            raise TypeError(f"y[{si}] is a {type(seq).__name__}; expected a list of labels.")
        if len(seq) != n:
            raise ValueError(f"sequence {si} has {n} tokens in X but {len(seq)} labels in y.")
        flat.extend(seq)
    if len({isinstance(v, str) for v in flat}) > 1:
        raise ValueError("y mixes string labels with labels of other types "
                         f"(e.g. {next(v for v in flat if not isinstance(v, str))!r} and "
                         f"{next(v for v in flat if isinstance(v, str))!r}).")
    return np.asarray(flat)


@dataclass
class SequenceBatch:
    """Sequences stacked as one CSR matrix of token rows plus offsets.

    Attributes
    ----------
    data, indices, indptr : ndarray
        The CSR arrays of the ``(n_tokens, n_features)`` token matrix
        (float64, int32, int64).
    offsets : int64 ndarray of shape (n_sequences + 1,)
        Sequence ``s`` holds token rows ``offsets[s]:offsets[s + 1]``.
    labels : ndarray of shape (n_tokens,) or None
        The label of every token (training only).
    n_features : int
    kind : {'dicts', 'arrays', 'flat'}
        The input form (``input_kind``).
    """

    data: np.ndarray
    indices: np.ndarray
    indptr: np.ndarray
    offsets: np.ndarray
    labels: object
    n_features: int
    kind: str

    @property
    def n_sequences(self):
        return self.offsets.size - 1

    @property
    def n_tokens(self):
        return self.indptr.size - 1

    def sequence_data(self, n_attributes, label_idx=None):
        """The kernels' ``SequenceData`` (label indices for training)."""
        return SequenceData(self.data, self.indices, self.indptr, self.offsets, label_idx,
                            n_attributes)

    def tokens(self):
        """The token matrix, CSR (its arrays shared), as many columns as used."""
        n_columns = int(self.indices.max(initial=-1)) + 1
        return sp.csr_matrix((self.data, self.indices, self.indptr),
                             shape=(self.n_tokens, n_columns))

    def with_tokens(self, M):
        """The same sequences with the token matrix ``M`` (the same rows)."""
        data, indices, indptr = csr_arrays(M)
        return SequenceBatch(data, indices, indptr, self.offsets, self.labels, self.n_features,
                             self.kind)

    def sample(self, rows, label_idx):
        """The sequences ``rows`` (and their tokens' ``label_idx``) as a new batch
        and label array."""
        rows = np.asarray(rows)
        starts, ends = self.offsets[rows], self.offsets[rows + 1]
        tok = np.concatenate([np.arange(a, b) for a, b in zip(starts, ends)])
        data, indices, indptr = csr_arrays(self.tokens()[tok])
        offsets = np.concatenate(([0], np.cumsum(ends - starts))).astype(np.int64)
        return (SequenceBatch(data, indices, indptr, offsets, None, self.n_features, self.kind),
                label_idx[tok])


def read_sequences(est, X, y=None, *, fitting=False, first=False):
    """``X`` (and ``y``) as a ``SequenceBatch``, with ``est``'s input checks.

    ``fitting`` grows the vocabulary (``est.vocabulary_``); ``first`` resets
    the input kind and the feature checks (``fit`` and the first
    ``partial_fit``).
    """
    kind = input_kind(X)
    if first:
        for attr in ("n_features_in_", "feature_names_in_", "vocabulary_"):
            if hasattr(est, attr):
                delattr(est, attr)
        est._kind = kind
    elif (kind == KIND_DICTS) != (est._kind == KIND_DICTS):
        raise ValueError(
            f"the model was fitted on {est._kind!r} input but X is {kind!r}: numeric "
            "arrays and feature dicts cannot be mixed.")
    labels = None
    if kind == KIND_FLAT:
        if fitting:
            check_label_types(y, "y")
            X, yy = validate_data(est, X, y, accept_sparse="csr", dtype=np.float64,
                                  reset=first)
            check_classification_targets(yy)
            labels = np.asarray(yy)
        else:
            X = validate_data(est, X, accept_sparse="csr", dtype=np.float64, reset=False)
        data, indices, indptr = csr_arrays(X)
        offsets = np.arange(X.shape[0] + 1, dtype=np.int64)
        n_features = X.shape[1]
    elif kind == KIND_ARRAYS:
        expected = None if first else getattr(est, "n_features_in_", None)
        data, indices, indptr, offsets, n_features = stack_arrays(X, expected)
        if first:
            est.n_features_in_ = n_features
    else:
        if first:
            est.vocabulary_ = {}
        data, indices, indptr, offsets = vectorize_dicts(X, est.vocabulary_, grow=fitting)
        n_features = len(est.vocabulary_)
    if fitting and kind != KIND_FLAT:
        labels = flatten_labels(y, np.diff(offsets))
        check_classification_targets(labels)
    return SequenceBatch(data, indices, indptr, offsets, labels, n_features, kind)
