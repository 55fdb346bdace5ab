"""``skso``: train, predict, evaluate and inspect models from data files.

The subcommands stream the files in chunks through the estimators' public
API (``partial_fit``, ``predict``, ``predict_proba``): no second
implementation of any learner lives here. ``main`` parses the command line
(``_parser``), checks the paths it will read and write, and only then
imports the command (``_train``, or ``_model_commands`` for ``predict``,
``evaluate``, ``info``) and with it scikit-learn: a wrong path fails at once,
not after seconds of imports or hours of training.
"""
import gc
import os
import sys

from ._parser import (
    EXIT_OK,
    EXIT_USAGE,
    UsageError,
    build_parser,
    check_input_path,
    check_output_path,
)


def _check_paths(args):
    """The cheap checks of the command line's paths (no import of NumPy)."""
    out = getattr(args, "out", None)
    if out is not None:
        check_output_path(out)
    if args.command == "train":
        if args.resume is None and args.model is None:
            raise UsageError("--model is required (or --resume MODEL to continue a model)")
        for p in args.data:
            check_input_path(p)
        if args.resume:
            check_input_path(args.resume, "model file")
    else:
        check_input_path(args.model, "model file")
        data = getattr(args, "data", None)
        if data is not None:
            check_input_path(data)


def _command(name):
    if name == "train":
        from ._train import cmd_train
        return cmd_train
    from . import _model_commands
    return getattr(_model_commands, f"cmd_{name}")


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
        _check_paths(args)
        command = _command(args.command)
        # train reports on stderr (stdout stays free); the others print results
        return command(args, stderr if args.command == "train" else stdout)
    except BrokenPipeError:     # e.g. 'skso predict ... | head'
        try:
            sys.stdout = open(os.devnull, "w")      # (no second error at exit)
        except OSError:   # pragma: no cover
            pass
        return EXIT_OK
    except (ValueError, TypeError, OSError) as e:   # UsageError, DataError among them
        print(f"skso {args.command}: error: {e}", file=stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:   # pragma: no cover
        print(f"skso {args.command}: interrupted", file=stderr)
        return 130


#: Packages the ``skso`` program does not import: scikit-learn imports
#: pandas (and pandas pyarrow) when installed, for DataFrame input, which
#: the command line never has; they cost 63 MB of resident memory (pandas
#: 3.1, pyarrow) and their import time.
NOT_IMPORTED = ("pandas", "pyarrow")


class _NotImported:
    """An import hook that makes ``NOT_IMPORTED`` look absent (scikit-learn
    imports pandas in a ``try: ... except ImportError``); installed by
    ``run`` only, in the ``skso`` process."""

    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in NOT_IMPORTED:
            raise ModuleNotFoundError(f"No module named {name!r} (not imported by skso)",
                                      name=name)
        return None


def run():
    """Run the ``skso`` program: ``main`` on the process's arguments.

    The ``skso`` script and ``python -m sklearn_secondorder`` call it. The
    program does not import pandas nor pyarrow (``NOT_IMPORTED``: no
    command reads a DataFrame), which scikit-learn would import when they
    are installed. The objects alive at the end (every module a command
    imported: scikit-learn, SciPy) are then frozen out of the garbage
    collector, so that the interpreter's exit does not walk them once more:
    about 0.2 s of every command. ``main`` itself, which tests and programs
    call in their own process, leaves the imports and the collector alone.

    Returns
    -------
    code : int
        ``main``'s exit code.
    """
    if not any(m in sys.modules for m in NOT_IMPORTED):
        sys.meta_path.insert(0, _NotImported())
    code = main()
    gc.freeze()
    return code
