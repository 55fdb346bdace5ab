"""Instruction-count A/B of two built checkouts, for a loaded, shared machine.

Wall and CPU times on a shared 2-core VM can move by 2x between two runs of
the same code; instruction counts do not. This runs the configurations of
``bench_core.py``, ``bench_linear.py --methods psa`` and ``psa_tagger_cost.py``
under ``valgrind --tool=callgrind`` once per checkout. Each fit is made once
to warm up and once between two ``os.getppid()`` calls, which callgrind
(``--dump-before='getppid*'``) turns into dump points, so every measured fit
has a dump file of its own::

    git worktree add ../old <commit> && (cd ../old && python setup.py build_ext --inplace)
    python benchmarks/icount_ab.py --a ../old --b .          # ~30 min under valgrind

The whole ``fit`` call is counted (validation and Python overhead included).
"""
import argparse
import glob
import os
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path

CONFIGS = ["a9a PlainSGD 5 epochs", "a9a PSA 1 pass", "a9a PSA 6 passes",
           "w8a PlainSGD 5 epochs", "w8a PSA 1 pass", "w8a PSA 6 passes",
           "letter PSA 1 pass", "letter PSA 6 passes", "chunk SGD tagger pass",
           "chunk PSA tagger pass", "chunk PSA tagger, no events"]


def measure_all():
    """The child: every configuration, each measured fit between two dump points."""
    warnings.simplefilter("ignore")
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import _datasets
    from bench_tagger import make_task

    from sklearn_secondorder import (
        PlainSGDClassifier,
        PSAClassifier,
        PSASequenceTagger,
        SGDSequenceTagger,
    )

    def measure(fit):
        fit()                               # warm-up (first-call costs)
        os.getppid()
        fit()
        os.getppid()

    for name in ("a9a", "w8a", "letter"):
        Xtr, ytr, _, _ = _datasets.LOADERS[name]()
        a = 1.0 / Xtr.shape[0]
        if name != "letter":
            measure(lambda: PlainSGDClassifier(alpha=a, max_iter=5, eta0=0.05,
                                               random_state=0).fit(Xtr, ytr))
        for k in (1, 6):
            measure(lambda: PSAClassifier(alpha=a, eta0=0.05, max_iter=k,
                                          random_state=0).fit(Xtr, ytr))
    Xtr, ytr, _, _ = make_task("chunking", True)
    for cls, kw in ((SGDSequenceTagger, {}), (PSASequenceTagger, {}),
                    (PSASequenceTagger, {"period": 10 ** 9})):
        measure(lambda: cls(alpha=1e-4, eta0=0.05, max_iter=1, random_state=0,
                            **kw).fit(Xtr, ytr))


def count(checkout, out_dir):
    """Run the child (this file, with ``checkout`` first on the path) under
    callgrind; the measured fits' counts."""
    env = dict(os.environ, PYTHONPATH=str(checkout), PYTHONHASHSEED="0",
               OPENBLAS_NUM_THREADS="1")
    prefix = Path(out_dir) / "cg"
    subprocess.run(["valgrind", "--tool=callgrind", "--dump-before=getppid*",
                    f"--callgrind-out-file={prefix}.%p", sys.executable,
                    str(Path(__file__).resolve()), "--child"],
                   env=env, cwd=checkout, check=True, capture_output=True)
    dumps = {int(f.rsplit(".", 1)[1]): f for f in glob.glob(f"{prefix}.*.*")}
    counts = []
    for i in range(len(CONFIGS)):       # dump 2i + 2 is the i-th measured fit
        with open(dumps[2 * i + 2]) as f:
            counts.append(next(int(line.split()[1]) for line in f
                               if line.startswith(("summary:", "totals:"))))
    return counts


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--a", type=Path, help="the first (old) checkout")
    parser.add_argument("--b", type=Path, help="the second (new) checkout")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        return measure_all()
    with tempfile.TemporaryDirectory() as da, tempfile.TemporaryDirectory() as db:
        old, new = count(args.a.resolve(), da), count(args.b.resolve(), db)
    print("| configuration | old instructions | new instructions | new / old |")
    print("|---|---|---|---|")
    for label, a, b in zip(CONFIGS, old, new):
        print(f"| {label} | {a / 1e6:,.1f} M | {b / 1e6:,.1f} M | {b / a:.3f} |")


if __name__ == "__main__":
    main()
