"""The commands that use a saved model: ``skso predict``, ``evaluate`` and ``info``.

Each reads a model file (``_model``); ``predict`` and ``evaluate`` stream a
data file in chunks through the estimator's ``predict`` /
``predict_proba`` / ``predict_marginals`` with the featurizer the model
records. ``predict`` writes its output file in full or not at all. A
regressor's predictions are its values; its figures RMSE, MAE and R^2
(``RegressionFigures``).
"""
import json
import os

import numpy as np
import scipy.sparse as sp

from .._text import scan_svmlight
from ..metrics import extract_chunks
from ._deployed import CompactTagger
from ._featurizers import featurizer_from_dict
from ._files import DataError, describe_format, detect_format
from ._model import DEPLOYMENT, TRAINING_STATE, create_beside, jsonable, load_model
from ._parser import EXIT_OK, UsageError, check_input_path
from ._progress import chunk_scores, has_proba, regression_loss_name, regression_losses
from ._stream import iter_chunks


def _load(path):
    check_input_path(path, "model file")
    return load_model(path)


def _check_data(path):
    check_input_path(path)


def _holds(fmt):
    return "CoNLL sentences" if fmt == "conll" else f"{describe_format(fmt)} rows"


def check_model_data(model, path):
    """Refuse a data file in another format than the model's, before reading it.

    The file's format is detected from its first lines; when no format fits
    them, the model's own parser reads the file and names the bad line.

    Raises
    ------
    DataError
        If the file's format is not the one the model reads (rows against a
        tagger, sentences against a linear model, svmlight against VW).
    """
    fmt = model.header["featurizer"]["format"]
    try:
        found = detect_format(path)
    except DataError:
        return
    if found != fmt:
        what = ("a sequence tagger" if fmt == "conll" else
                "a linear regressor" if model.header.get("kind") == "regressor" else
                "a linear model")
        raise DataError(f"{path}: the file holds {_holds(found)}, but the model "
                        f"({model.header['estimator']}, {what}) reads {_holds(fmt)}")


class FeatureRange:
    """svmlight: refuse feature indices beyond the model's columns (a file
    in another feature space would otherwise be scored without them,
    silently).

    Parameters
    ----------
    featurizer : object
        The model's featurizer.
    ignore : bool
        ``--ignore-unseen-features``: no check.
    """

    def __init__(self, featurizer, ignore=False):
        self.on = featurizer.format == "svmlight" and not ignore
        if self.on:
            self.n_features, self.zero_based = featurizer.n_features, featurizer.zero_based
            self.last = self.n_features - 1 if self.zero_based else self.n_features

    def check(self, block):
        """Raise a ``DataError`` naming the first line of ``block`` with an
        index beyond the model's."""
        if not self.on or scan_svmlight(block.data, block.first_line, True)[2] <= self.last:
            return
        for k, line in enumerate(block.data.split(b"\n")):
            hi = scan_svmlight(line + b"\n", 1, True)[2] if line.strip() else -1
            if hi > self.last:
                first = 0 if self.zero_based else 1
                raise DataError(
                    f"{block.path}, line {block.first_line + k}: feature index {hi} is beyond "
                    f"the model's {self.n_features} features (indices {first} to "
                    f"{self.last}): the file is not in the model's feature space; pass "
                    "--ignore-unseen-features to score its rows without those features")


def format_label(v):
    """A label as predict prints it (integral floats without '.0')."""
    if isinstance(v, (float, np.floating)) and float(v).is_integer():
        return str(int(v))
    if isinstance(v, (float, np.floating)):
        return repr(float(v))
    return str(v)


class _AtomicOutput:
    """Standard output, or a file written in full or not at all."""

    def __init__(self, path, stdout):
        self.path = path
        self.tmp = None
        if path is None:
            self.f = stdout
        else:
            fd, self.tmp = create_beside(path)
            self.f = os.fdopen(fd, "w", encoding="utf-8")

    def __enter__(self):
        return self.f

    def __exit__(self, exc_type, exc, tb):
        if self.tmp is None:
            self.f.flush()
            return False
        self.f.close()
        if exc_type is None:
            os.replace(self.tmp, self.path)
        else:
            os.remove(self.tmp)
        return False


def _open_for_data(args):
    """``skso predict`` / ``evaluate``'s model, checked against ``args.data``:
    ``(model, estimator, kind, featurizer, feature_range)``."""
    model = _load(args.model)
    _check_data(args.data)
    check_model_data(model, args.data)
    featurizer = featurizer_from_dict(model.header["featurizer"])
    return (model, model.estimator, model.header["kind"], featurizer,
            FeatureRange(featurizer, args.ignore_unseen_features))


def cmd_predict(args, stdout):
    model, est, kind, featurizer, feature_range = _open_for_data(args)
    if kind == "regressor":
        if args.proba:
            raise UsageError(f"--proba: the model ({model.header['estimator']}) is a "
                             "regressor: it predicts values, not probabilities")
        with _AtomicOutput(args.out, stdout) as f:
            for chunk, block in iter_chunks([args.data], featurizer, args.chunk_size):
                feature_range.check(block)
                # (repr: the shortest text that reads back as the same float)
                f.write("\n".join(map(repr, est.predict(chunk.X).tolist())) + "\n")
        return EXIT_OK
    classes = est.classes_
    if args.proba and kind == "linear" and not has_proba(est):
        raise UsageError(f"--proba: the model ({model.header['estimator']}, loss "
                         f"{getattr(est, 'loss', None)!r}) has no probabilities")
    names = [format_label(c) for c in classes]
    with _AtomicOutput(args.out, stdout) as f:
        if args.proba:
            f.write("# labels: " + " ".join(names) + "\n")
        for chunk, block in iter_chunks([args.data], featurizer, args.chunk_size):
            feature_range.check(block)
            if kind == "tagger":
                X, _ = chunk.sequences()
                if args.proba:
                    for best, sent in zip(est.predict(X), est.predict_marginals(X)):
                        f.write("".join(
                            format_label(b) + " " + " ".join(f"{tok[c]:.6g}" for c in classes)
                            + "\n" for b, tok in zip(best, sent)) + "\n")
                else:
                    f.write("".join("\n".join(map(format_label, s)) + "\n\n"
                                    for s in est.predict(X)))
            elif args.proba:
                P = est.predict_proba(chunk.X)
                labels = [names[i] for i in P.argmax(axis=1)]
                body = np.char.mod("%.6g", P)
                f.write("".join(lab + " " + " ".join(row) + "\n"
                                for lab, row in zip(labels, body.tolist())))
            else:
                pred = np.searchsorted(classes, est.predict(chunk.X))
                f.write("\n".join(names[i] for i in pred) + "\n")
    return EXIT_OK


class _Confusion:
    """A confusion matrix over a growing label set."""

    def __init__(self, labels):
        self.labels = np.asarray(labels)
        self.cm = np.zeros((self.labels.size,) * 2, dtype=np.int64)

    def add(self, y, pred):
        new = np.union1d(self.labels, np.union1d(np.unique(y), np.unique(pred)))
        if new.size != self.labels.size:
            pos = np.searchsorted(new, self.labels)
            cm = np.zeros((new.size,) * 2, dtype=np.int64)
            cm[np.ix_(pos, pos)] = self.cm
            self.labels, self.cm = new, cm
        K = self.labels.size
        t, p = np.searchsorted(self.labels, y), np.searchsorted(self.labels, pred)
        self.cm += np.bincount(t * K + p, minlength=K * K).reshape(K, K)

    def f1(self):
        tp = np.diag(self.cm).astype(float)
        fp = self.cm.sum(axis=0) - tp
        fn = self.cm.sum(axis=1) - tp
        den = 2 * tp + fp + fn
        return np.divide(2 * tp, den, out=np.zeros_like(tp), where=den > 0), den > 0


class RegressionFigures:
    """RMSE, MAE and R^2 of a regressor's predictions, summed chunk by chunk.

    The sum of squares about the mean (R^2's denominator) is merged from the
    chunks' own (Chan, Golub and LeVeque's pairwise update), not taken as
    ``sum y^2 - n mean^2``, which cancels on targets far from 0. R^2 is
    scikit-learn's ``r2_score``: 1 for a perfect fit of a constant target,
    else 0 when the target is constant.
    """

    def __init__(self):
        self.n = 0
        self.mean = self.m2 = self.sse = self.sae = self.loss = 0.0

    def add(self, y, pred, losses):
        """A chunk's targets ``y``, predictions ``pred`` and losses."""
        r = pred - y
        self.sse += float(np.dot(r, r))
        self.sae += float(np.abs(r).sum())
        self.loss += float(losses.sum())
        n_b, mean_b = y.size, float(y.mean())
        m2_b = float(np.square(y - mean_b).sum())
        n = self.n + n_b
        delta = mean_b - self.mean
        self.m2 += m2_b + delta * delta * self.n * n_b / n
        self.mean += delta * n_b / n
        self.n = n

    def result(self):
        """``{'rows', 'rmse', 'mae', 'r2'}`` and the mean loss."""
        n = max(self.n, 1)
        if self.m2 > 0:
            r2 = 1.0 - self.sse / self.m2
        else:
            r2 = 1.0 if self.sse == 0 else 0.0
        return {"rows": self.n, "rmse": float(np.sqrt(self.sse / n)), "mae": self.sae / n,
                "r2": r2}, self.loss / n


def _check_labelled(chunk, block):
    """A ``DataError`` unless every row of the chunk has its label."""
    if chunk.y is None or (chunk.y.dtype.kind == "f" and np.isnan(chunk.y).any()):
        raise DataError(f"{block.path}, lines from {block.first_line}: rows without "
                        "labels (evaluate needs every row's label)")


def _evaluate_regressor(args, model, featurizer, feature_range):
    """``skso evaluate``'s figures of a regressor."""
    est = model.estimator
    figures = RegressionFigures()
    for chunk, block in iter_chunks([args.data], featurizer, args.chunk_size):
        feature_range.check(block)
        _check_labelled(chunk, block)
        # (unweighted figures, as the classifiers')
        pred = est.predict(chunk.X)
        figures.add(chunk.y, pred, regression_losses(est, pred, chunk.y))
    res, mean_loss = figures.result()
    if est.loss != "squared_error":       # (the squared error is the RMSE's square)
        res["loss"] = mean_loss
        res["loss_name"] = regression_loss_name(est)
    return res


def cmd_evaluate(args, stdout):
    model, est, kind, featurizer, feature_range = _open_for_data(args)
    if kind == "regressor":
        return _print_figures(args, stdout, _evaluate_regressor(args, model, featurizer,
                                                                feature_range))
    conf = _Confusion(est.classes_)
    loss_sum = weight = 0.0
    n_rows = n_sent = 0
    ok = n_pred = n_true = 0
    probabilistic = kind == "linear" and has_proba(est)
    for chunk, block in iter_chunks([args.data], featurizer, args.chunk_size):
        feature_range.check(block)
        _check_labelled(chunk, block)
        w_orig, chunk.w = chunk.w, None       # (unweighted figures)
        loss, _, w, pred, _ = chunk_scores(est, kind, chunk)
        chunk.w = w_orig
        loss_sum += loss
        weight += w
        conf.add(chunk.y, pred)
        n_rows += chunk.n_rows
        if kind == "tagger":
            n_sent += chunk.n_units
            for a, b in zip(chunk.offsets[:-1], chunk.offsets[1:]):
                gold = set(extract_chunks(chunk.y[a:b].tolist()))
                got = set(extract_chunks(pred[a:b].tolist()))
                ok += len(gold & got)
                n_true += len(gold)
                n_pred += len(got)
    f1, present = conf.f1()
    res = {"rows": n_rows, "accuracy": float(np.trace(conf.cm) / max(n_rows, 1))}
    if kind == "tagger":
        p = ok / n_pred if n_pred else 0.0
        r = ok / n_true if n_true else 0.0
        res.update(sentences=n_sent, chunk_precision=p, chunk_recall=r,
                   chunk_f1=2 * p * r / (p + r) if p + r > 0 else 0.0)
    else:
        if probabilistic:
            res["log_loss"] = loss_sum / max(weight, 1.0)
        if est.classes_.size == 2:
            pos = np.searchsorted(conf.labels, est.classes_[1])
            res["positive_class"] = jsonable(est.classes_[1])
            res["f1"] = float(f1[pos])
        res["f1_macro"] = float(f1[present].mean()) if present.any() else 0.0
    return _print_figures(args, stdout, res)


def _print_figures(args, stdout, res):
    if args.json:
        stdout.write(json.dumps(res) + "\n")
    else:
        for k, v in res.items():
            if k == "positive_class":               # a label, as predict prints it
                v = format_label(v)
            stdout.write(f"{k:16s} {v:.6f}\n" if isinstance(v, float) else f"{k:16s} {v}\n")
    return EXIT_OK


def _weights(est, n_features):
    """``(n_weights, stored_weights, nonzero_weights)`` of the state weights:
    all of them (``n_features`` columns per class or state), those the file
    holds, and the non-zero ones."""
    if isinstance(est, CompactTagger):
        return (n_features * est.state.shape[1], int(est.state.size),
                int(np.count_nonzero(est.state)))
    coef = est.coef_
    if sp.issparse(coef):
        return int(np.prod(coef.shape)), int(coef.nnz), int(coef.count_nonzero())
    coef = np.asarray(coef)
    return int(coef.size), int(coef.size), int(np.count_nonzero(coef))


CONTENTS = {
    DEPLOYMENT: "deployment: what prediction needs (skso train --keep-state keeps the "
                "training state)",
    TRAINING_STATE: "training state: skso train --resume continues it",
}


#: ``header["kind"]`` -> what ``skso info`` says the model does.
TASKS = {"linear": "classification", "regressor": "regression",
         "tagger": "sequence labelling"}


def cmd_info(args, stdout):
    model = _load(args.model)
    h, est = model.header, model.estimator
    n_weights, stored, nonzero = _weights(est, h["featurizer"]["n_features"])
    res = {
        "file": args.model, "bytes": os.path.getsize(args.model),
        "contents": model.contents,
        "format_version": h["format_version"], "package_version": h["package_version"],
        "estimator": h["estimator"], "model": h["model"], "params": h["params"],
        "data_format": h["featurizer"]["format"], "featurizer": h["featurizer"],
        "n_features": h["featurizer"]["n_features"], "classes": h["classes"],
        "n_weights": n_weights, "stored_weights": stored, "nonzero_weights": nonzero,
        "training": h.get("training", {}),
    }
    kind = h.get("kind", "linear")
    res["task"] = TASKS.get(kind, kind)
    if kind == "regressor":
        res["loss"] = est.loss
        res["loss_description"] = regression_loss_name(est)
    if args.json:
        stdout.write(json.dumps(res, default=repr) + "\n")
        return EXIT_OK
    stdout.write(f"{'file':16s} {args.model}\n")
    stdout.write(f"{'contents':16s} {CONTENTS[model.contents]}\n")
    for k in ("bytes", "format_version", "package_version", "estimator", "model",
              "data_format", "n_features", "n_weights", "stored_weights", "nonzero_weights"):
        stdout.write(f"{k:16s} {res[k]}\n")
    if kind == "regressor":
        stdout.write(f"{'task':16s} regression (a real-valued target), loss "
                     f"{res['loss_description']}\n")
    else:
        stdout.write(f"{'task':16s} {res['task']}\n")
        stdout.write(f"{'classes':16s} {' '.join(map(format_label, h['classes']))}\n")
    feat = {k: v for k, v in h["featurizer"].items() if k != "template"}
    stdout.write(f"{'featurizer':16s} {json.dumps(feat)}\n")
    if "template" in h["featurizer"]:
        n_u = sum(1 for ln in h["featurizer"]["template"].splitlines()
                  if ln.strip().startswith("U"))
        stdout.write(f"{'templates':16s} {n_u} U templates\n")
    stdout.write("params\n")
    for k, v in sorted(h["params"].items()):
        stdout.write(f"  {k:14s} {v!r}\n")
    stdout.write(f"{'training':16s} {json.dumps(res['training'])}\n")
    return EXIT_OK
