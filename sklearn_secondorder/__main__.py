"""``python -m sklearn_secondorder``: the ``skso`` command line."""
import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
