"""
The PSA paper's CRF experiment: one pass against SGD and ASF on chunking
========================================================================

Hsu et al. (2009) train a linear-chain CRF on CoNLL-2000 chunking and report
that **one pass** of PSA reaches the F1 that SGD needs many passes for (their
Table 2). This example runs the comparison with the package's taggers:
``PSASequenceTagger`` (one pass), ``SGDSequenceTagger`` (CRFsuite l2sgd's
schedule) and ``ASFSequenceTagger`` (averaged SGD with feedback), all at the
same ``alpha = 2 c2 / n`` (CRFsuite's ``c2 = 1``), scored by conlleval's
chunk F1.

To run in seconds at documentation build time it trains on the first 2,000
training sentences (word and part-of-speech window features); run
``python examples/plot_psa_crf_table.py --full`` for the 8,936 sentences of
the full set. It reads ``../shared/data/conll2000``; without it a toy corpus
stands in, so the code still runs.
The full-data figures of ``python benchmarks/bench_crfsuite.py`` are in
:doc:`/results` (``psa`` one pass 92.05–92.06 chunk F1, CRFsuite L-BFGS 92.92,
on the sklearn-crfsuite tutorial's features).
"""
import gzip
import sys
import time
from pathlib import Path

import matplotlib.pyplot as plt

from sklearn_secondorder import ASFSequenceTagger, PSASequenceTagger, SGDSequenceTagger
from sklearn_secondorder.metrics import chunk_f1_score

# (the gallery runs the examples from this folder, without __file__)
HERE = Path(__file__).resolve().parent if "__file__" in globals() else Path.cwd()
DATA = HERE.parents[1] / "shared" / "data" / "conll2000"
FULL = "--full" in sys.argv


def read(split):
    with gzip.open(DATA / f"{split}.txt.gz", "rt") as f:
        blocks = f.read().strip().split("\n\n")
    return [[line.split() for line in b.splitlines()] for b in blocks]


def features(sent):
    """Word and POS unigrams in a window of two, POS bigrams: the chunking template's core."""
    words = [w.lower() for w, _, _ in sent]
    tags = [t for _, t, _ in sent]
    n = len(sent)
    out = []
    for i in range(n):
        f = {"bias": 1.0}
        for d in (-2, -1, 0, 1, 2):
            j = i + d
            if 0 <= j < n:
                f[f"w[{d}]"] = words[j]
                f[f"t[{d}]"] = tags[j]
        for d in (-1, 0):
            if 0 <= i + d and i + d + 1 < n:
                f[f"t[{d}]|t[{d + 1}]"] = tags[i + d] + "|" + tags[i + d + 1]
        out.append(f)
    return out


if (DATA / "train.txt.gz").exists():
    train, test = read("train"), read("test")
else:                 # without the data, a toy corpus keeps the code running
    print("CoNLL-2000 is not in ../shared/data: a toy corpus stands in.")
    toy = [[["the", "DT", "B-NP"], ["cat", "NN", "I-NP"], ["sat", "VBD", "B-VP"]],
           [["a", "DT", "B-NP"], ["dog", "NN", "I-NP"], ["ran", "VBD", "B-VP"]]]
    train, test = toy * 50, toy
if not FULL:
    train = train[:2000]
X, y = [features(s) for s in train], [[c for *_, c in s] for s in train]
Xt, yt = [features(s) for s in test], [[c for *_, c in s] for s in test]
alpha = 2 * 1.0 / len(X)          # CRFsuite's c2 = 1 (its default), alpha = 2 c2 / n
print(f"{len(X)} training / {len(Xt)} test sentences, alpha = {alpha:.3g}")

# %%
# F1 after each pass (each a fresh fit with ``max_iter=k``) and the seconds.
makers = {
    "PSA": lambda k: PSASequenceTagger(alpha=alpha, max_iter=k, random_state=0),
    "SGD (l2sgd)": lambda k: SGDSequenceTagger(alpha=alpha, max_iter=k, random_state=0),
    "ASF": lambda k: ASFSequenceTagger(alpha=alpha, max_iter=k, random_state=0),
}
passes = [1, 2, 3, 5]
table = {}
for name, make in makers.items():
    rows = []
    for k in passes:
        t = time.perf_counter()
        tagger = make(k).fit(X, y)
        seconds = time.perf_counter() - t
        rows.append((100 * chunk_f1_score(yt, tagger.predict(Xt)), seconds))
    table[name] = rows

print(f"{'passes':>10}" + "".join(f"{k:>16d}" for k in passes))
for name, rows in table.items():
    print(f"{name:>10}" + "".join(f"{f:9.2f} ({s:4.1f}s)" for f, s in rows))

# %%
fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.2))
for name, rows in table.items():
    ax1.plot(passes, [f for f, _ in rows], "o-", label=name)
    ax2.plot([s for _, s in rows], [f for f, _ in rows], "o-", label=name)
ax1.set_xlabel("passes")
ax1.set_xticks(passes)
ax2.set_xlabel("fit seconds (this run)")
for ax in (ax1, ax2):
    ax.set_ylabel("chunk F1 (test)")
    ax.grid(alpha=0.3)
ax1.set_title(f"CoNLL-2000, {len(X)} training sentences")
ax1.legend()
fig.tight_layout()
plt.show()
