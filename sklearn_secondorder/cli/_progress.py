"""What ``skso train`` shows while it runs: progress and progressive validation.

``Feedback`` is the progress bar (tqdm, when installed) or plain lines;
``RunningLoss`` the running averages of progressive validation (VW's
"average loss" and "since last"); ``chunk_scores`` the loss and error of a
labelled chunk under the current model, before training on it (and the
per-chunk scores ``skso evaluate`` sums).
"""
import sys
import time

import numpy as np


class Feedback:
    """The progress bar (tqdm, when installed) or plain lines, and the
    progressive-validation lines at doubling row counts."""

    def __init__(self, mode, total_bytes, out=None):
        self.out = out if out is not None else sys.stderr
        self.total = total_bytes
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
                self.bar = tqdm(total=total_bytes, unit="B", unit_scale=True,
                                unit_divisor=1024, file=self.out, leave=False,
                                dynamic_ncols=True)
        self.start = time.perf_counter()
        self.next_report = 1
        self.done = 0

    def write(self, text):
        if self.quiet:
            return
        if self.bar is not None:
            self.bar.write(text, file=self.out)
        else:
            print(text, file=self.out, flush=True)

    def update(self, done_bytes, rows):
        if self.bar is not None:
            self.bar.update(max(0, done_bytes - self.done))
            elapsed = max(time.perf_counter() - self.start, 1e-9)
            self.bar.set_postfix(rows=rows, rows_s=f"{rows / elapsed:,.0f}", refresh=False)
        self.done = done_bytes

    def eta(self):
        elapsed = time.perf_counter() - self.start
        if self.total <= 0 or self.done <= 0:
            return "", ""
        frac = min(self.done / self.total, 1.0)
        left = elapsed * (1 - frac) / frac
        return f"{100 * frac:5.1f}%", f"{left:7.1f}s"

    def close(self):
        if self.bar is not None:
            self.bar.close()


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


def chunk_scores(est, kind, chunk, sequences=None):
    """``(loss_sum, error_sum, weight_sum, y_pred, proba)`` of a labelled chunk:
    the log-loss when the model has probabilities, else the error rate
    (``sequences``: the chunk's ``Chunk.sequences()`` when already cut)."""
    w = np.ones(chunk.n_rows) if chunk.w is None else chunk.w
    if kind == "tagger":
        X, _ = chunk.sequences() if sequences is None else sequences
        pred = np.concatenate([np.asarray(s) for s in est.predict(X)])
        err = (pred != chunk.y) * w
        return float(err.sum()), float(err.sum()), float(w.sum()), pred, None
    classes = est.classes_
    if has_proba(est):
        P = est.predict_proba(chunk.X)
        pred = classes[P.argmax(axis=1)]
        idx, known = _label_index(classes, chunk.y)
        eps = np.finfo(P.dtype).eps
        p_true = np.where(known, np.clip(P[np.arange(P.shape[0]), idx], eps, 1 - eps), eps)
        loss = -np.log(p_true) * w
    else:
        P = None
        pred = est.predict(chunk.X)
        loss = (pred != chunk.y) * w
    err = (pred != chunk.y) * w
    return float(loss.sum()), float(err.sum()), float(w.sum()), pred, P
