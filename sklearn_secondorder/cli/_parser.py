"""The ``skso`` command line: its ``--model`` names, exit codes and argument parser.

``MODEL_KINDS`` maps a ``--model`` name to its estimator's class name and
kind (``model_class`` imports the class; ``ROW_KINDS`` are the kinds that
learn from rows); ``build_parser`` builds the
``argparse`` parser of ``train``, ``predict``, ``evaluate`` and ``info``;
``UsageError`` is a bad command line (exit code 2). This module imports
neither NumPy nor scikit-learn, so that a bad command line fails at once.
"""
import argparse
import os

from .. import __version__

#: The data formats (``_files`` reads them).
FORMATS = ("svmlight", "vw", "conll")

#: The built-in CoNLL templates (``_templates.BUILTIN_TEMPLATES``).
TEMPLATE_NAMES = ("chunking", "words")

#: ``--model`` name -> (estimator class name, kind): ``'linear'`` (a
#: classifier of rows), ``'regressor'`` (a real-valued target of rows) or
#: ``'tagger'`` (labels of the tokens of CoNLL sentences).
MODEL_KINDS = {
    "psa": ("PSAClassifier", "linear"),
    "sgdqn": ("SGDQNLinearSVC", "linear"),
    "sbm": ("SBMLogisticRegression", "linear"),
    "sgd": ("PlainSGDClassifier", "linear"),
    "psa-regressor": ("PSARegressor", "regressor"),
    "sgd-regressor": ("PlainSGDRegressor", "regressor"),
    "psa-tagger": ("PSASequenceTagger", "tagger"),
    "asf-tagger": ("ASFSequenceTagger", "tagger"),
    "sgd-tagger": ("SGDSequenceTagger", "tagger"),
}

#: The kinds of model that learn from rows (svmlight or Vowpal Wabbit files).
ROW_KINDS = ("linear", "regressor")

#: The regressors' losses (``--loss``), as ``PSARegressor``'s ``loss``.
REGRESSION_LOSS_NAMES = ("squared_error", "huber", "epsilon_insensitive",
                         "squared_epsilon_insensitive", "quantile")


#: ``skso train --help``'s explanation of the progress table.
PROGRESS_TABLE_HELP = """\
the progress table (progressive validation of pass 1, a line at doubling row
counts and at every tenth of the run; --no-progressive leaves it out):
  avg loss    the average loss of the rows scored so far, each scored by the
              model before training on it (the 'loss:' line above the table
              names the loss: log-loss, the model's hinge-type loss, for
              the taggers -log p(labels | sentence) per token, for the
              regressors the squared error (p - y)^2 or the loss trained)
  since last  the average loss of the rows scored since the line before
  avg err     the error rate so far: the fraction of the rows scored whose
              predicted label is wrong (taggers: of the tokens; the
              regressors have no such column)
  since last  the error rate since the line before
  rows        the rows trained on so far (taggers: tokens)
  rows/s      rows trained per second, since the training started
  done        the fraction of the run done: of the scanned rows (with
              --classes, which skips the scan: of the bytes of the files)
  left        the time left at this speed
psa and psa-regressor score each row just before its own update (Vowpal
Wabbit's progressive validation); the other models score each chunk before training on it, which
leaves out the first chunk (no model precedes it: the table's 'loss:' line
and the summary say how many rows)."""


def model_class(name):
    """The estimator class of the ``--model`` name ``name``."""
    import sklearn_secondorder
    return getattr(sklearn_secondorder, MODEL_KINDS[name][0])


EXIT_OK, EXIT_ERROR, EXIT_USAGE = 0, 1, 2


class UsageError(ValueError):
    """A bad command line (exit code 2)."""


def check_output_path(path, option="--out"):
    """Refuse an output file that cannot be written, before any work.

    Parameters
    ----------
    path : str
        The file to write.
    option : str, default='--out'
        The option named in the message.

    Raises
    ------
    UsageError
        If ``path`` is a directory, or its directory is missing, not a
        directory or not writable (the message names the directory).
    """
    if os.path.isdir(path):
        raise UsageError(f"{option} {path}: is a directory (give a file name)")
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.exists(folder):
        raise UsageError(f"{option} {path}: the directory {folder} does not exist")
    if not os.path.isdir(folder):
        raise UsageError(f"{option} {path}: {folder} is not a directory")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise UsageError(f"{option} {path}: the directory {folder} is not writable")


def check_input_path(path, what="data file"):
    """Refuse a file to read that is missing, a directory or not a regular file.

    Parameters
    ----------
    path : str
        The file to read.
    what : {'data file', 'model file'}, default='data file'
        What the file is, for the message.

    Raises
    ------
    UsageError
        If ``path`` does not exist (``no such file``), is a directory (the
        message names a few of its files) or is not a regular file (a pipe
        or a device: the files are read more than once).
    """
    if not os.path.exists(path):
        raise UsageError(f"{path}: no such {'model file' if what == 'model file' else 'file'}")
    if os.path.isdir(path):
        # (its files are not read: a data folder often holds the test split
        # and notes beside the training data)
        try:
            names = sorted(n for n in os.listdir(path) if not n.startswith("."))
        except OSError:
            names = []
        shown = ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
        holds = f"it holds {shown}" if names else "it is empty"
        hint = (f": name the files themselves, e.g. {os.path.join(path, names[0])}"
                if names and what == "data file" else "")
        raise UsageError(f"{path}: is a directory, not a {what} ({holds}){hint}")
    if not os.path.isfile(path):
        raise UsageError(f"{path}: not a regular file (a pipe or a device): skso reads a "
                         f"{what} more than once (its format, then its rows); write it to "
                         "a file first")


# ---- argument parsing -----------------------------------------------------------------
def _positive_int(s):
    v = int(s)
    if v < 1:
        raise argparse.ArgumentTypeError(f"{s!r} is not a positive integer")
    return v


def _jobs(s):
    try:
        v = int(s)
    except ValueError:
        v = 0
    if v < 1 and v != -1:
        raise argparse.ArgumentTypeError(f"{s!r}: expected a positive number of threads, "
                                         "or -1 for all the cores")
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
    _add_train(sub)
    _add_model_commands(sub)
    return parser


def _add_train(sub):
    """The ``train`` subcommand's parser."""
    tr = sub.add_parser(
        "train", help="train a model on data files, streamed in chunks",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Train a model with the estimator's partial_fit over chunks of the files.\n"
                    "The files are scanned once first (labels, rows, feature range) so that\n"
                    "classes and size-dependent parameters come from the whole data.",
        epilog=PROGRESS_TABLE_HELP)
    tr.add_argument("data", nargs="+", help="data files (plain or gzip)")
    tr.add_argument("--model", choices=sorted(MODEL_KINDS),
                    help="the estimator: psa=PSAClassifier, sgdqn=SGDQNLinearSVC, "
                         "sbm=SBMLogisticRegression, sgd=PlainSGDClassifier (class labels); "
                         "psa-regressor=PSARegressor, sgd-regressor=PlainSGDRegressor "
                         "(real-valued labels); and the sequence taggers (CoNLL data); "
                         "required unless --resume")
    tr.add_argument("--out", "-o", required=True,
                    help="the model file to write (its folder is checked before any work)")
    tr.add_argument("--keep-state", action="store_true",
                    help="keep the training state in the model file (step sizes, averages: "
                         "several times the weights), so that 'skso train --resume' can "
                         "continue it; default: only what prediction needs (taggers: the "
                         "weights of the features seen, as CRFsuite stores them; linear "
                         "models: sparse weights when that is smaller)")
    tr.add_argument("--resume", metavar="MODEL",
                    help="continue training a model written with --keep-state on more data "
                         "(the model's format, features, classes and parameters; options "
                         "given here override its parameters)")
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
    _add_estimator_args(tr)
    _add_run_args(tr)


def _add_estimator_args(tr):
    """``train``'s estimator parameters."""
    est = tr.add_argument_group("estimator parameters (default: the estimator's, except alpha)")
    est.add_argument("--alpha", "--l2", type=float,
                     help="L2 strength (default 1/n, n the rows of the data from the pre-scan, "
                          "sentences for the taggers: the regularisation of "
                          "LogisticRegression(C=1) and of CRFsuite's c2=0.5, so that it "
                          "weakens as the data grow; with --classes n is estimated from the "
                          "first chunk)")
    est.add_argument("--loss", help="loss (linear models with a loss parameter; the "
                                    f"regressors': {', '.join(REGRESSION_LOSS_NAMES)}, "
                                    "with --param epsilon=... or --param quantile=...)")
    est.add_argument("--eta0", help="initial step size, or 'auto'")
    est.add_argument("--period", type=int,
                     help="PSA's period b (default for psa and psa-regressor: the "
                          "paper's 0.5 n / 1000, at least 10, with n the rows of the whole "
                          "data)")
    est.add_argument("--random-state", type=int, default=None,
                     help="seed of the estimator and the shuffle buffer (default 0)")
    est.add_argument("--param", action="append", default=[], metavar="NAME=VALUE",
                     help="any other constructor parameter, e.g. --param psa_kappa=0.5 "
                          "(repeatable; VALUE read as a Python literal)")


def _add_run_args(tr):
    """``train``'s options of the run: labels, progress, threads."""
    tr.add_argument("--classes", metavar="LABELS",
                    help="all the labels, comma-separated (classifiers and taggers): skips "
                         "the pre-scan of the files "
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
    tr.add_argument("--no-reader-thread", action="store_true",
                    help="read and parse the chunks in the training thread, one after the "
                         "other (default: a reader thread reads the files and parses the next "
                         "chunk while the model trains on the previous one; the same "
                         "model either way), for debugging and profiling")
    tr.add_argument("--jobs", "-j", type=_jobs, default=None, metavar="N",
                    help="threads for learning: the estimator's n_jobs (psa, sgdqn, sgd, "
                         "psa-regressor, sgd-regressor, psa-tagger, asf-tagger, sgd-tagger; "
                         "-1: all the cores; default: the estimator's). The reader thread comes "
                         "on top")


def _add_model_commands(sub):
    """The parsers of the commands that read a model: ``predict``, ``evaluate``, ``info``."""
    pr = sub.add_parser("predict", help="predict the labels of a data file",
                        description="One label per line (regressors: the predicted value; "
                                    "taggers: per token, a blank line between sentences).")
    pr.add_argument("model", help="a model file written by 'skso train'")
    pr.add_argument("data", help="a data file in the model's format")
    pr.add_argument("--out", "-o", help="output file (default: standard output)")
    pr.add_argument("--proba", action="store_true",
                    help="also the probability of every class (taggers: marginals), in "
                         "the order of the '# labels:' first line")
    pr.add_argument("--chunk-size", type=_positive_int, default=10000,
                    help="lines per chunk (default 10000)")
    _add_unseen_arg(pr)

    ev = sub.add_parser("evaluate", help="score a model on a labelled data file",
                        description="Accuracy, log-loss (probabilistic models) and F1; for "
                                    "regressors RMSE, MAE and R^2; for taggers token "
                                    "accuracy and conlleval chunk precision / recall / F1.")
    ev.add_argument("model", help="a model file written by 'skso train'")
    ev.add_argument("data", help="a labelled data file in the model's format")
    ev.add_argument("--json", action="store_true", help="print one JSON object")
    ev.add_argument("--chunk-size", type=_positive_int, default=10000,
                    help="lines per chunk (default 10000)")
    _add_unseen_arg(ev)

    info = sub.add_parser("info", help="describe a model file",
                          description="Estimator, parameters, classes, features, size.")
    info.add_argument("model", help="a model file written by 'skso train'")
    info.add_argument("--json", action="store_true", help="print one JSON object")


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
                        f"({', '.join(TEMPLATE_NAMES)}; default: chunking with 2 "
                        "or more feature columns, else words)")


def _add_unseen_arg(p):
    p.add_argument("--ignore-unseen-features", action="store_true",
                   help="svmlight: drop feature indices beyond the model's range (default: "
                        "an error naming the line, as the file is then not in the model's "
                        "feature space)")
