"""``skso``: train, predict, evaluate and inspect models from data files.

The subcommands stream the files in chunks through the estimators' public
API (``partial_fit``, ``predict``, ``predict_proba``): no second
implementation of any learner lives here.
"""
import argparse
import ast
import json
import os
import sys
import tempfile
import time
import warnings

import numpy as np

from .. import (
    ASFSequenceTagger,
    PlainSGDClassifier,
    PSAClassifier,
    PSASequenceTagger,
    SBMLogisticRegression,
    SGDQNLinearSVC,
    SGDSequenceTagger,
    __version__,
)
from ..metrics import extract_chunks
from ._model import load_model, save_model
from ._stream import (
    FORMATS,
    DataError,
    ScanResult,
    detect_format,
    featurizer_from_dict,
    file_size,
    iter_blocks,
    iter_chunks,
    make_featurizer,
    scan,
    shuffled,
    text_size,
)
from ._templates import BUILTIN_TEMPLATES

#: ``--model`` name -> (estimator class, kind).
MODELS = {
    "psa": (PSAClassifier, "linear"),
    "sgdqn": (SGDQNLinearSVC, "linear"),
    "sbm": (SBMLogisticRegression, "linear"),
    "sgd": (PlainSGDClassifier, "linear"),
    "psa-tagger": (PSASequenceTagger, "tagger"),
    "asf-tagger": (ASFSequenceTagger, "tagger"),
    "sgd-tagger": (SGDSequenceTagger, "tagger"),
}

EXIT_OK, EXIT_ERROR, EXIT_USAGE = 0, 1, 2


class UsageError(ValueError):
    """A bad command line (exit code 2)."""


# ---- argument parsing -----------------------------------------------------------------
def _positive_int(s):
    v = int(s)
    if v < 1:
        raise argparse.ArgumentTypeError(f"{s!r} is not a positive integer")
    return v


def _hash_bits(s):
    v = int(s)
    if not 1 <= v <= 30:
        raise argparse.ArgumentTypeError(f"--hash-bits {s}: expected 1 to 30")
    return v


def build_parser():
    """Build the ``argparse`` parser of ``skso`` and its subcommands.

    Returns
    -------
    parser : argparse.ArgumentParser
        The parser (``train``, ``predict``, ``evaluate``, ``info``).
    """
    parser = argparse.ArgumentParser(
        prog="skso",
        description="Train single-pass second-order models on data files of any size, "
                    "streamed in chunks (svmlight/libsvm, Vowpal Wabbit, CoNLL columns; "
                    "plain or gzip).",
        epilog="Run 'skso COMMAND --help' for a command's options.")
    parser.add_argument("--version", action="version", version=f"skso {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True

    tr = sub.add_parser(
        "train", help="train a model on data files, streamed in chunks",
        description="Train a model with the estimator's partial_fit over chunks of the files. "
                    "The files are scanned once first (labels, rows, feature range) so that "
                    "classes and size-dependent parameters come from the whole data.")
    tr.add_argument("data", nargs="+", help="data files (plain or gzip)")
    tr.add_argument("--model", required=True, choices=sorted(MODELS),
                    help="the estimator: psa=PSAClassifier, sgdqn=SGDQNLinearSVC, "
                         "sbm=SBMLogisticRegression, sgd=PlainSGDClassifier, and the "
                         "sequence taggers (CoNLL data)")
    tr.add_argument("--out", "-o", required=True, help="the model file to write")
    _add_format_args(tr)
    tr.add_argument("--passes", type=_positive_int, default=1,
                    help="passes over the files (each re-reads them; default 1)")
    tr.add_argument("--chunk-size", type=_positive_int, default=None,
                    help="lines per chunk given to partial_fit (CoNLL: whole sentences of at "
                         "least that many lines; default: 10000, or a tenth of the number of "
                         "features up to 100000, as each call costs O(features))")
    tr.add_argument("--first-chunk-size", type=_positive_int, default=20000,
                    help="lines of the first chunk, on which the estimators calibrate their "
                         "step size (default 20000)")
    tr.add_argument("--shuffle-buffer", type=int, default=0, metavar="N",
                    help="shuffle rows (CoNLL: sentences) through a buffer of N, for files in "
                         "a bad order (default 0: file order)")
    est = tr.add_argument_group("estimator parameters (default: the estimator's)")
    est.add_argument("--alpha", "--l2", type=float, help="L2 strength")
    est.add_argument("--loss", help="loss (linear models with a loss parameter)")
    est.add_argument("--eta0", help="initial step size, or 'auto'")
    est.add_argument("--period", type=int,
                     help="PSA's period b (default for psa: the paper's 0.5 n / 1000, at "
                          "least 10, with n the rows of the whole data)")
    est.add_argument("--random-state", type=int, default=0,
                     help="seed of the estimator and the shuffle buffer (default 0)")
    est.add_argument("--param", action="append", default=[], metavar="NAME=VALUE",
                     help="any other constructor parameter, e.g. --param psa_kappa=0.5 "
                          "(repeatable; VALUE read as a Python literal)")
    tr.add_argument("--classes", metavar="LABELS",
                    help="all the labels, comma-separated: skips the pre-scan of the files "
                         "(the rows are then estimated from the first chunk; svmlight also "
                         "needs --n-features, and indices are one-based unless --zero-based)")
    tr.add_argument("--n-features", type=_positive_int,
                    help="svmlight: the number of features (with --classes)")
    tr.add_argument("--progress", choices=["auto", "bar", "lines", "none"], default="auto",
                    help="progress display: a tqdm bar (needs the 'cli' extra), plain lines, "
                         "or nothing; auto: a bar on a terminal, else lines")
    tr.add_argument("--no-progressive", action="store_true",
                    help="skip progressive validation (the loss of each chunk before "
                         "training on it)")

    pr = sub.add_parser("predict", help="predict the labels of a data file",
                        description="One label per line (taggers: per token, a blank line "
                                    "between sentences).")
    pr.add_argument("model", help="a model file written by 'skso train'")
    pr.add_argument("data", help="a data file in the model's format")
    pr.add_argument("--out", "-o", help="output file (default: standard output)")
    pr.add_argument("--proba", action="store_true",
                    help="also the probability of every class (taggers: marginals), in "
                         "the order of the '# labels:' first line")
    pr.add_argument("--chunk-size", type=_positive_int, default=10000,
                    help="lines per chunk (default 10000)")

    ev = sub.add_parser("evaluate", help="score a model on a labelled data file",
                        description="Accuracy, log-loss (probabilistic models) and F1; for "
                                    "taggers token accuracy and conlleval chunk "
                                    "precision / recall / F1.")
    ev.add_argument("model", help="a model file written by 'skso train'")
    ev.add_argument("data", help="a labelled data file in the model's format")
    ev.add_argument("--json", action="store_true", help="print one JSON object")
    ev.add_argument("--chunk-size", type=_positive_int, default=10000,
                    help="lines per chunk (default 10000)")

    info = sub.add_parser("info", help="describe a model file",
                          description="Estimator, parameters, classes, features, size.")
    info.add_argument("model", help="a model file written by 'skso train'")
    info.add_argument("--json", action="store_true", help="print one JSON object")
    return parser


def _add_format_args(p):
    g = p.add_argument_group("data format")
    g.add_argument("--format", choices=FORMATS,
                   help="the data format (default: detected from the first line)")
    g.add_argument("--hash-bits", type=_hash_bits, default=18,
                   help="VW and CoNLL features are hashed to 2**BITS columns (default 18)")
    zb = g.add_mutually_exclusive_group()
    zb.add_argument("--zero-based", dest="zero_based", action="store_true", default=None,
                    help="svmlight indices start at 0 (default: detected)")
    zb.add_argument("--one-based", dest="zero_based", action="store_false",
                    help="svmlight indices start at 1 (default: detected)")
    g.add_argument("--template", metavar="NAME_OR_FILE",
                   help="CoNLL feature templates: a CRF++ template file, or a built-in "
                        f"({', '.join(sorted(BUILTIN_TEMPLATES))}; default: chunking with 2 "
                        "or more feature columns, else words)")


# ---- feedback -------------------------------------------------------------------------
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


# ---- estimators -----------------------------------------------------------------------
def _literal(text):
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


def make_estimator(args, n):
    """The estimator of ``--model`` with the command line's parameters, the
    size-dependent ones set from the rows of the whole data (``n``)."""
    cls, kind = MODELS[args.model]
    names = set(cls().get_params())
    params = {}
    for name, value in (("alpha", args.alpha), ("loss", args.loss), ("period", args.period),
                        ("random_state", args.random_state)):
        if value is not None:
            params[name] = value
    if args.eta0 is not None:
        params["eta0"] = _literal(args.eta0)
    for item in args.param:
        name, sep, value = item.partition("=")
        if not sep:
            raise UsageError(f"--param {item!r}: expected NAME=VALUE")
        params[name.strip()] = _literal(value.strip())
    unknown = sorted(set(params) - names)
    if unknown:
        raise UsageError(f"--model {args.model} ({cls.__name__}) has no parameter(s) "
                         f"{', '.join(unknown)}; its parameters: {', '.join(sorted(names))}")
    if args.model == "psa" and "period" not in params:
        # the paper's guideline (Sec. 5.1.4), b ~ 0.5 |D| / 1000, from the
        # whole file: the estimator would take |D| from the first chunk only
        params["period"] = max(10, int(round(0.5 * n / 1000)))
    if args.model == "sbm" and "eta" not in params and params.get("update", "paper") == "paper":
        params["eta"] = 1.0 / n          # SBM's default eta = 1/n, n the whole data
    return cls(**params), kind


def _check_model_data(kind, fmt):
    if kind == "tagger" and fmt != "conll":
        raise UsageError(f"the sequence taggers read CoNLL files, not {fmt}")


# ---- progressive validation and evaluation -------------------------------------------
def _label_index(classes, y):
    idx = np.searchsorted(classes, y)
    idx = np.minimum(idx, classes.size - 1)
    return idx, classes[idx] == y


def _has_proba(est):
    try:
        return hasattr(est, "predict_proba")
    except Exception:   # pragma: no cover - a property that raises
        return False


def chunk_scores(est, kind, chunk):
    """``(loss_sum, error_sum, weight_sum, y_pred, proba)`` of a labelled chunk:
    the log-loss when the model has probabilities, else the error rate."""
    w = np.ones(chunk.n_rows) if chunk.w is None else chunk.w
    if kind == "tagger":
        X, _ = chunk.sequences()
        pred = np.concatenate([np.asarray(s) for s in est.predict(X)])
        err = (pred != chunk.y) * w
        return float(err.sum()), float(err.sum()), float(w.sum()), pred, None
    classes = est.classes_
    if _has_proba(est):
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


# ---- train ----------------------------------------------------------------------------
def _resolve_format(args, paths):
    fmts = {detect_format(p) for p in paths} if args.format is None else {args.format}
    if len(fmts) > 1:
        raise UsageError(f"the files are in different formats ({', '.join(sorted(fmts))}); "
                         "pass --format")
    return fmts.pop()


def _no_scan(args, paths, fmt):
    """What the scan would give, from --classes (and --n-features): the rows
    are estimated at the first chunk."""
    names = [c.strip() for c in args.classes.split(",") if c.strip()]
    if fmt == "conll":
        classes = np.unique(np.asarray(names, dtype=str))
        first = _first_data_line(paths[0])
        return ScanResult(0, 0, classes, n_columns=len(first.split()))
    try:
        classes = np.unique(np.asarray([float(c) for c in names]))
    except ValueError:
        raise UsageError(f"--classes {args.classes!r}: {fmt} labels are numbers") from None
    if fmt == "svmlight":
        if args.n_features is None:
            raise UsageError("--classes skips the scan of the files: give --n-features too "
                             "(svmlight files do not say how many features they have)")
        zb = bool(args.zero_based)
        return ScanResult(0, 0, classes, min_index=0 if zb else 1,
                          max_index=args.n_features - (1 if zb else 0))
    return ScanResult(0, 0, classes)


def _first_data_line(path):
    for block in iter_blocks(path, 16):
        for line in block.data.decode("utf-8", errors="replace").splitlines():
            if line.strip():
                return line
    raise DataError(f"{path}: empty file (no data line)")


def cmd_train(args, out):
    paths = [str(p) for p in args.data]
    for p in paths:
        if not os.path.isfile(p):
            raise UsageError(f"{p}: no such file")
    fmt = _resolve_format(args, paths)
    kind = MODELS[args.model][1]
    _check_model_data(kind, fmt)
    t0 = time.perf_counter()
    if args.classes is None:
        scanned = scan(paths, fmt)
    else:
        scanned = _no_scan(args, paths, fmt)
    featurizer = make_featurizer(fmt, scanned, hash_bits=args.hash_bits,
                                 zero_based=args.zero_based, template=args.template)
    t_scan = time.perf_counter() - t0
    classes = scanned.classes
    if classes.size < 2:
        raise DataError(f"the data have a single label ({classes[0]!r}): nothing to learn")
    cls = MODELS[args.model][0]
    sizes = [file_size(p) for p in paths]
    total = sum(sizes) * args.passes
    fb = Feedback(args.progress, total, out)
    unit = "sentences" if fmt == "conll" else "rows"
    size = (f"{scanned.n_rows:,} rows" if scanned.n_rows else "rows not scanned")
    fb.write(f"skso train: {args.model} ({cls.__name__}) on {size}"
             + (f" ({scanned.n_units:,} sentences)" if fmt == "conll" and scanned.n_rows
                else "")
             + f", {featurizer.n_features:,} features, {classes.size} classes, "
               f"{fmt}; scan {t_scan:.2f}s")
    if args.chunk_size is None:
        args.chunk_size = max(10_000, min(100_000, featurizer.n_features // 10))
    est = None
    if scanned.n_rows:
        est, kind = make_estimator(args, scanned.n_rows)
    if not args.no_progressive:
        fb.write(f"{'avg loss':>10} {'since last':>10} {'avg err':>8} {'since last':>10} "
                 f"{'rows':>11} {'rows/s':>10} {'done':>6} {'left':>8}")
    rng = np.random.default_rng(args.random_state)
    progressive = RunningLoss()
    rows = units = 0
    fitted = False
    t_train = time.perf_counter()
    fb.start = t_train
    for p in range(args.passes):
        chunks = iter_chunks(paths, featurizer, args.chunk_size,
                             first_chunk_size=None if fitted else args.first_chunk_size)
        if args.shuffle_buffer > 0:
            chunks = shuffled(chunks, args.shuffle_buffer, rng)
        for chunk, block in chunks:
            if chunk.y is None or (chunk.y.dtype.kind == "f" and np.isnan(chunk.y).any()):
                raise DataError(f"{block.path}, lines from {block.first_line}: a row without "
                                "a label (training needs labels)")
            if est is None:
                # no scan: the rows of the whole data estimated from this
                # first block's rows per byte
                scanned.n_rows = max(1, int(round(
                    chunk.n_rows * sum(map(text_size, paths)) / max(block.end, 1))))
                est, kind = make_estimator(args, scanned.n_rows)
                fb.write(f"(about {scanned.n_rows:,} rows, estimated from the first chunk)")
            if fitted and p == 0 and not args.no_progressive:
                progressive.add(*chunk_scores(est, kind, chunk)[:3])
            # (classes on the first call only: later calls are checked against it)
            first = {} if fitted else {"classes": classes}
            with warnings.catch_warnings():
                # scikit-learn's check of `classes` takes more than 20 labels
                # for a regression target: the labels here are the data's
                warnings.filterwarnings("ignore", message="The number of unique classes")
                if kind == "tagger":
                    X, y = chunk.sequences()
                    est.partial_fit(X, y, **first)
                else:
                    est.partial_fit(chunk.X, chunk.y, sample_weight=chunk.w, **first)
            fitted = True
            rows += chunk.n_rows
            units += chunk.n_units
            done = p * sum(sizes) + sum(sizes[:paths.index(block.path)]) + block.position
            fb.update(done, rows)
            if rows >= fb.next_report and not args.no_progressive:
                while fb.next_report <= rows:
                    fb.next_report *= 2
                if progressive.w:
                    a, b, c, d = progressive.row()
                    elapsed = time.perf_counter() - t_train
                    pct, left = fb.eta()
                    fb.write(f"{a:10.6f} {b:10.6f} {c:8.4f} {d:10.4f} {rows:11,d} "
                             f"{rows / elapsed:10,.0f} {pct:>6} {left:>8}")
    fb.close()
    seconds = time.perf_counter() - t_train
    header = {
        "package_version": __version__, "model": args.model,
        "estimator": type(est).__name__, "kind": kind,
        "params": {k: _jsonable(v) for k, v in est.get_params().items()},
        "featurizer": featurizer.to_dict(),
        "classes": [_jsonable(c) for c in est.classes_],
        "training": {"files": paths, "rows": rows, unit: units, "passes": args.passes,
                     "scanned": args.classes is None,
                     "seconds": seconds, "scan_seconds": t_scan,
                     "progressive_loss": progressive.loss / progressive.w
                     if progressive.w else None,
                     "progressive_error": progressive.err / progressive.w
                     if progressive.w else None},
    }
    save_model(args.out, est, header)
    if fb.quiet:
        return EXIT_OK
    summary = [f"finished: {rows:,} rows in {args.passes} pass(es), {seconds:.2f}s "
               f"({rows / max(seconds, 1e-9):,.0f} rows/s; scan {t_scan:.2f}s)"]
    if progressive.w:
        summary.append(f"progressive validation (pass 1, {progressive.w:,.0f} rows): "
                       f"average loss {progressive.loss / progressive.w:.6f}, "
                       f"error {progressive.err / progressive.w:.4f}")
    summary.append(f"model: {args.out} ({os.path.getsize(args.out):,} bytes)")
    for line in summary:
        fb.write(line)
    return EXIT_OK


def _jsonable(v):
    if isinstance(v, np.generic):
        return v.item()
    if isinstance(v, (str, int, float, bool)) or v is None:
        return v
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    if isinstance(v, dict):
        return {str(k): _jsonable(x) for k, x in v.items()}
    return repr(v)


# ---- predict / evaluate / info --------------------------------------------------------
def _load(path):
    if not os.path.isfile(path):
        raise UsageError(f"{path}: no such model file")
    return load_model(path)


def _check_data(path):
    if not os.path.isfile(path):
        raise UsageError(f"{path}: no such file")


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
            folder = os.path.dirname(os.path.abspath(path))
            fd, self.tmp = tempfile.mkstemp(prefix=".skso-", suffix=".tmp", dir=folder)
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


def cmd_predict(args, stdout):
    model = _load(args.model)
    _check_data(args.data)
    est, kind = model.estimator, model.header["kind"]
    featurizer = featurizer_from_dict(model.header["featurizer"])
    classes = est.classes_
    if args.proba and kind == "linear" and not _has_proba(est):
        raise UsageError(f"--proba: the model ({model.header['estimator']}, loss "
                         f"{getattr(est, 'loss', None)!r}) has no probabilities")
    names = [format_label(c) for c in classes]
    with _AtomicOutput(args.out, stdout) as f:
        if args.proba:
            f.write("# labels: " + " ".join(names) + "\n")
        for chunk, _ in iter_chunks([args.data], featurizer, args.chunk_size):
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


def cmd_evaluate(args, stdout):
    model = _load(args.model)
    _check_data(args.data)
    est, kind = model.estimator, model.header["kind"]
    featurizer = featurizer_from_dict(model.header["featurizer"])
    conf = _Confusion(est.classes_)
    loss_sum = weight = 0.0
    n_rows = n_sent = 0
    ok = n_pred = n_true = 0
    has_proba = kind == "linear" and _has_proba(est)
    for chunk, block in iter_chunks([args.data], featurizer, args.chunk_size):
        if chunk.y is None or (chunk.y.dtype.kind == "f" and np.isnan(chunk.y).any()):
            raise DataError(f"{block.path}, lines from {block.first_line}: rows without "
                            "labels (evaluate needs every row's label)")
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
        if has_proba:
            res["log_loss"] = loss_sum / max(weight, 1.0)
        if est.classes_.size == 2:
            pos = np.searchsorted(conf.labels, est.classes_[1])
            res["positive_class"] = _jsonable(est.classes_[1])
            res["f1"] = float(f1[pos])
        res["f1_macro"] = float(f1[present].mean()) if present.any() else 0.0
    if args.json:
        stdout.write(json.dumps(res) + "\n")
    else:
        for k, v in res.items():
            stdout.write(f"{k:16s} {v:.6f}\n" if isinstance(v, float) else f"{k:16s} {v}\n")
    return EXIT_OK


def cmd_info(args, stdout):
    model = _load(args.model)
    h, est = model.header, model.estimator
    coef = np.asarray(getattr(est, "coef_", np.zeros(0)))
    res = {
        "file": args.model, "bytes": os.path.getsize(args.model),
        "format_version": h["format_version"], "package_version": h["package_version"],
        "estimator": h["estimator"], "model": h["model"], "params": h["params"],
        "data_format": h["featurizer"]["format"], "featurizer": h["featurizer"],
        "n_features": h["featurizer"]["n_features"], "classes": h["classes"],
        "n_weights": int(coef.size), "nonzero_weights": int(np.count_nonzero(coef)),
        "training": h.get("training", {}),
    }
    if args.json:
        stdout.write(json.dumps(res, default=repr) + "\n")
        return EXIT_OK
    for k in ("file", "bytes", "format_version", "package_version", "estimator", "model",
              "data_format", "n_features", "n_weights", "nonzero_weights"):
        stdout.write(f"{k:16s} {res[k]}\n")
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


COMMANDS = {"train": cmd_train, "predict": cmd_predict, "evaluate": cmd_evaluate,
            "info": cmd_info}


def main(argv=None, *, stdout=None, stderr=None):
    """Run ``skso`` with the arguments ``argv`` (default ``sys.argv[1:]``).

    Parameters
    ----------
    argv : list of str, default=None
        The command line without the program name.
    stdout, stderr : file-like, default=None
        Where the output and the messages go (default: the process's).

    Returns
    -------
    code : int
        0 on success, 2 on a usage or data error (the message says what and
        where), 1 on another failure.
    """
    stdout = sys.stdout if stdout is None else stdout
    stderr = sys.stderr if stderr is None else stderr
    parser = build_parser()
    old = sys.stdout, sys.stderr
    try:
        sys.stdout, sys.stderr = stdout, stderr      # argparse prints help / errors there
        try:
            args = parser.parse_args(argv)
        except SystemExit as e:
            return int(e.code or 0)
    finally:
        sys.stdout, sys.stderr = old
    try:
        if args.command == "train":
            return cmd_train(args, stderr)
        return COMMANDS[args.command](args, stdout)
    except BrokenPipeError:     # e.g. 'skso predict ... | head'
        try:
            sys.stdout = open(os.devnull, "w")      # (no second error at exit)
        except OSError:   # pragma: no cover
            pass
        return EXIT_OK
    except (UsageError, DataError, ValueError, TypeError, OSError) as e:
        print(f"skso {args.command}: error: {e}", file=stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:   # pragma: no cover
        print(f"skso {args.command}: interrupted", file=stderr)
        return 130
