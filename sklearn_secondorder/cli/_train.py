"""``skso train``: the estimator of the command line, trained over chunks of the files.

``cmd_train`` runs four steps. ``plan_training`` checks the command line
against the data, scans the files (or takes ``--classes``) and builds the
featurizer; ``stream_training`` makes the ``--model`` estimator
(``make_estimator``: the command line's parameters, then the defaults that
depend on the whole data's size, ``estimator_params`` and its table
``SIZE_DEFAULTS``) and streams the chunks through ``partial_fit`` with
progressive validation (the chunks read and parsed on a reader thread,
ahead of the training, unless ``--no-reader-thread``); ``model_header``
describes the model file, which holds what prediction needs, or with
``--keep-state`` the whole training state, which ``--resume`` continues;
``summary_lines`` are the lines the command ends with.
"""
import ast
import os
import threading
import time
import warnings
from dataclasses import dataclass

import numpy as np

from .. import __version__
from ._deployed import deploy
from ._featurizers import featurizer_from_dict
from ._files import DataError, describe_format, detect_format, iter_blocks, text_size
from ._model import DEPLOYMENT, TRAINING_STATE, jsonable, load_model, save_model
from ._parser import EXIT_OK, MODEL_KINDS, ROW_KINDS, UsageError, model_class
from ._progress import Feedback, RunningLoss, chunk_scores, loss_name, row_scores_loss
from ._stream import (
    LabelNote,
    ReadAhead,
    ScanResult,
    iter_chunks,
    make_featurizer,
    scan,
    shuffled,
)

#: Chunks the reader thread parses ahead of the training: one, parsed while
#: the model trains on the chunk before it, so that memory holds three
#: chunks (the one trained on, the one waiting, the one being parsed). On
#: 3.6M rows of 2^20 hashed features in chunks of 100,000 rows, with blocks
#: parsed in place (``_stream._mapped_blocks``), the peak RSS of ``skso
#: train --model psa`` was 279 MB with one chunk ahead and 302 MB with two
#: (271 and 265 MB on the file's first tenth: with two, the peak grows with
#: the file). A chunk parses faster than it trains there, so one ahead
#: keeps the learner fed.
READ_AHEAD = 1


def _literal(text):
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


def explicit_params(args, cls):
    """The estimator parameters the command line sets (checked against ``cls``)."""
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
    jobs = getattr(args, "jobs", None)
    if jobs is not None:
        if "n_jobs" not in names:
            raise UsageError(f"--jobs {jobs}: --model {args.model} ({cls.__name__}) learns on "
                             "one thread (no n_jobs parameter); the models with n_jobs: "
                             f"{', '.join(_models_with_jobs())}")
        params["n_jobs"] = jobs
    unknown = sorted(set(params) - names)
    if unknown:
        raise UsageError(f"--model {args.model} ({cls.__name__}) has no parameter(s) "
                         f"{', '.join(unknown)}; its parameters: {', '.join(sorted(names))}")
    return params


def _models_with_jobs():
    """The ``--model`` names whose estimator has an ``n_jobs`` parameter."""
    return [m for m in sorted(MODEL_KINDS) if "n_jobs" in model_class(m)().get_params()]


def _paper_period(n, params):
    """PSA's period ``b`` for the whole data's ``n`` rows (the estimators'
    ``auto_period``: their ``partial_fit`` would size it from the first
    chunk only)."""
    return model_class("psa").auto_period(n)


def _sbm_eta(n, params):
    """SBM's ``eta = 1/n`` with ``n`` the whole data's rows (the estimator
    would take the first chunk's); None (the estimator's) for another
    ``update`` than the paper's."""
    return 1.0 / n if params.get("update", "paper") == "paper" else None


#: ``--model`` name -> the parameters it takes from the size of the whole
#: data, beyond the L2 strength ``alpha = 1/n`` of every model: parameter
#: name -> ``rule(n, params)``, with ``n`` the rows (sentences for the
#: taggers) and ``params`` those set so far; the rule's value is the default
#: (None: the estimator's own). A model added to ``MODEL_KINDS`` whose
#: estimator sizes a parameter from its first ``partial_fit`` chunk gets its
#: rule here.
SIZE_DEFAULTS = {
    "psa": {"period": _paper_period},
    "psa-regressor": {"period": _paper_period},
    "sbm": {"eta": _sbm_eta},
}


def estimator_params(model, given, n_rows, n_units=None):
    """The parameters of the ``--model`` estimator: ``given`` (the command
    line's), then the defaults that depend on the size of the whole data.

    The L2 strength defaults to ``alpha = 1/n`` (``n`` the rows, sentences
    for the taggers): the regularisation of ``LogisticRegression(C=1)``
    (CRFsuite's ``c2 = 0.5``), which weakens as the data grow, where a fixed
    ``alpha`` would over-regularise a stream of millions of rows. The other
    size-dependent defaults are ``SIZE_DEFAULTS[model]``.

    The regressors take the same rule: one pass of ``psa-regressor`` and
    ``sgd-regressor`` with ``alpha = 1/n`` gave the best test RMSE to 0.1%
    among ``alpha`` in {1e-3, ..., 1e-8} on every regression set of
    ``../shared/data`` (80/20 splits, seed 0): diamonds' log price 0.1723
    and 0.1757 (1e-3: 0.1734, 0.1766), its price 1118 and 1230 (1e-3: 1125,
    1239), flights' arrival delay (VW namespaces hashed to 2^20 columns)
    43.83 and 43.93 (1e-3: 43.84, 43.96). The paper's period of PSA
    (``b = 22`` on diamonds, 131 on flights) did as well as the best of
    ``b`` in {10, 30, 100, 300, 1000} there: log price 0.1723 (10: 0.1741,
    100: 0.1801), price 1118 (10: 1119, 100: 1336), flights 43.83 (10:
    43.87, 1000: 44.36).

    Parameters
    ----------
    model : str
        The ``--model`` name (a key of ``MODEL_KINDS``).
    given : dict
        The parameters the command line sets (``explicit_params``).
    n_rows : int
        Rows (tokens) of the whole data.
    n_units : int, default=None
        Sentences of the whole data (the taggers).

    Returns
    -------
    params : dict
        The estimator's constructor parameters.
    """
    kind = MODEL_KINDS[model][1]
    n = max(n_units if kind == "tagger" and n_units else n_rows, 1)
    params = dict(given)
    params.setdefault("random_state", 0)
    params.setdefault("alpha", 1.0 / n)
    for name, rule in SIZE_DEFAULTS.get(model, {}).items():
        if name not in params:
            value = rule(n, params)
            if value is not None:
                params[name] = value
    return params


def make_estimator(args, n, n_units=None):
    """The estimator of ``--model`` with the command line's parameters, the
    size-dependent ones set from the whole data (``estimator_params``).

    Parameters
    ----------
    args : argparse.Namespace
        The command line.
    n : int
        Rows (tokens) of the whole data.
    n_units : int, default=None
        Sentences of the whole data (the taggers).

    Returns
    -------
    est : estimator
        The unfitted estimator.
    kind : {'linear', 'regressor', 'tagger'}
        Its kind (``MODEL_KINDS``).
    """
    cls, kind = model_class(args.model), MODEL_KINDS[args.model][1]
    return cls(**estimator_params(args.model, explicit_params(args, cls), n, n_units)), kind


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


def _resumed(args, fmt):
    """The model ``--resume`` continues, checked against the command line
    and the data format before any work."""
    saved = load_model(args.resume)
    h = saved.header
    if saved.contents != TRAINING_STATE:
        raise UsageError(f"--resume {args.resume}: a deployment model (what prediction "
                         "needs, without the training state): continuing needs a model "
                         "written by 'skso train --keep-state'")
    if args.model is not None and args.model != h["model"]:
        raise UsageError(f"--resume {args.resume}: the model is --model {h['model']}, "
                         f"not {args.model}")
    args.model = h["model"]
    model_fmt = h["featurizer"]["format"]
    if fmt != model_fmt:
        raise UsageError(f"--resume {args.resume}: the model reads "
                         f"{describe_format(model_fmt)} files, the data are "
                         f"{describe_format(fmt)}")
    return saved


def _check_resumed_data(saved, scanned, featurizer):
    """Refuse data the resumed model cannot learn from: labels it has no
    weights for, svmlight features beyond its columns."""
    classes = getattr(saved.estimator, "classes_", None)
    if classes is not None and scanned.classes is not None:
        new = np.setdiff1d(scanned.classes, classes)
        if new.size:
            raise DataError(f"the data have label(s) {', '.join(map(str, new[:5].tolist()))} "
                            f"that the model (classes {', '.join(map(str, classes.tolist()))}) "
                            "has no weights for")
    if featurizer.format == "svmlight" and scanned.max_index >= 0:
        top = scanned.max_index + (1 if featurizer.zero_based else 0)
        if top > featurizer.n_features:
            raise DataError(f"the data have feature index {scanned.max_index}, beyond the "
                            f"model's {featurizer.n_features} features")


def _at_least_two(chunks, scores_chunks):
    """The chunks, the first cut in two halves when it is the only one and
    ``scores_chunks()`` (asked once the first chunk is read): a model that
    scores each chunk before training on it has none before the first, so
    that a file of one chunk would otherwise get no progressive validation.
    (A model that does not score chunks gets the chunks as they come: the
    second is not read ahead of the first's training.)"""
    it = iter(chunks)
    first = next(it, None)
    if first is None:
        return
    if not scores_chunks():
        yield first
        yield from it
        return
    second = next(it, None)
    chunk, block = first
    if second is None and chunk.n_units >= 2:
        half = chunk.n_units // 2
        yield chunk.take(np.arange(half)), block
        yield chunk.take(np.arange(half, chunk.n_units)), block
        return
    yield first
    if second is not None:
        yield second
        yield from it


def _import_in_background(name):
    """Import the module of ``--model``'s estimator on a thread, while the
    files are scanned: scikit-learn's import (with SciPy's statistics)
    takes about a second, as long as the scan of a few million rows.
    ``model_class`` then finds it imported (or, after a failure here,
    imports it again and raises)."""
    def load():
        try:
            model_class(name)
        except BaseException:       # (raised again, in order, by the main thread)
            pass
    threading.Thread(target=load, name="skso-import", daemon=True).start()


@dataclass
class TrainingPlan:
    """What ``skso train`` will do, decided before the first chunk: the files,
    their format and scan, the featurizer, the classes, the resumed model.

    Attributes
    ----------
    args : argparse.Namespace
        The command line (``chunk_size`` and ``model`` filled in).
    paths : list of str
        The data files.
    fmt : {'svmlight', 'vw', 'conll'}
        Their format.
    kind : {'linear', 'regressor', 'tagger'}
        The kind of ``--model``.
    saved : SavedModel or None
        The model ``--resume`` continues.
    scanned : ScanResult
        The scan of the files (or what ``--classes`` gives).
    featurizer : featurizer
        The reader of the rows (the resumed model's, with ``--resume``).
    classes : ndarray or None
        All the labels (None for a regressor).
    texts : list of int
        Bytes of text of each file (the progress's total without a scan).
    t_scan : float
        Seconds of the scan.
    """

    args: object
    paths: list
    fmt: str
    kind: str
    saved: object
    scanned: ScanResult
    featurizer: object
    classes: np.ndarray
    texts: list
    t_scan: float

    @property
    def unit(self):
        """What a unit of the data is: ``'sentences'`` (CoNLL) or ``'rows'``."""
        return "sentences" if self.fmt == "conll" else "rows"


@dataclass
class TrainingResult:
    """What the stream of chunks left: the trained estimator and its figures.

    Attributes
    ----------
    est : estimator
        The trained estimator.
    kind : {'linear', 'regressor', 'tagger'}
        Its kind.
    rows, units : int
        Rows (tokens) and rows or sentences trained on, all passes.
    progressive : RunningLoss
        Progressive validation's sums (pass 1).
    seconds : float
        Seconds of training (from the estimator's making).
    unscored : int
        Rows (tokens) of the first chunk that progressive validation leaves
        out: a model that scores each chunk before training on it has none
        before the first (0 for ``psa``, which scores each row before its
        own update, and for a resumed model).
    """

    est: object
    kind: str
    rows: int
    units: int
    progressive: RunningLoss
    seconds: float
    unscored: int = 0


def cmd_train(args, out):
    """``skso train``: plan, stream the chunks, write the model, summarise.

    Parameters
    ----------
    args : argparse.Namespace
        The parsed command line (``_parser.build_parser``'s ``train``).
    out : file-like
        Where the progress and the summary go (standard error).

    Returns
    -------
    code : int
        ``EXIT_OK``; bad data or command lines raise ``DataError`` /
        ``UsageError`` (``main`` turns them into exit code 2).
    """
    plan = plan_training(args)
    fb = _open_feedback(plan, out)
    result = stream_training(plan, fb)
    header = model_header(plan, result)
    model = (result.est if args.keep_state else
             deploy(result.est, result.kind, plan.featurizer.n_features))
    save_model(args.out, model, header)
    if not fb.quiet:
        for line in summary_lines(plan, result, header):
            fb.write(line)
    return EXIT_OK


# ---- the plan: the command line and the scan -> what to train --------------------------
def plan_training(args):
    """Check the command line against the data, scan the files, build the featurizer.

    Every check that can fail on the command line or the data (formats,
    the model's kind, the resumed model, a single label) runs here, before
    any training.

    Parameters
    ----------
    args : argparse.Namespace
        The command line; ``args.model`` is set from a resumed model and
        ``args.chunk_size`` from the number of features when not given.

    Returns
    -------
    plan : TrainingPlan
        The files, their scan, the featurizer, the classes.

    Raises
    ------
    UsageError
        A command line that does not fit the data or the resumed model.
    DataError
        Bad data (a bad line, a single label, labels a resumed model lacks).
    """
    if not args.resume:
        # (a resumed model's unpickling imports the same modules on this
        # thread: two threads importing one module graph could each see the
        # other's half-imported modules)
        _import_in_background(args.model)
    paths = [str(p) for p in args.data]
    fmt = _resolve_format(args, paths)
    saved = _resumed(args, fmt) if args.resume else None
    kind = MODEL_KINDS[args.model][1]
    if kind == "tagger" and fmt != "conll":
        raise UsageError(f"the sequence taggers read CoNLL files (sentences), not "
                         f"{describe_format(fmt)} rows")
    if kind in ROW_KINDS and fmt == "conll":
        raise UsageError(f"--model {args.model} learns from rows (svmlight or Vowpal Wabbit "
                         "files), not CoNLL sentences: use a tagger (psa-tagger, asf-tagger, "
                         "sgd-tagger)")
    if kind == "regressor" and args.classes is not None:
        raise UsageError(f"--classes: --model {args.model} learns a real-valued target, "
                         "which has no classes (the files are scanned for their rows)")
    t0 = time.perf_counter()
    # (a regressor needs only to know whether the labels are two classes)
    scanned = (scan(paths, fmt, read_ahead=not args.no_reader_thread,
                    max_labels=2 if kind == "regressor" else None)
               if args.classes is None else _no_scan(args, paths, fmt))
    check_label_kind(args.model, kind, scanned, paths)
    if saved is None:
        featurizer = make_featurizer(fmt, scanned, hash_bits=args.hash_bits,
                                     zero_based=args.zero_based, template=args.template)
    else:
        featurizer = featurizer_from_dict(saved.header["featurizer"], training=True)
        _check_resumed_data(saved, scanned, featurizer)
    t_scan = time.perf_counter() - t0
    if kind == "regressor":
        classes = None
    else:
        classes = scanned.classes if saved is None else saved.estimator.classes_
        if classes.size < 2:
            raise DataError(f"the data have a single label ({classes[0]!r}): nothing to "
                            "learn")
    if args.chunk_size is None:
        args.chunk_size = max(10_000, min(100_000, featurizer.n_features // 10))
    return TrainingPlan(args, paths, fmt, kind, saved, scanned, featurizer, classes,
                        [text_size(p) for p in paths], t_scan)


def _models_of(kind):
    """The ``--model`` names of ``kind``, for the messages."""
    return ", ".join(m for m, (_, k) in MODEL_KINDS.items() if k == kind)


def check_label_kind(model, kind, scanned, paths):
    """Refuse labels of the other kind, in one line, before any training: real
    (non-integer) labels given to a classifier, or class labels (integers,
    two values at most) given to a regressor.

    Parameters
    ----------
    model : str
        The ``--model`` name.
    kind : {'linear', 'regressor', 'tagger'}
        Its kind.
    scanned : ScanResult
        The scan of the files (``labels`` None without a scan: no check).
    paths : list of str
        The data files.

    Raises
    ------
    UsageError
        Labels the model cannot learn from.
    """
    note = scanned.labels
    if note is None or kind == "tagger":
        return
    if kind == "linear" and note.real is not None:
        path, value = note.real
        raise UsageError(f"{path}: the labels are real numbers (e.g. {value:g}), not classes: "
                         f"--model {model} is a classifier; train a regressor "
                         f"({_models_of('regressor')})")
    if kind == "regressor" and note.real is None and not note.many \
            and scanned.classes.size <= 2:
        values = " and ".join(f"{c:g}" for c in scanned.classes)
        where = paths[0] if len(paths) == 1 else "the files"
        raise UsageError(f"{where}: the labels are only {values}, class labels: --model "
                         f"{model} learns a real-valued target; train a classifier "
                         f"({_models_of('linear')})")


def _open_feedback(plan, out):
    """The progress display, its first line written (the model and the data)."""
    args, scanned, fmt = plan.args, plan.scanned, plan.fmt
    if scanned.n_rows:
        fb = Feedback(args.progress, scanned.n_rows * args.passes, "rows", out)
    else:
        fb = Feedback(args.progress, sum(plan.texts) * args.passes, "bytes", out)
    size = (f"{scanned.n_rows:,} rows" if scanned.n_rows else "rows not scanned")
    fb.write(f"skso train: {args.model} ({MODEL_KINDS[args.model][0]}) on {size}"
             + (f" ({scanned.n_units:,} sentences)" if fmt == "conll" and scanned.n_rows
                else "")
             + f", {plan.featurizer.n_features:,} features, "
             + ("a real-valued target" if plan.classes is None
                else f"{plan.classes.size} classes")
             + f", {fmt}; scan {plan.t_scan:.2f}s"
             + (f"; resuming {args.resume}" if plan.saved is not None else ""))
    return fb


# ---- the stream: the chunks through partial_fit ---------------------------------------
class _Stream:
    """The running state of ``stream_training``: the estimator (made at the
    first chunk when the rows were not scanned), the rows so far,
    progressive validation, the PSA stream of calls."""

    def __init__(self, plan, fb):
        self.plan, self.fb = plan, fb
        self.est, self.kind = None, plan.kind
        if plan.saved is not None:
            self.est = plan.saved.estimator
            self.est.set_params(**explicit_params(plan.args, model_class(plan.args.model)))
        self.fitted = plan.saved is not None
        self.progressive = RunningLoss()
        #: rows of the first chunk that progressive validation leaves out
        #: (a model that scores chunks: none precedes the first)
        self.unscored = 0
        self.rows = self.units = 0
        self.stream = None
        self.header_written = False
        self.t_train = fb.start = time.perf_counter()

    def make_estimator(self):
        """Make the estimator from the scanned size; the training time starts now."""
        scanned = self.plan.scanned
        self.est, self.kind = make_estimator(self.plan.args, scanned.n_rows, scanned.n_units)
        self.t_train = self.fb.start = time.perf_counter()

    def estimate_and_make(self, chunk, block):
        """No scan: the rows (sentences) of the whole data estimated from the
        first block's rows per byte, then the estimator made."""
        scanned = self.plan.scanned
        ratio = sum(self.plan.texts) / max(block.end, 1)
        scanned.n_rows = max(1, int(round(chunk.n_rows * ratio)))
        scanned.n_units = max(1, int(round(chunk.n_units * ratio)))
        self.est, self.kind = make_estimator(self.plan.args, scanned.n_rows, scanned.n_units)
        self.fb.write(f"(about {scanned.n_rows:,} rows, estimated from the first chunk)")

    def will_stream(self):
        """Whether the estimator trains as a stream of calls (``_streams``),
        asked of its class and parameters before it is made."""
        if self.est is not None:
            return _streams(self.est, self.kind)
        args = self.plan.args
        cls = model_class(args.model)
        return (self.kind in ROW_KINDS and hasattr(cls, "begin_stream")
                and not explicit_params(args, cls).get("verbose", cls().verbose))

    def write_table_header(self, chunk):
        """The loss's name, what is scored, and the progressive-validation
        table's header, once (before the first chunk, ``chunk``)."""
        if self.header_written or self.plan.args.no_progressive:
            return
        what = loss_name(self.est, self.kind, _n_classes(self.plan))
        if self.stream is not None:
            what += "; each row scored just before its own update"
        elif self.fitted:
            what += "; each chunk scored before training on it"
        else:
            what += ("; each chunk scored before training on it, "
                     + unscored_note(chunk.n_rows, self.kind))
        self.fb.write(f"loss: {what}")
        errors = (f"{'avg err':>8} {'since last':>10} " if self.kind != "regressor"
                  else "")
        self.fb.write(f"{'avg loss':>10} {'since last':>10} {errors}"
                      f"{'rows':>11} {'rows/s':>10} {'done':>6} {'left':>8}")
        self.header_written = True

    def train_on(self, chunk, block, p):
        """One chunk of pass ``p``: scored (pass 1, a fitted model), trained
        on, counted, reported."""
        args, est, kind = self.plan.args, self.est, self.kind
        # (a stream scores each row before its own update, the first chunk's
        # too; chunks are scored before training on them, but no model
        # precedes the first)
        scored = (self.fitted or self.stream is not None) and p == 0 \
            and not args.no_progressive
        if not scored and p == 0 and not args.no_progressive:
            self.unscored += chunk.n_rows
        if scored and self.stream is None:
            self.progressive.add(*chunk_scores(est, kind, chunk)[:3])
        # (classes on the first call only: later calls are checked against it)
        first = {} if self.fitted or kind == "regressor" else {"classes": self.plan.classes}
        with warnings.catch_warnings():
            # scikit-learn's check of `classes` takes more than 20 labels
            # for a regression target: the labels here are the data's
            warnings.filterwarnings("ignore", message="The number of unique classes")
            if kind == "tagger":
                est.partial_fit(*chunk.sequences(), **first)
            else:
                est.partial_fit(chunk.X, chunk.y, sample_weight=chunk.w, **first)
        if scored and self.stream is not None:
            self.progressive.add(*row_scores_loss(est, kind, chunk,
                                                  self.stream.scores(chunk.n_rows))[:3])
        self.fitted = True
        self.rows += chunk.n_rows
        self.units += chunk.n_units
        fb, texts = self.fb, self.plan.texts
        if fb.unit == "rows":
            fb.update(self.rows, self.rows)
        else:
            i = self.plan.paths.index(block.path)
            fb.update(p * sum(texts) + sum(texts[:i]) + block.end, self.rows)
        if fb.due(self.rows) and self.progressive.last_w and not args.no_progressive:
            _report(fb, self.progressive, self.rows, self.t_train, kind)


def _pass_chunks(plan, p, fitted, rng, scores_chunks):
    """The chunks of pass ``p`` (shuffled through the buffer, if any) and the
    reader thread that reads them (None with ``--no-reader-thread``); a
    file of one chunk cut in two for a model that ``scores_chunks()``."""
    args = plan.args
    chunks = iter_chunks(plan.paths, plan.featurizer, args.chunk_size,
                         first_chunk_size=None if fitted else args.first_chunk_size,
                         keep_text=False)
    if args.shuffle_buffer > 0:
        chunks = shuffled(chunks, args.shuffle_buffer, rng)
    # the reader thread reads, parses and shuffles (the shuffle's rng is
    # used by it alone, one pass after the other): the same chunks in the
    # same order as without it; a bad line raises here, before any model
    # file is written
    reader = None if args.no_reader_thread else ReadAhead(chunks, READ_AHEAD)
    if reader is not None:
        chunks = reader
    if p == 0 and not fitted and not args.no_progressive:
        chunks = _at_least_two(chunks, scores_chunks)
    return chunks, reader


def stream_training(plan, fb):
    """Train over the chunks of the files, ``--passes`` times, with
    progressive validation on pass 1.

    Parameters
    ----------
    plan : TrainingPlan
        ``plan_training``'s.
    fb : Feedback
        The progress display (the progressive-validation table goes there).

    Returns
    -------
    result : TrainingResult
        The trained estimator, the rows, progressive validation's sums.

    Raises
    ------
    DataError
        A bad line (raised by the reader, after the chunks before it) or a
        row without a label.
    """
    args, scanned = plan.args, plan.scanned
    rng = np.random.default_rng(0 if args.random_state is None else args.random_state)
    s = _Stream(plan, fb)
    for p in range(args.passes):
        chunks, reader = _pass_chunks(plan, p, s.fitted, rng,
                                      lambda: not s.will_stream())
        try:
            if s.est is None and scanned.n_rows:
                # (made now, the reader thread started: it parses the first
                # chunks while the estimator's module is imported)
                s.make_estimator()
            for chunk, block in chunks:
                if chunk.y is None or (chunk.y.dtype.kind == "f" and np.isnan(chunk.y).any()):
                    raise DataError(f"{block.path}, lines from {block.first_line}: a row "
                                    "without a label (training needs labels)")
                if s.est is None:
                    # (no scan: the first chunk's labels checked instead)
                    check_label_kind(args.model, s.kind, ScanResult(
                        0, 0, None, labels=LabelNote().note(chunk.y, block.path)),
                        plan.paths)
                    s.estimate_and_make(chunk, block)
                if s.stream is None and _streams(s.est, s.kind):
                    s.stream = s.est.begin_stream()
                s.write_table_header(chunk)
                s.train_on(chunk, block, p)
        finally:
            if reader is not None:      # (an error in training, Ctrl-C: stop it now)
                reader.close()
    if s.stream is not None:
        s.est.end_stream()
    if s.progressive.last_w:           # the rows since the last report (small files too)
        _report(fb, s.progressive, s.rows, s.t_train, s.kind)
    fb.close()
    return TrainingResult(s.est, s.kind, s.rows, s.units, s.progressive,
                          time.perf_counter() - s.t_train, s.unscored)


# ---- the model file's header and the summary ------------------------------------------
def model_header(plan, result):
    """The model file's header (``_model``'s format): the estimator, its
    parameters, the featurizer, the classes, how it was trained.

    Parameters
    ----------
    plan : TrainingPlan
        ``plan_training``'s.
    result : TrainingResult
        ``stream_training``'s.

    Returns
    -------
    header : dict
        Plain values only (``jsonable``).
    """
    args, est, progressive = plan.args, result.est, result.progressive
    params = est.get_params()
    training = {"files": plan.paths, "rows": result.rows, plan.unit: result.units,
                "passes": args.passes, "scanned": args.classes is None,
                "seconds": result.seconds, "scan_seconds": plan.t_scan,
                "alpha": jsonable(params.get("alpha")),
                "alpha_rule": ("1/n" if plan.saved is None and not _alpha_given(args)
                               else "given"),
                "progressive_loss": (progressive.loss / progressive.w if progressive.w
                                     else None),
                "progressive_error": (progressive.err / progressive.w
                                      if progressive.w and result.kind != "regressor"
                                      else None),
                "progressive_rows": progressive.w, "progressive_unscored_rows": result.unscored,
                "loss": loss_name(est, result.kind, _n_classes(plan))}
    if plan.saved is not None:
        training["resumed_from"] = {"file": args.resume,
                                    "training": plan.saved.header["training"]}
    return {
        "package_version": __version__, "model": args.model,
        "estimator": type(est).__name__, "kind": result.kind,
        "params": {k: jsonable(v) for k, v in params.items()},
        "featurizer": plan.featurizer.to_dict(),
        "classes": [jsonable(c) for c in getattr(est, "classes_", ())],
        "training": training,
        "contents": TRAINING_STATE if args.keep_state else DEPLOYMENT,
    }


def summary_lines(plan, result, header):
    """The lines ``skso train`` ends with: rows and speed, the L2 strength
    and where it comes from, progressive validation, the model file.

    Parameters
    ----------
    plan : TrainingPlan
        ``plan_training``'s.
    result : TrainingResult
        ``stream_training``'s.
    header : dict
        ``model_header``'s (the model file is written).

    Returns
    -------
    lines : list of str
    """
    args, scanned, progressive = plan.args, plan.scanned, result.progressive
    rows, seconds = result.rows, result.seconds
    params = result.est.get_params()
    lines = [f"finished: {rows:,} rows in {args.passes} pass(es), {seconds:.2f}s "
             f"({rows / max(seconds, 1e-9):,.0f} rows/s; scan {plan.t_scan:.2f}s)"]
    if "alpha" in params:
        n_reg = "sentences" if result.kind == "tagger" else "rows"
        if header["training"]["alpha_rule"] == "1/n":
            n = scanned.n_units if result.kind == "tagger" else scanned.n_rows
            how = "from the scan" if args.classes is None else "estimated"
            lines.append(f"L2: alpha = 1/n = {params['alpha']:.4g} (n = {n:,} {n_reg}, "
                         f"{how}; --alpha sets it)")
        else:
            lines.append(f"L2: alpha = {params['alpha']:.4g}"
                         + (" (the resumed model's)" if plan.saved is not None
                            and args.alpha is None else " (given)"))
    if progressive.w:
        left_out = (f"; {unscored_note(result.unscored, result.kind)}"
                    if result.unscored else "")
        avg = progressive.loss / progressive.w
        if result.kind != "regressor":
            figures = f"average loss {avg:.6f}, error {progressive.err / progressive.w:.4f}"
        elif params["loss"] == "squared_error":
            figures = f"average loss {avg:.6g} (squared error; RMSE {np.sqrt(avg):.6g})"
        else:
            figures = f"average loss {avg:.6g} ({params['loss']})"
        lines.append(f"progressive validation (pass 1, {progressive.w:,.0f} rows{left_out}): "
                     + figures)
    what = ("with the training state, for --resume" if args.keep_state else
            "for prediction; --keep-state keeps the training state, for --resume")
    lines.append(f"model: {args.out} ({os.path.getsize(args.out):,} bytes): {what}")
    return lines


def unscored_note(n_rows, kind):
    """What progressive validation leaves out, and why: the ``n_rows`` rows
    (tokens) of the first chunk of a model that scores chunks."""
    rows = "tokens" if kind == "tagger" else "rows"
    starts = "centred columns, step sizes" if kind == "regressor" else "classes, step size"
    return (f"not the first chunk's {n_rows:,} {rows}: no model precedes it (its "
            f"partial_fit starts the model: {starts})")


def _streams(est, kind):
    """Whether ``est`` trains as a stream of calls (``PSAClassifier.begin_stream``):
    each row scored before its own update (progressive validation from the
    pass itself, as Vowpal Wabbit's), the model brought to time and exported
    once at the end instead of after every chunk."""
    return kind in ROW_KINDS and hasattr(est, "begin_stream") and not est.verbose


def _alpha_given(args):
    return args.alpha is not None or any(item.partition("=")[0].strip() == "alpha"
                                         for item in args.param)


def _n_classes(plan):
    return 0 if plan.classes is None else plan.classes.size


def _report(fb, progressive, rows, t_train, kind):
    a, b, c, d = progressive.row()
    elapsed = max(time.perf_counter() - t_train, 1e-9)
    pct, left = fb.eta()
    # (a regressor's loss is in the target's units squared: any magnitude)
    losses = f"{a:10.6f} {b:10.6f} " if kind != "regressor" else f"{a:10.6g} {b:10.6g} "
    errors = f"{c:8.4f} {d:10.4f} " if kind != "regressor" else ""
    fb.write(f"{losses}{errors}{rows:11,d} "
             f"{rows / elapsed:10,.0f} {pct:>6} {left:>8}")
