"""``skso train``: the estimator of the command line, trained over chunks of the files.

``make_estimator`` builds the ``--model`` estimator with the command line's
parameters (size-dependent ones, the L2 strength among them, from the whole
data); ``cmd_train`` scans the files (or takes ``--classes``), streams them
in chunks through ``partial_fit`` with progressive validation (the chunks
read and parsed on a reader thread, ahead of the training, unless
``--no-reader-thread``), and writes the model file: what prediction needs,
or with ``--keep-state`` the whole training state, which ``--resume``
continues.
"""
import ast
import os
import threading
import time
import warnings

import numpy as np

from .. import __version__
from ._deployed import deploy
from ._featurizers import featurizer_from_dict
from ._files import DataError, describe_format, detect_format, iter_blocks, text_size
from ._model import DEPLOYMENT, TRAINING_STATE, jsonable, load_model, save_model
from ._parser import EXIT_OK, MODEL_KINDS, UsageError, model_class
from ._progress import Feedback, RunningLoss, chunk_scores, linear_scores_loss, loss_name
from ._stream import ReadAhead, ScanResult, iter_chunks, make_featurizer, scan, shuffled

#: Chunks the reader thread parses ahead of the training: two keep the
#: learner fed through a slow chunk, and memory at a few chunks.
READ_AHEAD = 2


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


def make_estimator(args, n, n_units=None):
    """The estimator of ``--model`` with the command line's parameters, the
    size-dependent ones set from the whole data: ``n`` rows (tokens),
    ``n_units`` sentences for the taggers.

    The L2 strength defaults to ``alpha = 1/n`` (sentences for the taggers):
    the regularisation of ``LogisticRegression(C=1)`` (CRFsuite's ``c2 =
    0.5``), which weakens as the data grow, where a fixed ``alpha`` would
    over-regularise a stream of millions of rows.

    Returns
    -------
    est : estimator
    kind : {'linear', 'tagger'}
    """
    cls, kind = model_class(args.model), MODEL_KINDS[args.model][1]
    params = explicit_params(args, cls)
    params.setdefault("random_state", 0)
    if "alpha" not in params:
        params["alpha"] = 1.0 / max(n_units if kind == "tagger" and n_units else n, 1)
    if args.model == "psa" and "period" not in params:
        # the paper's guideline (Sec. 5.1.4), b ~ 0.5 |D| / 1000, from the
        # whole file: the estimator would take |D| from the first chunk only
        params["period"] = max(10, int(round(0.5 * n / 1000)))
    if args.model == "sbm" and "eta" not in params and params.get("update", "paper") == "paper":
        params["eta"] = 1.0 / n          # SBM's default eta = 1/n, n the whole data
    return cls(**params), kind


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
    classes = saved.estimator.classes_
    if scanned.classes is not None:
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


def _at_least_two(chunks):
    """The chunks, the first cut in two halves when it is the only one: the
    first chunk trains (and calibrates) the model, so a file of one chunk
    would otherwise get no progressive validation."""
    it = iter(chunks)
    first = next(it, None)
    if first is None:
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
    files are scanned: scikit-learn's import (with SciPy's statistics, and
    pandas when installed) takes about a second, as long as the scan of a
    few million rows. ``model_class`` then finds it imported (or, after a
    failure here, imports it again and raises)."""
    def load():
        try:
            model_class(name)
        except BaseException:       # (raised again, in order, by the main thread)
            pass
    threading.Thread(target=load, name="skso-import", daemon=True).start()


def cmd_train(args, out):
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
    if kind == "linear" and fmt == "conll":
        raise UsageError(f"--model {args.model} learns from rows (svmlight or Vowpal Wabbit "
                         "files), not CoNLL sentences: use a tagger (psa-tagger, asf-tagger, "
                         "sgd-tagger)")
    t0 = time.perf_counter()
    scanned = (scan(paths, fmt, read_ahead=not args.no_reader_thread) if args.classes is None
               else _no_scan(args, paths, fmt))
    if saved is None:
        featurizer = make_featurizer(fmt, scanned, hash_bits=args.hash_bits,
                                     zero_based=args.zero_based, template=args.template)
    else:
        featurizer = featurizer_from_dict(saved.header["featurizer"], training=True)
        _check_resumed_data(saved, scanned, featurizer)
    t_scan = time.perf_counter() - t0
    classes = scanned.classes if saved is None else saved.estimator.classes_
    if classes.size < 2:
        raise DataError(f"the data have a single label ({classes[0]!r}): nothing to learn")
    texts = [text_size(p) for p in paths]
    if scanned.n_rows:
        fb = Feedback(args.progress, scanned.n_rows * args.passes, "rows", out)
    else:
        fb = Feedback(args.progress, sum(texts) * args.passes, "bytes", out)
    unit = "sentences" if fmt == "conll" else "rows"
    size = (f"{scanned.n_rows:,} rows" if scanned.n_rows else "rows not scanned")
    fb.write(f"skso train: {args.model} ({MODEL_KINDS[args.model][0]}) on {size}"
             + (f" ({scanned.n_units:,} sentences)" if fmt == "conll" and scanned.n_rows
                else "")
             + f", {featurizer.n_features:,} features, {classes.size} classes, "
               f"{fmt}; scan {t_scan:.2f}s"
             + (f"; resuming {args.resume}" if saved is not None else ""))
    if args.chunk_size is None:
        args.chunk_size = max(10_000, min(100_000, featurizer.n_features // 10))
    est = None
    if saved is not None:
        est = saved.estimator
        est.set_params(**explicit_params(args, model_class(args.model)))
    rng = np.random.default_rng(0 if args.random_state is None else args.random_state)
    progressive = RunningLoss()
    rows = units = 0
    fitted = saved is not None
    stream = None
    t_train = time.perf_counter()
    fb.start = t_train
    header_written = False
    for p in range(args.passes):
        chunks = iter_chunks(paths, featurizer, args.chunk_size,
                             first_chunk_size=None if fitted else args.first_chunk_size)
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
            chunks = _at_least_two(chunks)
        try:
            if est is None and scanned.n_rows:
                # (made now, the reader thread started: it parses the first
                # chunks while the estimator's module is imported; the
                # training time starts with the estimator)
                est, kind = make_estimator(args, scanned.n_rows, scanned.n_units)
                t_train = fb.start = time.perf_counter()
            for chunk, block in chunks:
                if chunk.y is None or (chunk.y.dtype.kind == "f" and np.isnan(chunk.y).any()):
                    raise DataError(f"{block.path}, lines from {block.first_line}: a row "
                                    "without a label (training needs labels)")
                if est is None:
                    # no scan: the rows (sentences) of the whole data
                    # estimated from this first block's rows per byte
                    ratio = sum(texts) / max(block.end, 1)
                    scanned.n_rows = max(1, int(round(chunk.n_rows * ratio)))
                    scanned.n_units = max(1, int(round(chunk.n_units * ratio)))
                    est, kind = make_estimator(args, scanned.n_rows, scanned.n_units)
                    fb.write(f"(about {scanned.n_rows:,} rows, estimated from the first "
                             "chunk)")
                if stream is None and _streams(est, kind):
                    stream = est._begin_stream()
                if not header_written and not args.no_progressive:
                    fb.write(f"loss: {loss_name(est, kind, classes.size)}")
                    fb.write(f"{'avg loss':>10} {'since last':>10} {'avg err':>8} "
                             f"{'since last':>10} {'rows':>11} {'rows/s':>10} {'done':>6} "
                             f"{'left':>8}")
                    header_written = True
                scored = fitted and p == 0 and not args.no_progressive
                if scored and stream is None:
                    progressive.add(*chunk_scores(est, kind, chunk)[:3])
                # (classes on the first call only: later calls are checked against it)
                first = {} if fitted else {"classes": classes}
                with warnings.catch_warnings():
                    # scikit-learn's check of `classes` takes more than 20 labels
                    # for a regression target: the labels here are the data's
                    warnings.filterwarnings("ignore",
                                            message="The number of unique classes")
                    if kind == "tagger":
                        est.partial_fit(*chunk.sequences(), **first)
                    else:
                        est.partial_fit(chunk.X, chunk.y, sample_weight=chunk.w, **first)
                if scored and stream is not None:
                    progressive.add(*linear_scores_loss(est, chunk,
                                                        stream.scores(chunk.n_rows))[:3])
                fitted = True
                rows += chunk.n_rows
                units += chunk.n_units
                if fb.unit == "rows":
                    fb.update(rows, rows)
                else:
                    i = paths.index(block.path)
                    fb.update(p * sum(texts) + sum(texts[:i]) + block.end, rows)
                if fb.due(rows) and progressive.last_w and not args.no_progressive:
                    _report(fb, progressive, rows, t_train)
        finally:
            if reader is not None:      # (an error in training, Ctrl-C: stop it now)
                reader.close()
    if stream is not None:
        est._end_stream()
    if progressive.last_w:           # the rows since the last report (small files too)
        _report(fb, progressive, rows, t_train)
    fb.close()
    seconds = time.perf_counter() - t_train
    params = est.get_params()
    previous = saved.header["training"] if saved is not None else None
    training = {"files": paths, "rows": rows, unit: units, "passes": args.passes,
                "scanned": args.classes is None, "seconds": seconds, "scan_seconds": t_scan,
                "alpha": jsonable(params.get("alpha")),
                "alpha_rule": "1/n" if saved is None and not _alpha_given(args) else "given",
                "progressive_loss": progressive.loss / progressive.w if progressive.w
                else None,
                "progressive_error": progressive.err / progressive.w if progressive.w
                else None,
                "loss": loss_name(est, kind, classes.size)}
    if previous is not None:
        training["resumed_from"] = {"file": args.resume, "training": previous}
    header = {
        "package_version": __version__, "model": args.model,
        "estimator": type(est).__name__, "kind": kind,
        "params": {k: jsonable(v) for k, v in params.items()},
        "featurizer": featurizer.to_dict(),
        "classes": [jsonable(c) for c in est.classes_],
        "training": training,
        "contents": TRAINING_STATE if args.keep_state else DEPLOYMENT,
    }
    model = est if args.keep_state else deploy(est, kind, featurizer.n_features)
    save_model(args.out, model, header)
    if fb.quiet:
        return EXIT_OK
    summary = [f"finished: {rows:,} rows in {args.passes} pass(es), {seconds:.2f}s "
               f"({rows / max(seconds, 1e-9):,.0f} rows/s; scan {t_scan:.2f}s)"]
    if "alpha" in params:
        n_reg = "sentences" if kind == "tagger" else "rows"
        if training["alpha_rule"] == "1/n":
            n = scanned.n_units if kind == "tagger" else scanned.n_rows
            how = "from the scan" if args.classes is None else "estimated"
            summary.append(f"L2: alpha = 1/n = {params['alpha']:.4g} (n = {n:,} {n_reg}, "
                           f"{how}; --alpha sets it)")
        else:
            summary.append(f"L2: alpha = {params['alpha']:.4g}"
                           + (" (the resumed model's)" if saved is not None
                              and args.alpha is None else " (given)"))
    if progressive.w:
        summary.append(f"progressive validation (pass 1, {progressive.w:,.0f} rows): "
                       f"average loss {progressive.loss / progressive.w:.6f}, "
                       f"error {progressive.err / progressive.w:.4f}")
    what = ("with the training state, for --resume" if args.keep_state else
            "for prediction; --keep-state keeps the training state, for --resume")
    summary.append(f"model: {args.out} ({os.path.getsize(args.out):,} bytes): {what}")
    for line in summary:
        fb.write(line)
    return EXIT_OK


def _streams(est, kind):
    """Whether ``est`` trains as a stream of calls (``PSAClassifier._begin_stream``):
    each row scored before its own update (progressive validation from the
    pass itself, as Vowpal Wabbit's), the model brought to time and exported
    once at the end instead of after every chunk."""
    return kind == "linear" and hasattr(est, "_begin_stream") and not est.verbose


def _alpha_given(args):
    return args.alpha is not None or any(item.partition("=")[0].strip() == "alpha"
                                         for item in args.param)


def _report(fb, progressive, rows, t_train):
    a, b, c, d = progressive.row()
    elapsed = max(time.perf_counter() - t_train, 1e-9)
    pct, left = fb.eta()
    fb.write(f"{a:10.6f} {b:10.6f} {c:8.4f} {d:10.4f} {rows:11,d} "
             f"{rows / elapsed:10,.0f} {pct:>6} {left:>8}")
