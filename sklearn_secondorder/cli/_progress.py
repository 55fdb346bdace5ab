"""What ``skso train`` shows while it runs: progress and progressive validation.

``Feedback`` is the progress bar (tqdm, when installed) or plain lines, with
the fraction done and the time left; ``RunningLoss`` the running averages of
progressive validation (VW's "average loss" and "since last");
``chunk_scores`` the loss and error of a labelled chunk under the current
model, before training on it (and the per-chunk scores ``skso evaluate``
sums); a regressor's loss is ``regression_losses``' and it has no error.
"""
import sys
import time

import numpy as np


class Feedback:
    """The progress bar (tqdm, when installed) or plain lines, and the
    progressive-validation lines at doubling row counts.

    Parameters
    ----------
    mode : {'auto', 'bar', 'lines', 'none'}
        ``--progress``.
    total : int
        What a finished run has done: rows (all passes) when the files were
        scanned, else bytes of text (the rows are not known).
    unit : {'rows', 'bytes'}
        The unit of ``total`` and of ``update``.
    out : file-like, default=None
        Where to write (standard error).
    """

    def __init__(self, mode, total, unit="rows", out=None):
        self.out = out if out is not None else sys.stderr
        self.total = total
        self.unit = unit
        self.bar = None
        self.quiet = mode == "none"
        if mode == "bar" or (mode == "auto" and getattr(self.out, "isatty", lambda: False)()):
            try:
                from tqdm import tqdm
            except ImportError:
                tqdm = None
                if mode == "bar":
                    self.write("skso: tqdm is not installed (pip install "
                               "'sklearn-secondorder[cli]'): plain progress lines")
            if tqdm is not None:
                scale = {"unit": "B", "unit_scale": True, "unit_divisor": 1024} \
                    if unit == "bytes" else {"unit": " rows", "unit_scale": True}
                self.bar = tqdm(total=total, file=self.out, leave=False,
                                dynamic_ncols=True, **scale)
        self.start = time.perf_counter()
        self.next_report = 1
        self.next_tenth = 0.1
        self.done = 0

    def write(self, text):
        if self.quiet:
            return
        if self.bar is not None:
            self.bar.write(text, file=self.out)
        else:
            print(text, file=self.out, flush=True)

    def update(self, done, rows):
        """``done`` (in ``unit``) and ``rows`` trained so far."""
        if self.bar is not None:
            self.bar.update(max(0, done - self.done))
            elapsed = max(time.perf_counter() - self.start, 1e-9)
            self.bar.set_postfix(rows=rows, rows_s=f"{rows / elapsed:,.0f}", refresh=False)
        self.done = done

    def due(self, rows):
        """Whether a progressive-validation row is due after ``rows`` rows:
        at doubling row counts (as VW's) and at every tenth of the run (so
        that a long run whose first chunk is large still reports as it goes)."""
        due = False
        if rows >= self.next_report:
            while self.next_report <= rows:
                self.next_report *= 2
            due = True
        frac = self.fraction()
        if frac is not None and frac >= self.next_tenth:
            while self.next_tenth <= frac:
                self.next_tenth += 0.1
            due = True
        return due

    def fraction(self):
        """The fraction done (None when unknown)."""
        if self.total <= 0:
            return None
        return min(self.done / self.total, 1.0)

    def eta(self):
        """``(fraction done, seconds left)`` as printed: '12.3%', '4.5s'."""
        frac = self.fraction()
        if not frac:
            return "", ""
        elapsed = time.perf_counter() - self.start
        left = elapsed * (1 - frac) / frac
        return f"{100 * frac:5.1f}%", format_seconds(left)

    def close(self):
        if self.bar is not None:
            self.bar.close()


def format_seconds(t):
    """``t`` seconds as a short duration: '0.04s', '12.3s', '4m05s', '2h13m'."""
    if t < 10:
        return f"{t:.2f}s"
    if t < 60:
        return f"{t:.1f}s"
    if t < 3600:
        return f"{int(t // 60)}m{int(t % 60):02d}s"
    return f"{int(t // 3600)}h{int(t % 3600 // 60):02d}m"


class RunningLoss:
    """Weighted running averages of the loss and the error, overall and since
    the last report (VW's 'average loss' and 'since last')."""

    def __init__(self):
        self.loss = self.err = self.w = 0.0
        self.last_loss = self.last_err = self.last_w = 0.0

    def add(self, loss_sum, err_sum, weight):
        self.loss += loss_sum
        self.err += err_sum
        self.w += weight
        self.last_loss += loss_sum
        self.last_err += err_sum
        self.last_w += weight

    def row(self):
        def avg(a, b):
            return a / b if b else float("nan")
        out = (avg(self.loss, self.w), avg(self.last_loss, self.last_w),
               avg(self.err, self.w), avg(self.last_err, self.last_w))
        self.last_loss = self.last_err = self.last_w = 0.0
        return out


def _label_index(classes, y):
    idx = np.searchsorted(classes, y)
    idx = np.minimum(idx, classes.size - 1)
    return idx, classes[idx] == y


def has_proba(est):
    try:
        return hasattr(est, "predict_proba")
    except Exception:   # pragma: no cover - a property that raises
        return False


#: Margin losses ``f(z)``, ``z = y * score`` with ``y`` in {-1, +1}: the
#: losses of the linear models that have no probabilities.
MARGIN_LOSSES = {
    "hinge": lambda z: np.maximum(0.0, 1.0 - z),
    "squared_hinge": lambda z: np.maximum(0.0, 1.0 - z) ** 2,
    "perceptron": lambda z: np.maximum(0.0, -z),
    "modified_huber": lambda z: np.where(z >= -1.0, np.maximum(0.0, 1.0 - z) ** 2, -4.0 * z),
    "log_loss": lambda z: np.logaddexp(0.0, -z),
}


def regression_losses(est, pred, y):
    """Each row's loss of a regressor's predictions ``pred`` of ``y``: the
    squared error ``(p - y)^2`` (Vowpal Wabbit's squared loss: its mean is
    the MSE) for ``loss='squared_error'``, else the loss trained (Huber's,
    the epsilon-insensitive ones, the quantile's pinball loss), the
    estimator's own equations (``linear._regression.loss_values``)."""
    from ..linear._regression import loss_values, regression_loss

    values = loss_values(regression_loss(est), np.asarray(pred, dtype=np.float64), y)
    return 2.0 * values if est.loss == "squared_error" else values


def regression_loss_name(est):
    """What ``regression_losses`` of ``est`` is, in words."""
    loss = est.loss
    if loss == "squared_error":
        return "squared error (p - y)^2"
    if loss == "quantile":
        return f"quantile (pinball) loss at quantile={est.quantile:g}"
    return f"{loss} loss (epsilon={est.epsilon:g})"


def loss_name(est, kind, n_classes):
    """What the loss column of ``est`` is (printed above the table)."""
    if kind == "regressor":
        return regression_loss_name(est)
    if kind == "tagger":
        return "-log p(labels | sentence), per token"
    if has_proba(est):
        return "log-loss"
    name = getattr(est, "loss", None)
    if name in MARGIN_LOSSES:
        return name + (" summed over the one-vs-rest classes" if n_classes > 2 else "")
    return "0/1 error"


def chunk_scores(est, kind, chunk, tagger=None):
    """``(loss_sum, error_sum, weight_sum, y_pred, proba)`` of a labelled chunk.

    The loss is the model's own: the log-loss when the model has
    probabilities, else its margin loss (``MARGIN_LOSSES``; one-vs-rest:
    summed over the classes); for a tagger ``-log p(labels | sentence)``
    (the weight is then the tokens: the average is per token); for a
    regressor ``regression_losses`` (its error sum is 0: it has none, and
    ``y_pred`` the predicted values).

    Parameters
    ----------
    est : estimator
        The model (a tagger, a ``CompactTagger``, or a linear estimator).
    kind : {'linear', 'regressor', 'tagger'}
        The kind of model.
    chunk : Chunk
        Labelled rows.
    tagger : CompactTagger, default=None
        For a tagger: its compact form, when already made (it scores the
        chunk; ``est`` is then unused).
    """
    w = np.ones(chunk.n_rows) if chunk.w is None else chunk.w
    if kind == "tagger":
        if tagger is None:
            from ._deployed import CompactTagger
            tagger = est if isinstance(est, CompactTagger) else \
                CompactTagger.from_estimator(est, chunk.X.shape[1])
        pred = tagger.decode(chunk.X, chunk.offsets)
        err = (pred != chunk.y) * w
        known = np.isin(chunk.y, tagger.classes_)
        loss = np.inf
        if known.all():
            loss = tagger.neg_log_likelihood(chunk.X, chunk.offsets, chunk.y)
        return float(loss), float(err.sum()), float(w.sum()), pred, None
    if kind == "regressor":
        return regression_scores_loss(est, chunk, est.predict(chunk.X))
    return linear_scores_loss(est, chunk, est.decision_function(chunk.X))


def row_scores_loss(est, kind, chunk, scores):
    """``chunk_scores`` of a model of rows whose scores of the chunk's rows
    are ``scores`` (each row's before its own update, in a stream of
    calls: ``PSAClassifier.begin_stream``): a regressor's predicted values,
    a classifier's decision scores."""
    if kind == "regressor":
        return regression_scores_loss(est, chunk, scores)
    return linear_scores_loss(est, chunk, scores)


def regression_scores_loss(est, chunk, pred):
    """``chunk_scores`` of a regressor whose predictions of the chunk's rows
    are ``pred``."""
    w = np.ones(chunk.n_rows) if chunk.w is None else chunk.w
    loss = regression_losses(est, np.asarray(pred, dtype=np.float64), chunk.y) * w
    return float(loss.sum()), 0.0, float(w.sum()), pred, None


def linear_scores_loss(est, chunk, scores):
    """``chunk_scores`` of a linear model whose decision scores of the
    chunk's rows are ``scores`` (``decision_function``'s, or each row's
    before its own update in a stream: ``PSAClassifier.begin_stream``)."""
    w = np.ones(chunk.n_rows) if chunk.w is None else chunk.w
    classes = est.classes_
    if has_proba(est):
        P = est.proba_from_scores(scores)
        pred = classes[P.argmax(axis=1)]
        idx, known = _label_index(classes, chunk.y)
        eps = np.finfo(P.dtype).eps
        p_true = np.where(known, np.clip(P[np.arange(P.shape[0]), idx], eps, 1 - eps), eps)
        loss = -np.log(p_true) * w
    else:
        P = None
        if scores.ndim == 1:
            pred = classes[(scores > 0).astype(int)]
            Y = np.where(chunk.y == classes[1], 1.0, -1.0)[:, None]
            scores = scores[:, None]
        else:
            pred = classes[scores.argmax(axis=1)]
            Y = np.where(chunk.y[:, None] == classes[None, :], 1.0, -1.0)
        f = MARGIN_LOSSES.get(getattr(est, "loss", None))
        loss = (f(Y * scores).sum(axis=1) if f is not None else (pred != chunk.y)) * w
    err = (pred != chunk.y) * w
    return float(loss.sum()), float(err.sum()), float(w.sum()), pred, P
