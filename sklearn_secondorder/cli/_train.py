"""``skso train``: the estimator of the command line, trained over chunks of the files.

``make_estimator`` builds the ``--model`` estimator with the command line's
parameters (size-dependent ones from the whole data); ``cmd_train`` scans the
files (or takes ``--classes``), streams them in chunks through
``partial_fit`` with progressive validation, and writes the model file.
"""
import ast
import os
import time
import warnings

import numpy as np

from .. import __version__
from ._files import DataError, detect_format, file_size, iter_blocks, text_size
from ._model import jsonable, save_model
from ._parser import EXIT_OK, MODELS, UsageError
from ._progress import Feedback, RunningLoss, chunk_scores
from ._stream import ScanResult, iter_chunks, make_featurizer, scan, shuffled


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
            # the sentences are cut once, for the validation and the training
            seqs = chunk.sequences() if kind == "tagger" else None
            if fitted and p == 0 and not args.no_progressive:
                progressive.add(*chunk_scores(est, kind, chunk, seqs)[:3])
            # (classes on the first call only: later calls are checked against it)
            first = {} if fitted else {"classes": classes}
            with warnings.catch_warnings():
                # scikit-learn's check of `classes` takes more than 20 labels
                # for a regression target: the labels here are the data's
                warnings.filterwarnings("ignore", message="The number of unique classes")
                if kind == "tagger":
                    est.partial_fit(*seqs, **first)
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
        "params": {k: jsonable(v) for k, v in est.get_params().items()},
        "featurizer": featurizer.to_dict(),
        "classes": [jsonable(c) for c in est.classes_],
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
