"""A/B a benchmark between two built checkouts, in interleaved rounds.

Usage::

    git worktree add ../old <commit> && (cd ../old && python setup.py build_ext --inplace)
    python benchmarks/ab.py --a ../old --b . --rounds 3 -- bench_core.py
    python benchmarks/ab.py --a ../old --b . -- bench_linear.py --methods psa

Each round runs the script of each checkout (``<checkout>/benchmarks/<script>``)
with that checkout first on ``PYTHONPATH``, alternating which goes first, and
saves the outputs to ``--out`` (``ab-results/``): ``<script>_<a|b>_<round>.txt``.
The machines are shared and noisy, so compare the rounds' minima, and the
ratios each script prints to its peers measured in the same run.
"""
import argparse
import os
import subprocess
import sys
import time
from pathlib import Path


def run(checkout, script, args, out):
    env = dict(os.environ, PYTHONPATH=str(checkout))
    cmd = [sys.executable, str(checkout / "benchmarks" / script), *args]
    t = time.perf_counter()
    with open(out, "w") as f:
        subprocess.run(cmd, env=env, stdout=f, stderr=subprocess.STDOUT, check=True,
                       cwd=checkout)
    return time.perf_counter() - t


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--a", type=Path, required=True, help="the first (old) checkout")
    parser.add_argument("--b", type=Path, required=True, help="the second (new) checkout")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", type=Path, default=Path("ab-results"))
    parser.add_argument("script")
    parser.add_argument("args", nargs=argparse.REMAINDER)
    opts = parser.parse_args(argv)
    opts.out.mkdir(parents=True, exist_ok=True)
    stem = Path(opts.script).stem
    for r in range(1, opts.rounds + 1):
        order = ("a", "b") if r % 2 else ("b", "a")
        for side in order:
            checkout = getattr(opts, side).resolve()
            out = opts.out / f"{stem}_{side}_{r}.txt"
            seconds = run(checkout, opts.script, opts.args, out)
            print(f"round {r} {side} ({checkout}): {seconds:.1f} s -> {out}", flush=True)


if __name__ == "__main__":
    main()
