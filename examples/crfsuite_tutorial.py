"""
The sklearn-crfsuite tutorial with one import changed
=====================================================

Not run at documentation build time (the tutorial's search fits 150 models);
run it with ``python examples/crfsuite_tutorial.py [--quick]``.

sklearn-crfsuite's tutorial (docs/CoNLL2002.ipynb) trains a NER tagger; here
the same code runs on CoNLL-2000 chunking (``../shared/data/conll2000``: the
sentences are ``(word, postag, chunk)`` triples, the shape of the tutorial's
``(token, postag, label)``). The only change to the tutorial is the import::

    import sklearn_crfsuite                      # before
    from sklearn_crfsuite import scorers, metrics

    from sklearn_secondorder import crfsuite as sklearn_crfsuite   # after
    from sklearn_secondorder.crfsuite import scorers, metrics

The tutorial asks for ``algorithm='lbfgs'`` with ``c1`` (L1, OWL-QN), which
this package has (`LBFGSSequenceTagger`). Where an installation lacks an
algorithm or L1, ``available`` below says so and the tutorial runs with the
default algorithm and L2 only (``c1`` dropped) — the one place the script may
depart from the tutorial, printed when it happens.

    python examples/crfsuite_tutorial.py           # the tutorial's search (50 x 3 fits)
    python examples/crfsuite_tutorial.py --quick   # a 4-candidate search
"""
# sphinx_gallery_thumbnail_path = "_static/thumbnails/crfsuite_tutorial.png"
import argparse
import gzip
import sys
import time
from collections import Counter
from pathlib import Path

import scipy.stats
from sklearn.metrics import make_scorer
from sklearn.model_selection import RandomizedSearchCV

from sklearn_secondorder import crfsuite as sklearn_crfsuite
from sklearn_secondorder.crfsuite import metrics, scorers  # noqa: F401  (as the tutorial)

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "conll2000"


def read_conll2000(split):
    with gzip.open(DATA / f"{split}.txt.gz", "rt") as f:
        blocks = f.read().strip().split("\n\n")
    return [[tuple(line.split()) for line in b.splitlines()] for b in blocks]


# ---- the tutorial's features ------------------------------------------------------
def word2features(sent, i):
    word = sent[i][0]
    postag = sent[i][1]

    features = {
        'bias': 1.0,
        'word.lower()': word.lower(),
        'word[-3:]': word[-3:],
        'word[-2:]': word[-2:],
        'word.isupper()': word.isupper(),
        'word.istitle()': word.istitle(),
        'word.isdigit()': word.isdigit(),
        'postag': postag,
        'postag[:2]': postag[:2],
    }
    if i > 0:
        word1 = sent[i-1][0]
        postag1 = sent[i-1][1]
        features.update({
            '-1:word.lower()': word1.lower(),
            '-1:word.istitle()': word1.istitle(),
            '-1:word.isupper()': word1.isupper(),
            '-1:postag': postag1,
            '-1:postag[:2]': postag1[:2],
        })
    else:
        features['BOS'] = True

    if i < len(sent)-1:
        word1 = sent[i+1][0]
        postag1 = sent[i+1][1]
        features.update({
            '+1:word.lower()': word1.lower(),
            '+1:word.istitle()': word1.istitle(),
            '+1:word.isupper()': word1.isupper(),
            '+1:postag': postag1,
            '+1:postag[:2]': postag1[:2],
        })
    else:
        features['EOS'] = True

    return features


def sent2features(sent):
    return [word2features(sent, i) for i in range(len(sent))]


def sent2labels(sent):
    return [label for token, postag, label in sent]


def sent2tokens(sent):
    return [token for token, postag, label in sent]


def has_l1(algorithm):
    """Whether ``algorithm``'s tagger takes L1 (a ``penalty`` parameter)."""
    name = algorithm or sklearn_crfsuite.DEFAULT_ALGORITHM
    return "penalty" in sklearn_crfsuite.ALGORITHMS[name].tagger_class()().get_params()


def available(crf):
    """The tutorial's CRF where this installation has its algorithm and L1;
    otherwise the default algorithm and L2 only (said so)."""
    changes = {}
    if crf.algorithm not in sklearn_crfsuite.available_algorithms():
        changes.update(algorithm=None, max_iterations=None)
    if crf.c1 is not None and not has_l1(changes.get("algorithm", crf.algorithm)):
        changes.update(c1=None)
    if changes:
        print(f"  (not available here yet: {crf.algorithm!r} / L1; running with "
              f"{changes} instead)")
        crf.set_params(**changes)
    return crf


def print_transitions(trans_features):
    for (label_from, label_to), weight in trans_features:
        print("%-6s -> %-7s %0.6f" % (label_from, label_to, weight))  # noqa: UP031


def print_state_features(state_features):
    for (attr, label), weight in state_features:
        print("%0.6f %-8s %s" % (weight, label, attr))  # noqa: UP031


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="4 search candidates, not 50")
    args = ap.parse_args(argv)
    if not DATA.exists():
        print(f"skipped: {DATA} is absent (see ../shared/data/README.md)")
        return 0

    train_sents = read_conll2000("train")
    test_sents = read_conll2000("test")
    print(sent2features(train_sents[0])[0])

    X_train = [sent2features(s) for s in train_sents]
    y_train = [sent2labels(s) for s in train_sents]

    X_test = [sent2features(s) for s in test_sents]
    y_test = [sent2labels(s) for s in test_sents]

    # ---- Training -------------------------------------------------------------------
    crf = sklearn_crfsuite.CRF(
        algorithm='lbfgs',
        c1=0.1,
        c2=0.1,
        max_iterations=100,
        all_possible_transitions=True
    )
    crf = available(crf)
    t0 = time.perf_counter()
    crf.fit(X_train, y_train)
    print(f"fit: {time.perf_counter() - t0:.1f} s")

    # ---- Evaluation -----------------------------------------------------------------
    labels = list(crf.classes_)
    labels.remove('O')
    print(labels)

    y_pred = crf.predict(X_test)
    print("weighted flat F1:", metrics.flat_f1_score(y_test, y_pred,
                                                     average='weighted', labels=labels))
    print("chunk F1 (conlleval):", metrics.chunk_f1_score(y_test, list(y_pred)))

    # group B and I results
    sorted_labels = sorted(
        labels,
        key=lambda name: (name[1:], name[0])
    )
    print(metrics.flat_classification_report(
        y_test, y_pred, labels=sorted_labels, digits=3
    ))

    # ---- Hyperparameter Optimization ---------------------------------------------
    crf = sklearn_crfsuite.CRF(
        algorithm='lbfgs',
        max_iterations=100,
        all_possible_transitions=True
    )
    crf = available(crf)
    params_space = {
        'c1': scipy.stats.expon(scale=0.5),
        'c2': scipy.stats.expon(scale=0.05),
    }
    if not has_l1(crf.algorithm):
        del params_space['c1']           # (L1 not available here yet)

    # use the same metric for evaluation
    f1_scorer = make_scorer(metrics.flat_f1_score,
                            average='weighted', labels=labels)

    # search
    rs = RandomizedSearchCV(crf, params_space,
                            cv=3,
                            verbose=1,
                            n_jobs=-1,
                            n_iter=4 if args.quick else 50,
                            scoring=f1_scorer,
                            random_state=0)
    rs.fit(X_train, y_train)

    print('best params:', rs.best_params_)
    print('best CV score:', rs.best_score_)
    print('model size: {:0.2f}M'.format(rs.best_estimator_.size_ / 1000000))  # noqa: UP032

    crf = rs.best_estimator_
    y_pred = crf.predict(X_test)
    print(metrics.flat_classification_report(
        y_test, y_pred, labels=sorted_labels, digits=3
    ))

    # ---- Let's check what classifier learned ----------------------------------------
    print("Top likely transitions:")
    print_transitions(Counter(crf.transition_features_).most_common(20))

    print("\nTop unlikely transitions:")
    print_transitions(Counter(crf.transition_features_).most_common()[-20:])

    print("Top positive:")
    print_state_features(Counter(crf.state_features_).most_common(30))

    print("\nTop negative:")
    print_state_features(Counter(crf.state_features_).most_common()[-30:])
    return 0


if __name__ == "__main__":
    sys.exit(main())
