"""Metrics for sequence tagging: conlleval chunk scores, token and sequence accuracy.

``y_true`` and ``y_pred`` are lists of label sequences (what the taggers'
``predict`` returns for a list of sequences). The chunk-level scores follow
the rules of the CoNLL shared-task script ``conlleval`` (``startOfChunk`` /
``endOfChunk``, transcribed from the Perl): a tag such as ``B-NP`` is split at
the first ``-`` into a prefix (``B``, ``I``, ``O``, ``E``, ``[``, ``]``) and a
chunk type; an ``I-X`` after ``O`` or after a different type starts a chunk,
and a chunk ends before a ``B``/``O`` or a change of type. These rules read
IOB1 (``B-`` only between two adjacent chunks of one type) and IOB2 (every
chunk starts with ``B-``) alike, with no scheme argument. A predicted chunk is
correct when a gold chunk has the same type, start and end. Every sequence is
closed at its end (conlleval treats the blank line between sentences the same
way).

The flat metrics are ``sklearn_crfsuite.metrics``' (same names, arguments and
results): the label sequences are flattened and scikit-learn's metric is
applied to the tokens; ``sequence_accuracy_score`` is 0 for no sequences, as
there.

Scorers for ``GridSearchCV`` / ``cross_val_score`` are provided:
``chunk_f1_scorer``, ``flat_accuracy_scorer``, ``sequence_accuracy_scorer``.
"""
from collections import Counter

import numpy as np
from sklearn import metrics as _skm
from sklearn.metrics import make_scorer

__all__ = [
    "extract_chunks",
    "chunk_precision_recall_fscore",
    "chunk_precision_score",
    "chunk_recall_score",
    "chunk_f1_score",
    "flat_accuracy_score",
    "flat_precision_score",
    "flat_recall_score",
    "flat_f1_score",
    "flat_fbeta_score",
    "flat_classification_report",
    "sequence_accuracy_score",
    "chunk_f1_scorer",
    "flat_accuracy_scorer",
    "sequence_accuracy_scorer",
]


def _split_tag(tag):
    """``'B-NP' -> ('B', 'NP')``, ``'O' -> ('O', '')`` (conlleval's regex ``^([^-]*)-(.*)$``)."""
    tag = str(tag)
    head, sep, tail = tag.partition("-")
    if sep:
        return head, tail
    return tag, ""


def _end_of_chunk(prev_tag, tag, prev_type, type_):
    """conlleval ``endOfChunk``: does a chunk end between the previous and this token?"""
    if prev_tag in ("B", "I") and tag in ("B", "O"):
        return True
    if prev_tag == "E" and tag in ("E", "I", "O"):
        return True
    if prev_tag not in ("O", ".") and prev_type != type_:
        return True
    return prev_tag in ("[", "]")


def _start_of_chunk(prev_tag, tag, prev_type, type_):
    """conlleval ``startOfChunk``: does a chunk start at this token?"""
    if prev_tag in ("B", "I", "O") and tag == "B":
        return True
    if prev_tag in ("O", "E") and tag in ("E", "I"):
        return True
    if tag not in ("O", ".") and prev_type != type_:
        return True
    return tag in ("[", "]")


def extract_chunks(seq):
    """Extract the chunks of one tag sequence (conlleval's rules).

    Parameters
    ----------
    seq : sequence of str
        Tags such as ``['B-NP', 'I-NP', 'O', 'I-VP']``.

    Returns
    -------
    chunks : list of tuple
        One ``(type, start, end)`` per chunk, in order, with ``end``
        exclusive.
    """
    chunks = []
    prev_tag, prev_type = "O", ""
    start = None
    for i, t in enumerate(seq):
        tag, type_ = _split_tag(t)
        if start is not None and _end_of_chunk(prev_tag, tag, prev_type, type_):
            chunks.append((prev_type, start, i))
            start = None
        if _start_of_chunk(prev_tag, tag, prev_type, type_):
            start = i
        prev_tag, prev_type = tag, type_
    # the sentence boundary is read as an "O" tag, as conlleval does
    if start is not None and _end_of_chunk(prev_tag, "O", prev_type, ""):
        chunks.append((prev_type, start, len(seq)))
    return chunks


def _as_sequences(y):
    if isinstance(y, np.ndarray) and y.dtype != object:
        return [y.tolist()] if y.ndim == 1 else [list(r) for r in y]
    y = list(y)
    if y and isinstance(y[0], (str, bytes)):
        return [y]
    return [list(s) for s in y]


def _check_pair(y_true, y_pred):
    y_true, y_pred = _as_sequences(y_true), _as_sequences(y_pred)
    if len(y_true) != len(y_pred):
        raise ValueError(f"y_true has {len(y_true)} sequences but y_pred has {len(y_pred)}.")
    for i, (a, b) in enumerate(zip(y_true, y_pred)):
        if len(a) != len(b):
            raise ValueError(f"sequence {i}: y_true has {len(a)} labels, y_pred {len(b)}.")
    return y_true, y_pred


def chunk_precision_recall_fscore(y_true, y_pred, *, per_type=False):
    """Chunk-level precision, recall and F1 (conlleval's rules).

    Parameters
    ----------
    y_true : list of list of str
        The gold label sequences (a single sequence of labels is also accepted).
    y_pred : list of list of str
        The predicted label sequences, of the same lengths as ``y_true``.
    per_type : bool, default=False
        Also return ``{type: (precision, recall, f1, support)}``.

    Returns
    -------
    precision : float
        Correct chunks over predicted chunks, in [0, 1] (conlleval prints
        it as a percentage); 0 when nothing is predicted.
    recall : float
        Correct chunks over gold chunks, in [0, 1]; 0 when there are none.
    f1 : float
        The harmonic mean of precision and recall; 0 when both are 0.
    by_type : dict
        ``{type: (precision, recall, f1, support)}`` with ``support`` the
        number of gold chunks of the type; only when ``per_type`` is True.
    """
    y_true, y_pred = _check_pair(y_true, y_pred)
    n_true = Counter()
    n_pred = Counter()
    n_ok = Counter()
    for a, b in zip(y_true, y_pred):
        ca, cb = extract_chunks(a), extract_chunks(b)
        n_true.update(c[0] for c in ca)
        n_pred.update(c[0] for c in cb)
        n_ok.update(c[0] for c in set(ca) & set(cb))

    def prf(ok, n_p, n_t):
        p = ok / n_p if n_p else 0.0
        r = ok / n_t if n_t else 0.0
        f = 2 * p * r / (p + r) if p + r > 0 else 0.0
        return p, r, f

    p, r, f = prf(sum(n_ok.values()), sum(n_pred.values()), sum(n_true.values()))
    if not per_type:
        return p, r, f
    types = sorted(set(n_true) | set(n_pred))
    return p, r, f, {t: prf(n_ok[t], n_pred[t], n_true[t]) + (n_true[t],) for t in types}


def chunk_precision_score(y_true, y_pred):
    """Compute the chunk-level precision (conlleval).

    Parameters
    ----------
    y_true : list of list of str
        The gold label sequences (a single sequence of labels is also accepted).
    y_pred : list of list of str
        The predicted label sequences, of the same lengths as ``y_true``.

    Returns
    -------
    precision : float
        Correct chunks over predicted chunks, in [0, 1]; 0 when nothing is
        predicted.
    """
    return chunk_precision_recall_fscore(y_true, y_pred)[0]


def chunk_recall_score(y_true, y_pred):
    """Compute the chunk-level recall (conlleval).

    Parameters
    ----------
    y_true : list of list of str
        The gold label sequences (a single sequence of labels is also accepted).
    y_pred : list of list of str
        The predicted label sequences, of the same lengths as ``y_true``.

    Returns
    -------
    recall : float
        Correct chunks over gold chunks, in [0, 1]; 0 when there are none.
    """
    return chunk_precision_recall_fscore(y_true, y_pred)[1]


def chunk_f1_score(y_true, y_pred):
    """Compute the chunk-level F1 (conlleval's ``FB1``, as a fraction).

    Parameters
    ----------
    y_true : list of list of str
        The gold label sequences (a single sequence of labels is also accepted).
    y_pred : list of list of str
        The predicted label sequences, of the same lengths as ``y_true``.

    Returns
    -------
    f1 : float
        The harmonic mean of chunk precision and recall, in [0, 1]; 0 when
        both are 0.
    """
    return chunk_precision_recall_fscore(y_true, y_pred)[2]


def _flat_pair(y_true, y_pred):
    y_true, y_pred = _check_pair(y_true, y_pred)
    return [x for s in y_true for x in s], [x for s in y_pred for x in s]


def flat_accuracy_score(y_true, y_pred):
    """Compute the token accuracy over all tokens of all sequences.

    As ``sklearn_crfsuite.metrics.flat_accuracy_score``: scikit-learn's
    ``accuracy_score`` on the flattened labels.

    Parameters
    ----------
    y_true : list of list of str
        The gold label sequences (a single sequence of labels is also accepted).
    y_pred : list of list of str
        The predicted label sequences, of the same lengths as ``y_true``.

    Returns
    -------
    accuracy : float
        The fraction of tokens whose predicted label is the gold one.
    """
    a, b = _flat_pair(y_true, y_pred)
    if not a:
        raise ValueError("no tokens to score")
    return float(_skm.accuracy_score(a, b))


def flat_precision_score(y_true, y_pred, **kwargs):
    """Compute the precision over all tokens (``sklearn.metrics.precision_score``).

    Parameters
    ----------
    y_true : list of list of str
        The gold label sequences.
    y_pred : list of list of str
        The predicted label sequences, of the same lengths as ``y_true``.
    **kwargs : dict
        Passed to ``sklearn.metrics.precision_score`` (``labels``,
        ``average``, ``zero_division``, ...).

    Returns
    -------
    precision : float or ndarray
        As ``sklearn.metrics.precision_score`` on the flattened labels.
    """
    return _skm.precision_score(*_flat_pair(y_true, y_pred), **kwargs)


def flat_recall_score(y_true, y_pred, **kwargs):
    """Compute the recall over all tokens (``sklearn.metrics.recall_score``).

    Parameters
    ----------
    y_true : list of list of str
        The gold label sequences.
    y_pred : list of list of str
        The predicted label sequences, of the same lengths as ``y_true``.
    **kwargs : dict
        Passed to ``sklearn.metrics.recall_score``.

    Returns
    -------
    recall : float or ndarray
        As ``sklearn.metrics.recall_score`` on the flattened labels.
    """
    return _skm.recall_score(*_flat_pair(y_true, y_pred), **kwargs)


def flat_f1_score(y_true, y_pred, **kwargs):
    """Compute the F1 score over all tokens (``sklearn.metrics.f1_score``).

    Parameters
    ----------
    y_true : list of list of str
        The gold label sequences.
    y_pred : list of list of str
        The predicted label sequences, of the same lengths as ``y_true``.
    **kwargs : dict
        Passed to ``sklearn.metrics.f1_score`` (the sklearn-crfsuite tutorial
        uses ``average='weighted', labels=labels``).

    Returns
    -------
    f1 : float or ndarray
        As ``sklearn.metrics.f1_score`` on the flattened labels.
    """
    return _skm.f1_score(*_flat_pair(y_true, y_pred), **kwargs)


def flat_fbeta_score(y_true, y_pred, beta, **kwargs):
    """Compute the F-beta score over all tokens (``sklearn.metrics.fbeta_score``).

    Parameters
    ----------
    y_true : list of list of str
        The gold label sequences.
    y_pred : list of list of str
        The predicted label sequences, of the same lengths as ``y_true``.
    beta : float
        The weight of recall.
    **kwargs : dict
        Passed to ``sklearn.metrics.fbeta_score``.

    Returns
    -------
    fbeta : float or ndarray
        As ``sklearn.metrics.fbeta_score`` on the flattened labels.
    """
    return _skm.fbeta_score(*_flat_pair(y_true, y_pred), beta=beta, **kwargs)


def flat_classification_report(y_true, y_pred, labels=None, **kwargs):
    """Build the per-label report over all tokens (``sklearn.metrics.classification_report``).

    Parameters
    ----------
    y_true : list of list of str
        The gold label sequences.
    y_pred : list of list of str
        The predicted label sequences, of the same lengths as ``y_true``.
    labels : list of str, default=None
        The labels to report (all by default).
    **kwargs : dict
        Passed to ``sklearn.metrics.classification_report`` (``digits``,
        ``output_dict``, ...).

    Returns
    -------
    report : str or dict
        As ``sklearn.metrics.classification_report`` on the flattened labels.
    """
    return _skm.classification_report(*_flat_pair(y_true, y_pred), labels=labels, **kwargs)


def sequence_accuracy_score(y_true, y_pred):
    """Compute the fraction of sequences whose labels are all correct.

    As ``sklearn_crfsuite.metrics.sequence_accuracy_score``, 0 for no
    sequences, and a predicted sequence of another length than its gold one
    is simply wrong; unlike it, sequences of equal lengths are still
    compared whole (sklearn-crfsuite compares them token by token when
    every sequence has the same length, and can return more than 1).

    Parameters
    ----------
    y_true : list of list of str
        The gold label sequences (a single sequence of labels is also accepted).
    y_pred : list of list of str
        The predicted label sequences, as many as in ``y_true``.

    Returns
    -------
    accuracy : float
        The fraction of sequences predicted without a single error.
    """
    y_true, y_pred = _as_sequences(y_true), _as_sequences(y_pred)
    if len(y_true) != len(y_pred):
        raise ValueError(f"y_true has {len(y_true)} sequences but y_pred has {len(y_pred)}.")
    if not y_true:
        return 0.0
    return float(np.mean([list(a) == list(b) for a, b in zip(y_true, y_pred)]))


#: Scorers for ``GridSearchCV`` / ``cross_val_score`` (``scoring=chunk_f1_scorer``):
#: ``make_scorer`` of the metric of the same name; greater is better.
chunk_f1_scorer = make_scorer(chunk_f1_score)
flat_accuracy_scorer = make_scorer(flat_accuracy_score)
sequence_accuracy_scorer = make_scorer(sequence_accuracy_score)
