"""The saved-model format of ``skso`` (joblib with a versioned header).

A model file is ``joblib.dump`` of a dict with two keys:

``"header"``
    A plain dict (``str``, numbers, lists, dicts only):

    - ``format``: ``"skso-model"``;
    - ``format_version``: ``MODEL_FORMAT_VERSION`` (an int; a later version
      that cannot read an older file says so);
    - ``package_version``: ``sklearn_secondorder.__version__`` at saving;
    - ``estimator``: the class name (``"PSAClassifier"``...), ``model`` the
      ``--model`` name;
    - ``params``: ``estimator.get_params()``;
    - ``featurizer``: how rows are read (``format`` -- ``svmlight``, ``vw``
      or ``conll`` -- and ``n_features``, ``zero_based``, ``hash_bits``,
      ``n_columns``, ``template`` as they apply);
    - ``classes``: the labels; ``training``: files, rows, passes, seconds,
      the regularisation used;
    - ``contents``: ``"deployment"`` (what prediction needs: the default
      of ``skso train``) or ``"training-state"`` (``--keep-state``: what
      ``skso train --resume`` continues).
``"estimator"``
    With ``"training-state"``, the fitted estimator of this package, as
    training left it. With ``"deployment"``, a linear estimator after
    ``strip_training_state()`` (and ``sparsify()`` when smaller), or for
    a tagger a ``CompactTagger`` (``_deployed``: the hashed columns with a
    non-zero weight, their weights, the transitions). Both predict as the
    trained estimator does.

Version 1 files (before ``contents``) hold the whole estimator: they read as
``"training-state"``.

Like every pickle, a model file runs code when loaded: load only files you
trust. ``jsonable`` turns the values written into a header into plain ones.
"""
import os
import secrets

import joblib
import numpy as np

MODEL_FORMAT_VERSION = 2

#: ``header["contents"]`` values: prediction only, or resumable.
DEPLOYMENT, TRAINING_STATE = "deployment", "training-state"


class SavedModel:
    """A model file's estimator and header (``load_model``'s result).

    It unpacks as a pair: ``estimator, header = load_model(path)``.

    Parameters
    ----------
    estimator : estimator
        The fitted estimator.
    header : dict
        The header (see the module docstring).

    Attributes
    ----------
    estimator : estimator
        The fitted estimator.
    header : dict
        The header.
    """

    def __init__(self, estimator, header):
        self.estimator = estimator
        self.header = header

    def __iter__(self):
        return iter((self.estimator, self.header))

    @property
    def contents(self):
        """``'deployment'`` (prediction only) or ``'training-state'`` (resumable)."""
        return self.header.get("contents", TRAINING_STATE)

    @property
    def featurizer(self):
        """The reader of the model's data format (``iter_chunks`` uses it)."""
        from ._featurizers import featurizer_from_dict
        return featurizer_from_dict(self.header["featurizer"])

    def iter_chunks(self, path, chunk_size=10000):
        """Read a data file as the model reads it, in chunks.

        Parameters
        ----------
        path : str or path-like
            A file in the model's format (gzip or plain).
        chunk_size : int, default=10000
            Lines per chunk (CoNLL: whole sentences of at least that many
            lines).

        Yields
        ------
        X : sparse matrix or list of sparse matrices
            CSR rows (one matrix per sentence for the taggers).
        y : ndarray, list of ndarray or None
            The labels, when the file has them.
        """
        from ._stream import iter_chunks
        for chunk, _ in iter_chunks([str(path)], self.featurizer, chunk_size):
            if chunk.offsets is not None and self.header.get("kind") == "tagger":
                yield chunk.sequences()
            else:
                yield chunk.X, chunk.y


def save_model(path, estimator, header):
    """Write a model file (atomically: nothing is left behind on failure).

    Parameters
    ----------
    path : str or path-like
        The file to write.
    estimator : estimator
        The fitted estimator.
    header : dict
        The header (``format`` and ``format_version`` are set here).
    """
    header = dict(header, format="skso-model", format_version=MODEL_FORMAT_VERSION)
    path = os.fspath(path)
    fd, tmp = create_beside(path)
    os.close(fd)
    try:
        joblib.dump({"header": header, "estimator": estimator}, tmp)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise


def create_beside(path):
    """Create a new, empty temporary file in the folder of ``path``, with
    the permissions the user's umask gives any new file.

    ``tempfile.mkstemp`` would make it readable by its owner only (0600),
    and the file it becomes (a model, predictions meant for others) with it.

    Parameters
    ----------
    path : str
        The file that the temporary file will replace (``os.replace``).

    Returns
    -------
    fd : int
        The file descriptor, opened for writing.
    tmp : str
        The temporary file's path (a hidden name in ``path``'s folder).
    """
    folder = os.path.dirname(os.path.abspath(path))
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0)
    for _ in range(100):
        tmp = os.path.join(folder, f".skso-{secrets.token_hex(8)}.tmp")
        try:
            return os.open(tmp, flags, 0o666), tmp     # (the umask applies)
        except FileExistsError:
            continue
    raise FileExistsError(f"{folder}: cannot create a temporary file beside {path}")


def load_model(path):
    """Load a model file written by ``skso train``.

    Parameters
    ----------
    path : str or path-like
        The model file. It is unpickled: load only files you trust.

    Returns
    -------
    model : SavedModel
        ``model.estimator`` (the fitted model: see the module docstring) and
        ``model.header`` (the format version, parameters, featurizer...);
        it also unpacks as ``estimator, header = load_model(path)``.

    Raises
    ------
    ValueError
        If the file is not an ``skso`` model or has a newer format version.
    """
    try:
        obj = joblib.load(path)
    except (OSError, EOFError) as e:
        raise ValueError(f"{os.fspath(path)}: cannot read the model file: {e}") from e
    except Exception as e:   # an unpickling error of a file that is not a model
        raise ValueError(f"{os.fspath(path)}: not an skso model file ({e})") from e
    if not (isinstance(obj, dict) and isinstance(obj.get("header"), dict)
            and obj["header"].get("format") == "skso-model"):
        raise ValueError(f"{os.fspath(path)}: not an skso model file")
    version = obj["header"].get("format_version")
    if not isinstance(version, int) or version > MODEL_FORMAT_VERSION:
        raise ValueError(f"{os.fspath(path)}: model format version {version!r} is newer than "
                         f"this package reads ({MODEL_FORMAT_VERSION}): upgrade "
                         "sklearn-secondorder")
    return SavedModel(obj["estimator"], obj["header"])


def jsonable(v):
    """``v`` as a value of the JSON header (NumPy scalars to Python ones,
    tuples to lists, anything else to its ``repr``)."""
    if isinstance(v, np.generic):
        return v.item()
    if isinstance(v, (str, int, float, bool)) or v is None:
        return v
    if isinstance(v, (list, tuple)):
        return [jsonable(x) for x in v]
    if isinstance(v, dict):
        return {str(k): jsonable(x) for k, x in v.items()}
    return repr(v)
