import sys
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = ROOT.parent / "shared" / "data"
sys.path.insert(0, str(ROOT / "benchmarks"))


def shared_data(relpath):
    """Path of a file in ../shared/data, or skip the test with a message."""
    path = SHARED_DATA / relpath
    if not path.exists():
        pytest.skip(f"benchmark data {path} not present (../shared is absent)")
    return path


@pytest.fixture
def sparse_problem():
    """A small sparse binary problem with some empty rows and columns."""
    rng = np.random.RandomState(0)
    X = sp.random(60, 30, density=0.15, random_state=rng, format="csr")
    X.data = rng.uniform(-1, 1, X.data.shape)
    w = rng.randn(30)
    y = np.where(X @ w + 0.1 * rng.randn(60) > 0, 1.0, -1.0)
    return X, y
