"""Linear-estimator benchmark: single-pass accuracy and epoch time vs the peers.

Usage::

    python benchmarks/bench_linear.py [--methods psa,sgdqn,sbm] \
        [--datasets a9a,w8a,letter,conll_tokens]

Each method's rows live in ``benchmarks/linear_<method>.py`` with a function
``run(name, data, alpha) -> list of dict`` that times its estimator and its
peers in the same run (ratios, not absolute seconds, are the figures to quote).
All data sets use the same L2 strength ``alpha = 1 / n_samples`` (C = 1).
Plots are written to ``benchmarks/results/``.
"""
import argparse
import importlib
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _datasets  # noqa: E402

METHODS = ("psa", "sgdqn", "sbm")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--methods", default=",".join(METHODS))
    parser.add_argument("--datasets", default=",".join(_datasets.LOADERS))
    args = parser.parse_args(argv)
    if not _datasets.available():
        sys.exit(f"benchmark data not found under {_datasets.DATA}")
    modules = {}
    for m in args.methods.split(","):
        try:
            modules[m] = importlib.import_module(f"linear_{m}")
        except ModuleNotFoundError as exc:
            print(f"[skip] method {m}: {exc}")
    for name in args.datasets.split(","):
        data = _datasets.LOADERS[name]()
        alpha = 1.0 / data[0].shape[0]
        for m, module in modules.items():
            print(f"\n=== {m} on {name}: n_train={data[0].shape[0]}, "
                  f"n_features={data[0].shape[1]}, alpha={alpha:.3g}")
            module.run(name, data, alpha)


if __name__ == "__main__":
    main()
