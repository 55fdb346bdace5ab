"""What travels between the client and the workers, and the worker-side functions.

Models are slimmed before they travel and rehydrated after; a worker's
partitions are joined (taggers: vectorised with the shared vocabulary)
once per fit; each pass, summary, balancing move and score count is a
plain function run where the partitions are.
"""
import copy
import time
import warnings

import numpy as np
import scipy.sparse as sp
from sklearn.base import is_regressor

from ..sequence._input import (
    KIND_DICTS,
    SequenceBatch,
    flatten_labels,
    input_kind,
    stack_arrays,
    vectorize_dicts,
)


# ---- what travels ---------------------------------------------------------------------
def _slim(model):
    """Drop, in place, what need not travel: the exported arrays (a pass
    recomputes them) and the taggers' vocabulary (the client keeps it; the
    workers' data is vectorised)."""
    model.drop_exported_arrays()
    vars(model).pop("vocabulary_", None)
    return model


def _rehydrate(model, export):
    """Undo ``_slim``: (``export``) the exports."""
    if export:
        model.rebuild_exported_arrays()
    return model


# ---- worker-side functions (they run where the partitions are) ----------------------
def _bundle(*parts):
    """One partition: ``(X, y[, sample_weight])`` (linear) or a list of pairs (bag)."""
    return parts if len(parts) > 1 else parts[0]


def _concat_rows(blocks):
    first = blocks[0]
    if len(blocks) == 1:
        return first
    if sp.issparse(first):
        return sp.vstack(blocks, format="csr")
    if hasattr(first, "iloc"):  # pandas
        import pandas as pd
        return pd.concat(blocks)
    return np.concatenate([np.asarray(b) for b in blocks])


def _linear_batch(parts):
    """A worker's partitions as one ``(X, y, sample_weight)``."""
    X = _concat_rows([pt[0] for pt in parts])
    y = np.concatenate([np.asarray(pt[1]).ravel() for pt in parts])
    sw = (np.concatenate([np.asarray(pt[2]).ravel() for pt in parts])
          if len(parts[0]) > 2 else None)
    if sp.issparse(X):
        X = sp.csr_matrix(X)
    return X, y, sw


def _tagger_batch(parts):
    pairs = [pair for part in parts for pair in part]
    return [s for s, _ in pairs], [list(lab) for _, lab in pairs]


def _n_rows(part):
    if isinstance(part, tuple):
        return int(part[0].shape[0])
    return len(part)


def _join(parts, tagger, classes, kind, vocabulary):
    """A worker's partitions joined once per fit, in the form its passes read:
    ``(X, y, sample_weight)`` for linear models; for taggers the
    ``SequenceBatch`` the tagger's ``partial_fit`` would build, vectorised with
    the shared vocabulary (so the feature dicts are read once, not every pass)."""
    if not tagger:
        return _linear_batch(parts)
    X, y = _tagger_batch(parts)
    if kind == KIND_DICTS:
        data, indices, indptr, offsets = vectorize_dicts(X, vocabulary, grow=False)
        n_features = len(vocabulary)
    else:
        data, indices, indptr, offsets, n_features = stack_arrays(X, vocabulary)
    labels = flatten_labels(y, np.diff(offsets))
    unseen = np.setdiff1d(np.unique(labels), classes) if classes is not None else ()
    if unseen.size:
        raise ValueError(f"y contains labels not in classes {classes!r}: {unseen[:5]!r}")
    return SequenceBatch(data, indices, indptr, offsets, labels, n_features, kind)


def _worker_pass(model, classes, tagger, batch, slim):
    """One pass of ``model`` over a worker's joined partitions (one
    ``partial_fit``, so the worker's rows are shuffled together as one machine's
    pass would; for taggers ``partial_fit_batch``, on the batch vectorised
    once). Returns the model (``_slim`` when it is to be mixed), the rows, and
    the seconds the pass took on the worker."""
    tic, cpu = time.perf_counter(), time.process_time()
    # (a copy: the scattered start must not change under the worker's task)
    model = _rehydrate(copy.deepcopy(model), export=False)
    with warnings.catch_warnings():
        # a worker's share is not the data the estimator's weight-scale check is about
        warnings.filterwarnings("ignore", message=".*implausibl", category=UserWarning)
        if tagger:
            model.partial_fit_batch(batch, n_passes=1)
            n = batch.n_sequences
        else:
            X, y, sw = batch
            if is_regressor(model):     # (started: start_model)
                model.partial_fit(X, y, sample_weight=sw)
            else:
                first = not hasattr(model, "classes_")
                model.partial_fit(X, y, classes=classes if first else None,
                                  sample_weight=sw)
            n = X.shape[0]
    return ((_slim(model) if slim else model), n, time.perf_counter() - tic,
            time.process_time() - cpu)


def _summary(part, tagger):
    """What the client needs of a partition (never the rows): its length, and for
    bags the labels and the attributes in order of first appearance."""
    if not tagger:
        return {"n": _n_rows(part)}
    sentences, labels, attrs, kind, n_features = [], set(), {}, None, None
    for sentence, labs in part:
        labels.update(labs)
        sentences.append(sentence)
    if sentences:
        kind = input_kind(sentences)
        if kind == KIND_DICTS:
            # the taggers' own reading (every pycrfsuite form, CRFsuite's
            # names), so the columns are those of a plain fit
            vectorize_dicts(sentences, attrs, grow=True)
        else:
            n_features = int(np.shape(sentences[0])[1])
    return {"n": len(part), "labels": labels, "attrs": list(attrs), "kind": kind,
            "n_features": n_features}


def _identity(part):
    return part


def _balance(place, rows, workers):
    """Partitions to move so that every worker trains on about the same rows:
    ``{partition: new worker}``. The scheduler placed the partitions where it
    computed them (all on one worker, for instance, when they are small); each
    move takes the partition of the most loaded worker that best halves the gap
    to the least loaded one, while moving it narrows that gap."""
    load = {w: 0 for w in workers}
    held = {w: [] for w in workers}
    for i, w in place.items():
        load[w] = load.get(w, 0) + rows[i]
        held.setdefault(w, []).append(i)
    moves = {}
    for _ in range(len(place)):
        hi = max(load, key=load.get)
        lo = min(load, key=load.get)
        gap = load[hi] - load[lo]
        fits = [i for i in held[hi] if rows[i] < gap]
        if not fits:
            break
        i = min(fits, key=lambda i: (abs(gap - 2 * rows[i]), i))
        held[hi].remove(i)
        held[lo].append(i)
        load[hi] -= rows[i]
        load[lo] += rows[i]
        moves[i] = lo
    return {i: w for i, w in moves.items() if w != place[i]}


def _linear_labels(part):
    return np.unique(np.asarray(part[1]).ravel())


# ---- scores counted on the workers ------------------------------------------------
def _linear_counts(est, part):
    X, y = part[0], np.asarray(part[1]).ravel()
    return float(np.sum(est.predict(X) == y)), float(y.size)


def _tagger_counts(est, part):
    X, y = _tagger_batch([list(part)])
    pred = est.predict(X)
    hits = sum(int(a == b) for p, t in zip(pred, y) for a, b in zip(p, t))
    return hits, sum(len(t) for t in y)
