"""The training log of `CRF`: one record per pass (pycrfsuite's
``TrainLogParser`` fields), CRFsuite's holdout evaluation of a dev set, and the
verbose line of a pass."""
import sys
from collections import namedtuple
from fractions import Fraction

import numpy as np

from ..sequence import sequence_batch, viterbi_labels
from ..sequence._input import flatten_labels, vectorize_dicts


class TrainingLog:
    """The training log: one record per pass (pycrfsuite's ``TrainLogParser`` fields).

    Attributes
    ----------
    iterations : list of dict
        One dict per pass with pycrfsuite's keys: ``num`` (the pass),
        ``loss`` (CRFsuite's objective ``-sum log p + c1 ||w||_1 + c2
        ||w||^2``, the log-likelihood summed over the pass at the weights each
        sequence met, the penalty at the end of the pass), ``active_features``
        (non-zero weights), ``feature_norm`` (``||w||_2``), ``time`` (seconds
        of the pass), and with a dev set ``scores`` (``{label: LabelScore}``),
        ``avg_precision``, ``avg_recall``, ``avg_f1`` (macro averages over the
        labels, as CRFsuite's holdout evaluation), ``item_accuracy`` /
        ``item_accuracy_float`` (tokens), ``instance_accuracy`` /
        ``instance_accuracy_float`` (whole sequences); ``scores`` is empty
        without a dev set.
    """

    def __init__(self):
        self.iterations = []

    @property
    def last_iteration(self):
        """The last pass's record (None before any)."""
        return self.iterations[-1] if self.iterations else None

    def __len__(self):
        return len(self.iterations)

    def __iter__(self):
        return iter(self.iterations)

    def __getitem__(self, i):
        return self.iterations[i]

    def __repr__(self):
        return f"<TrainingLog of {len(self.iterations)} passes>"


#: pycrfsuite's per-label holdout score (``pycrfsuite._logparser.LabelScore``).
LabelScore = namedtuple("LabelScore", "match model ref precision recall f1")


def holdout_evaluation(gold, pred, offsets, labels):
    """Per-label and average scores of a dev set, as CRFsuite's trainer logs them.

    Parameters
    ----------
    gold, pred : ndarray of int
        Label indices of every dev token (``gold`` -1 for a label the model
        does not know).
    offsets : ndarray of int
        Sequence boundaries.
    labels : list of str
        The label names.

    Returns
    -------
    record : dict
        ``scores``, ``avg_precision``, ``avg_recall``, ``avg_f1``,
        ``item_accuracy`` (a Fraction), ``item_accuracy_float``,
        ``instance_accuracy``, ``instance_accuracy_float``.
    """
    L = len(labels)
    ok = gold == pred
    match = np.bincount(gold[ok], minlength=L)
    model = np.bincount(pred, minlength=L)
    ref = np.bincount(gold[gold >= 0], minlength=L)     # (-1: a label unknown to the model)
    scores, sums = {}, np.zeros(3)
    for i, lab in enumerate(labels):
        if ref[i] == 0 and model[i] == 0:
            scores[lab] = LabelScore(0, 0, 0, None, None, None)
            continue
        p = match[i] / model[i] if model[i] else 0.0
        r = match[i] / ref[i] if ref[i] else 0.0
        f = 2 * p * r / (p + r) if p + r > 0 else 0.0
        scores[lab] = LabelScore(int(match[i]), int(model[i]), int(ref[i]), p, r, f)
        sums += (p, r, f)
    seq_ok = np.logical_and.reduceat(ok, offsets[:-1]) if ok.size else np.zeros(0, bool)
    item = Fraction(int(ok.sum()), max(int(ok.size), 1))
    inst = Fraction(int(seq_ok.sum()), max(int(seq_ok.size), 1))
    avg = sums / max(L, 1)
    return {"scores": scores, "avg_precision": float(avg[0]), "avg_recall": float(avg[1]),
            "avg_f1": float(avg[2]), "item_accuracy": item, "item_accuracy_float": float(item),
            "instance_accuracy": inst, "instance_accuracy_float": float(inst)}


def dev_set(X_dev, y_dev, vocabulary, classes, n_features):
    """The dev set vectorised with the training vocabulary: ``(batch, gold,
    offsets)``, the batch from ``sequence_batch`` and ``gold`` the label
    indices (-1: a label the model does not know)."""
    data, indices, indptr, offsets = vectorize_dicts(X_dev, vocabulary, False)
    gold = flatten_labels(y_dev, np.diff(offsets))
    known = np.isin(gold, classes)
    gold_idx = np.where(known, np.searchsorted(classes, gold).clip(0, classes.size - 1),
                        -1)
    return (sequence_batch(data, indices, indptr, offsets, n_features),
            gold_idx, offsets)


def pass_recorder(log, dev, classes, n, regularized, c1, c2, verbose):
    """The per-pass callback of a fit: appends the pass's record to ``log``
    (the loss on CRFsuite's scale, the weights' size, the dev set's holdout
    evaluation), prints it when ``verbose``; never stops the training."""
    names = classes.tolist()

    def on_pass(t):
        w = t.flat_weights_
        losses = getattr(t, "loss_", None)      # (a trainer's own, CRFsuite's scale)
        pass_losses = t.pass_losses_
        if losses:
            loss = losses[-1]
        elif pass_losses:
            loss = pass_losses[-1] * n + (
                c1 * np.abs(w).sum() + c2 * w @ w if regularized else 0.0)
        else:
            loss = np.nan
        rec = {"num": len(log.iterations) + 1, "loss": float(loss),
               "active_features": int(np.count_nonzero(w)),
               "feature_norm": float(np.sqrt(w @ w)),
               # (the kernel's seconds since the last record: one pass, or all)
               "time": float(sum(t.pass_seconds_) - sum(r["time"] for r in log)),
               "scores": {}}
        if dev is not None:
            ds, gold_idx, offsets = dev
            pred = viterbi_labels(ds, w, classes.size)
            rec.update(holdout_evaluation(gold_idx, pred, offsets, names))
        log.iterations.append(rec)
        if verbose:
            print_pass(rec)
        return False

    return on_pass


def print_pass(rec):
    """Print a pass's record as CRFsuite's trainer does (``verbose``)."""
    parts = [f"Iter {rec['num']:<3} time={rec['time']:<5.2f} loss={rec['loss']:<8.2f} "
             f"active={rec['active_features']:<5}"]
    if "avg_f1" in rec:
        parts.append(f"precision={rec['avg_precision']:0.3f}  "
                     f"recall={rec['avg_recall']:0.3f}  F1={rec['avg_f1']:0.3f}  "
                     f"Acc(item/seq)={rec['item_accuracy_float']:0.3f} "
                     f"{rec['instance_accuracy_float']:0.3f}")
    parts.append(f"feature_norm={rec['feature_norm']:<8.2f}")
    print(" ".join(parts).strip(), file=sys.stdout, flush=True)
