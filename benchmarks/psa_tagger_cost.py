"""Where a PSASequenceTagger pass goes, against a plain SGD pass on the same core.

On CoNLL-2000 chunking (the CRF++ template of ``bench_tagger.py``):

* seconds per pass (minimum over interleaved rounds, the trainers' own
  ``pass_seconds_``) of ``SGDSequenceTagger``, ``PSASequenceTagger`` (paper
  defaults, b = 10) and ``PSASequenceTagger(period=10**9)``, whose
  adaptation events never come: per-weight step sizes and the lazy decay
  only, a floor for any PSA pass that keeps a step size per weight;
* how many attribute-row touches of one shuffled pass cross at least one
  event (and so pay the lazy catch-up of snapshots and adaptation for the
  row's ``n_states`` weights), and how many windows they skip on average.

Run ``python benchmarks/psa_tagger_cost.py [--rounds 3]``.
"""
import argparse

import numpy as np
from bench_tagger import make_task

from sklearn_secondorder import PSASequenceTagger, SGDSequenceTagger

NO_EVENTS = 10 ** 9


def event_crossings(X, b, seed=0):
    """Row touches (attribute rows of each sequence, first touches excluded)
    that cross an event (a multiple of ``b`` updates) since the row's last
    touch, in one pass in a seeded random order; and the mean number of whole
    ``2b`` windows those touches skip."""
    ids, seqs = {}, []
    for sent in X:
        rows = {ids.setdefault(f"{k}={v}", len(ids)) for tok in sent for k, v in tok.items()}
        seqs.append(np.fromiter(rows, dtype=np.int64))
    last = np.full(len(ids), -1)
    touches = crossing = 0
    windows = []
    for t, i in enumerate(np.random.RandomState(seed).permutation(len(seqs))):
        r = seqs[i]
        prev = last[r]
        seen = prev >= 0
        cross = seen & ((t // b) > (prev // b))
        touches += int(seen.sum())
        crossing += int(cross.sum())
        windows.append(t // (2 * b) - prev[cross] // (2 * b))
        last[r] = t
    return len(ids), touches, crossing, float(np.concatenate(windows).mean())


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--c2", type=float, default=1.0)
    args = ap.parse_args(argv)
    Xtr, ytr, _, _ = make_task("chunking", False)
    alpha = 2.0 * args.c2 / len(Xtr)
    makers = {
        "SGD": lambda: SGDSequenceTagger(alpha=alpha, random_state=0, max_iter=2),
        "PSA (b=10)": lambda: PSASequenceTagger(alpha=alpha, random_state=0, max_iter=2),
        "PSA, no events": lambda: PSASequenceTagger(alpha=alpha, period=NO_EVENTS,
                                                    random_state=0, max_iter=2),
    }
    seconds = {name: [] for name in makers}
    for _ in range(args.rounds):
        for name, make in makers.items():
            seconds[name].extend(make().fit(Xtr, ytr).pass_seconds_)
    sgd = min(seconds["SGD"])
    print("seconds per pass (min over rounds and passes), ratio to SGD:")
    for name, s in seconds.items():
        print(f"  {name:<16} {min(s):7.3f} s  {min(s) / sgd:5.2f}x")
    n_rows, touches, crossing, windows = event_crossings(Xtr, 10)
    print(f"attribute rows: {n_rows}; row touches per pass: {touches}; crossing an event "
          f"(b=10): {crossing} ({100 * crossing / touches:.0f}%), skipping {windows:.1f} "
          "whole windows on average")


if __name__ == "__main__":
    main()
