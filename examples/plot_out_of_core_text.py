"""
Out-of-core text classification with ``HashingVectorizer`` and ``partial_fit``
==============================================================================

Text that does not fit in memory is read in chunks, each turned into a sparse
matrix by a stateless ``HashingVectorizer`` (no vocabulary to keep) and fed to
``partial_fit``. Memory holds one chunk; the model is one pass over the stream.

The task: does a sentence of the BioCreative II gene-mention corpus (BC2GM,
``../shared/data/bc2gm``) mention a gene? When the data is not next to the
repository, a synthetic stream of two-topic "sentences" stands in. We stream
the training sentences in chunks of 1,000 and plot the test accuracy after
each chunk for ``PSAClassifier`` and scikit-learn's ``SGDClassifier``, both at
``alpha = 1e-5``.

What the first ``partial_fit`` call fixes: the ``classes`` (required then),
the number of features (here ``2**18`` from the hashing), and PSA's
``'auto'`` settings (its step ``eta0``, calibrated on the first chunk, and
its period ``b``, from the first chunk's size). See
:ref:`streaming semantics <streaming>`.
"""
import gzip
import time
from itertools import islice
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
from sklearn.feature_extraction.text import HashingVectorizer
from sklearn.linear_model import SGDClassifier

from sklearn_secondorder import PSAClassifier

# (the gallery runs the examples from this folder, without __file__)
HERE = Path(__file__).resolve().parent if "__file__" in globals() else Path.cwd()
BC2GM = HERE.parents[1] / "shared" / "data" / "bc2gm"


def bc2gm_sentences(split):
    """Yield ``(sentence, has_gene)`` from a BC2GM file, one sentence at a time."""
    words, gene = [], False
    with gzip.open(BC2GM / f"{split}.tsv.gz", "rt") as f:
        for line in f:
            line = line.rstrip("\n")
            if not line:
                if words:
                    yield " ".join(words), int(gene)
                words, gene = [], False
                continue
            word, tag = line.split("\t")
            words.append(word)
            gene |= tag != "O"
    if words:
        yield " ".join(words), int(gene)


def synthetic_sentences(n, seed):
    """A stand-in stream: two topics with overlapping vocabularies."""
    rng = np.random.default_rng(seed)
    vocab = np.array([f"w{i}" for i in range(5000)])
    for _ in range(n):
        label = int(rng.random() < 0.5)
        center = 1000 if label else 2500
        idx = np.clip(rng.normal(center, 900, size=rng.integers(8, 30)), 0, 4999)
        yield " ".join(vocab[idx.astype(int)]), label


if (BC2GM / "train.tsv.gz").exists():
    source = "BC2GM"
    train_stream = lambda: bc2gm_sentences("train")          # noqa: E731
    test = list(bc2gm_sentences("test"))
else:
    source = "synthetic"
    train_stream = lambda: synthetic_sentences(12000, 0)     # noqa: E731
    test = list(synthetic_sentences(3000, 1))

vectorizer = HashingVectorizer(n_features=2**18, ngram_range=(1, 2), alternate_sign=False,
                               norm="l2")
X_test = vectorizer.transform([s for s, _ in test])
y_test = np.array([label for _, label in test])


def chunks(stream, size):
    while True:
        chunk = list(islice(stream, size))
        if not chunk:
            return
        yield vectorizer.transform([s for s, _ in chunk]), np.array([lab for _, lab in chunk])


# %%
# One pass over the stream, chunk by chunk, scoring after each chunk.
models = {"PSAClassifier": PSAClassifier(alpha=1e-5, random_state=0),
          "SGDClassifier (sklearn)": SGDClassifier(loss="log_loss", alpha=1e-5, random_state=0)}
history = {name: [] for name in models}
seen, seconds = [], dict.fromkeys(models, 0.0)
n_seen = 0
for X, y in chunks(train_stream(), 1000):
    n_seen += X.shape[0]
    seen.append(n_seen)
    for name, model in models.items():
        t = time.perf_counter()
        model.partial_fit(X, y, classes=[0, 1])
        seconds[name] += time.perf_counter() - t
        history[name].append(model.score(X_test, y_test))

print(f"{source}: {n_seen} training sentences streamed, {X_test.shape[0]} test sentences, "
      f"majority class {max(y_test.mean(), 1 - y_test.mean()):.4f}")
for name in models:
    print(f"{name:25s} accuracy after the pass {history[name][-1]:.4f}, "
          f"partial_fit seconds {seconds[name]:.2f}")
psa = models["PSAClassifier"]
print(f"PSA's period b, fixed by the first chunk: period_ = {psa.period_}; "
      f"its per-weight steps after the pass: {psa.eta_.min():.3g} .. {psa.eta_.max():.3g}")

# %%
fig, ax = plt.subplots(figsize=(7, 4))
for name in models:
    ax.plot(seen, history[name], "o-", ms=3, label=name)
ax.set_xlabel("training sentences seen (one pass, chunks of 1,000)")
ax.set_ylabel("test accuracy")
ax.set_title(f"{source}: out-of-core, one pass")
ax.grid(alpha=0.3)
ax.legend()
fig.tight_layout()
plt.show()
