"""conlleval chunk scores, token and sequence accuracy, scorers (hand-computed)."""
import numpy as np
import pytest
from numpy.testing import assert_allclose
from sklearn.base import BaseEstimator

from sklearn_secondorder.metrics import (
    chunk_f1_score,
    chunk_f1_scorer,
    chunk_precision_recall_fscore,
    chunk_precision_score,
    chunk_recall_score,
    extract_chunks,
    flat_accuracy_score,
    flat_accuracy_scorer,
    sequence_accuracy_score,
    sequence_accuracy_scorer,
)

# IOB2. Gold chunks: NP[0,2) VP[3,4) PP[4,5) NP[5,7) | NP[0,1)          -> 5
#       Predicted:   NP[0,2) VP[3,4) NP[4,5) NP[5,7) | NP[0,1) VP[1,2)  -> 6
#       Correct: NP[0,2) VP[3,4) NP[5,7) NP[0,1)                        -> 4
GOLD = [["B-NP", "I-NP", "O", "B-VP", "B-PP", "B-NP", "I-NP"], ["B-NP", "O"]]
PRED = [["B-NP", "I-NP", "O", "B-VP", "B-NP", "B-NP", "I-NP"], ["B-NP", "B-VP"]]


def test_hand_computed_iob2():
    p, r, f = chunk_precision_recall_fscore(GOLD, PRED)
    assert_allclose([p, r, f], [4 / 6, 4 / 5, 8 / 11])
    assert_allclose(chunk_precision_score(GOLD, PRED), 4 / 6)
    assert_allclose(chunk_recall_score(GOLD, PRED), 4 / 5)
    assert_allclose(chunk_f1_score(GOLD, PRED), 8 / 11)
    *_, by_type = chunk_precision_recall_fscore(GOLD, PRED, per_type=True)
    assert_allclose(by_type["NP"], (3 / 4, 1.0, 2 * 0.75 / 1.75, 3))
    assert_allclose(by_type["VP"], (1 / 2, 1.0, 2 / 3, 1))
    assert_allclose(by_type["PP"], (0.0, 0.0, 0.0, 1))


def test_hand_computed_iob1():
    # IOB1: B- only separates adjacent chunks of one type; I- after O starts one.
    gold = [["I-NP", "I-NP", "B-NP", "O", "I-VP"]]   # NP[0,2) NP[2,3) VP[4,5)
    pred = [["I-NP", "I-NP", "I-NP", "O", "I-VP"]]   # NP[0,3) VP[4,5)
    assert extract_chunks(gold[0]) == [("NP", 0, 2), ("NP", 2, 3), ("VP", 4, 5)]
    p, r, f = chunk_precision_recall_fscore(gold, pred)
    assert_allclose([p, r, f], [1 / 2, 1 / 3, 0.4])


@pytest.mark.parametrize("tags,chunks", [
    (["B-NP", "I-VP"], [("NP", 0, 1), ("VP", 1, 2)]),        # type change ends and starts
    (["O", "I-NP", "I-NP"], [("NP", 1, 3)]),                   # closed at the end
    (["B-NP", "B-NP", "I-NP"], [("NP", 0, 1), ("NP", 1, 3)]),
    (["I-NP", "O", "O"], [("NP", 0, 1)]),
    (["O", "O"], []),
    (["B-GENE", "I-GENE", "O", "B-GENE"], [("GENE", 0, 2), ("GENE", 3, 4)]),
])
def test_extract_chunks(tags, chunks):
    assert extract_chunks(tags) == chunks


def test_chunks_do_not_cross_sequences():
    # one sequence ending in I-NP and the next starting with I-NP: two chunks
    gold = [["B-NP", "I-NP"], ["I-NP"]]
    assert chunk_precision_recall_fscore(gold, gold) == (1.0, 1.0, 1.0)
    assert chunk_precision_recall_fscore(gold, [["B-NP", "O"], ["O"]]) == (0.0, 0.0, 0.0)


def test_accuracies():
    # 9 tokens, 7 equal; 0 of 2 sequences exact
    assert_allclose(flat_accuracy_score(GOLD, PRED), 7 / 9)
    assert sequence_accuracy_score(GOLD, PRED) == 0.0
    assert sequence_accuracy_score(GOLD, [list(s) for s in GOLD]) == 1.0


def test_length_mismatch_raises():
    with pytest.raises(ValueError, match="sequences"):
        chunk_f1_score(GOLD, PRED[:1])
    with pytest.raises(ValueError, match="sequence 1"):
        flat_accuracy_score(GOLD, [PRED[0], ["O"]])


class _Fixed(BaseEstimator):
    """An 'estimator' predicting fixed label sequences."""

    def __init__(self, pred):
        self.pred = pred

    def predict(self, X):
        return self.pred

    def fit(self, X, y):
        return self


def test_scorers():
    est = _Fixed(PRED)
    assert_allclose(chunk_f1_scorer(est, None, GOLD), 8 / 11)
    assert_allclose(flat_accuracy_scorer(est, None, GOLD), 7 / 9)
    assert sequence_accuracy_scorer(est, None, GOLD) == 0.0


def test_flat_array_is_one_sequence():
    y = np.array(["B-NP", "I-NP", "O"])
    assert chunk_f1_score(y, y) == 1.0
