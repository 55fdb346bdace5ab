"""
The ``skso`` command line: train, evaluate, predict from files
==============================================================

``skso`` (also ``python -m sklearn_secondorder``) trains on data files of any
size by streaming them in chunks through an estimator's ``partial_fit``; memory
holds one chunk. It reads svmlight / libsvm, Vowpal Wabbit text and CoNLL
columns, plain or gzip, and prints Vowpal Wabbit-style progressive validation
(the loss of each chunk before training on it).

Here the files are a9a from ``../shared/data`` when present, else scikit-learn's
bundled breast-cancer data written to svmlight files in a temporary folder.
Each command is the line you would type in a shell.
"""
# sphinx_gallery_thumbnail_path = "_static/thumbnails/plot_command_line.png"
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
from sklearn.datasets import dump_svmlight_file, load_breast_cancer
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler

# (the gallery runs the examples from this folder, without __file__)
HERE = Path(__file__).resolve().parent if "__file__" in globals() else Path.cwd()
A9A = HERE.parents[1] / "shared" / "data" / "a9a"
work = Path(tempfile.mkdtemp(prefix="skso-example-"))
if (A9A / "a9a.gz").exists():
    train, test = A9A / "a9a.gz", A9A / "a9a.t.gz"
else:
    X, y = load_breast_cancer(return_X_y=True)
    X, Xt, y, yt = train_test_split(X, y, test_size=0.3, random_state=0)
    scaler = StandardScaler().fit(X)
    train, test = work / "train.svm", work / "test.svm"
    dump_svmlight_file(scaler.transform(X), 2 * y - 1, str(train), zero_based=False)
    dump_svmlight_file(scaler.transform(Xt), 2 * yt - 1, str(test), zero_based=False)


def skso(*args):
    """Run ``skso ARGS`` (as ``python -m sklearn_secondorder``) and print its output."""
    print("$ skso " + " ".join(shlex.quote(str(a)) for a in args))
    out = subprocess.run([sys.executable, "-m", "sklearn_secondorder", *map(str, args)],
                         capture_output=True, text=True, check=True)
    print(out.stdout + out.stderr)


# %%
# One pass of PSA with its defaults: ``alpha = 1/n`` (the scan of the file
# gives ``n``), progressive validation printed at doubling row counts and
# every tenth of the run, with the fraction done and the time left. The file
# written holds what prediction needs (``--keep-state`` keeps the training
# state for ``skso train --resume``).
model = work / "model.skso"
skso("train", train, "--model", "psa", "--progress", "lines", "--out", model)

# %%
# Accuracy, log-loss and F1 on the test file, and the model's header.
skso("evaluate", model, test)
skso("info", model)

# %%
# Predicted labels (and probabilities) to a file.
skso("predict", model, test, "--proba", "--out", work / "pred.txt")
print((work / "pred.txt").read_text().splitlines()[:5])

# %%
# From Python, the model file gives back the fitted estimator and its header.
from sklearn_secondorder.cli import load_model  # noqa: E402

estimator, header = load_model(model)
print(type(estimator).__name__, header["contents"], header["training"]["alpha"])
np.testing.assert_equal(model.exists(), True)
