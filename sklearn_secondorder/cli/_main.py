"""``skso``: train, predict, evaluate and inspect models from data files.

The subcommands stream the files in chunks through the estimators' public
API (``partial_fit``, ``predict``, ``predict_proba``): no second
implementation of any learner lives here. ``main`` parses the command line
(``_parser``) and runs a command: ``train`` (``_train``), or ``predict``,
``evaluate``, ``info`` (``_model_commands``).
"""
import os
import sys

from ._files import DataError
from ._model_commands import cmd_evaluate, cmd_info, cmd_predict
from ._parser import EXIT_OK, EXIT_USAGE, UsageError, build_parser
from ._train import cmd_train

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
