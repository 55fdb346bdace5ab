"""Featurizers: a ``Block`` of lines to a ``Chunk`` of CSR rows, compiled parsing only.

svmlight / libsvm
    ``_core._text_readers.parse_svmlight`` (as
    ``sklearn.datasets.load_svmlight_file`` reads them).
Vowpal Wabbit
    ``_core._text_readers.parse_vw`` (hashed features).
CoNLL columns
    one ``str.split`` of each line, then the CRF++ templates expanded with
    NumPy's string functions and hashed by ``_core._hashing.hash_strings``.

``featurizer_from_dict`` rebuilds the featurizer a model file records.
"""
from dataclasses import dataclass
from itertools import chain, compress

import numpy as np
import scipy.sparse as sp

from .._text import hash_strings, parse_svmlight, parse_vw
from ._files import DataError
from ._templates import feature_hashes, parse_template


@dataclass
class Chunk:
    """Rows of a file: ``X`` (CSR), labels ``y`` (None when unlabelled),
    importance weights ``w`` (None: all 1), and for CoNLL the sentence
    ``offsets`` (sentence ``s`` is rows ``offsets[s]:offsets[s+1]``)."""

    X: object
    y: object
    w: object = None
    offsets: object = None

    @property
    def n_rows(self):
        return self.X.shape[0]

    @property
    def n_units(self):
        """Rows, or sentences for CoNLL (the unit of shuffling)."""
        return self.n_rows if self.offsets is None else self.offsets.size - 1

    def take(self, units):
        """The chunk of the given rows (sentences for CoNLL), in that order."""
        units = np.asarray(units, dtype=np.int64)
        if self.offsets is None:
            rows, offsets = units, None
        else:
            lengths = np.diff(self.offsets)[units]
            starts = self.offsets[:-1][units]
            offsets = np.concatenate(([0], np.cumsum(lengths))).astype(np.int64)
            rows = np.repeat(starts - offsets[:-1], lengths) + np.arange(offsets[-1])
        return Chunk(self.X[rows], None if self.y is None else self.y[rows],
                     None if self.w is None else self.w[rows], offsets)

    @staticmethod
    def concat(chunks):
        """One chunk of the rows of ``chunks``, in order."""
        if len(chunks) == 1:
            return chunks[0]
        X = sp.vstack([c.X for c in chunks], format="csr")
        y = None if chunks[0].y is None else np.concatenate([c.y for c in chunks])
        w = (None if all(c.w is None for c in chunks) else
             np.concatenate([np.ones(c.n_rows) if c.w is None else c.w for c in chunks]))
        offsets = None
        if chunks[0].offsets is not None:
            parts, base = [np.zeros(1, dtype=np.int64)], 0
            for c in chunks:
                parts.append(c.offsets[1:] + base)
                base += c.n_rows
            offsets = np.concatenate(parts)
        return Chunk(X, y, w, offsets)

    def sequences(self):
        """The sentences as the taggers' input: a list of CSR matrices and a
        list of label arrays (None when unlabelled)."""
        bounds = list(zip(self.offsets[:-1].tolist(), self.offsets[1:].tolist()))
        X = [self.X[a:b] for a, b in bounds]
        y = None if self.y is None else [self.y[a:b] for a, b in bounds]
        return X, y


# ---- featurizers ----------------------------------------------------------------------
class SvmlightFeaturizer:
    """svmlight / libsvm lines (``_core._text_readers.parse_svmlight``, which
    reads them as ``sklearn.datasets.load_svmlight_file`` does, faster).

    Parameters
    ----------
    n_features : int
        Columns of the model; indices beyond them (in a file to predict) are
        dropped, as features the model never saw.
    zero_based : bool
        Whether the file's indices start at 0.
    training : bool, default=False
        Refuse an index beyond the columns instead (the training data's
        columns come from the pre-scan, which reads each line's first and
        last index).
    """

    format = "svmlight"
    sentences = False

    def __init__(self, n_features, zero_based, training=False):
        self.n_features = int(n_features)
        self.zero_based = bool(zero_based)
        self.training = bool(training)

    def to_dict(self):
        return {"format": self.format, "n_features": self.n_features,
                "zero_based": self.zero_based}

    def parse(self, block):
        try:
            y, indptr, indices, data = parse_svmlight(block.data, self.zero_based,
                                                      self.n_features, block.first_line,
                                                      strict_range=self.training)
        except ValueError as e:
            raise DataError(f"{block.path}, {e}") from None
        return Chunk(sp.csr_matrix((data, indices, indptr), shape=(y.size, self.n_features)),
                     y)


class VWFeaturizer:
    """Vowpal Wabbit text lines, hashed to ``2**hash_bits`` columns
    (``_core._text_readers.parse_vw``).

    Parameters
    ----------
    hash_bits : int
        The columns are ``2**hash_bits``.
    """

    format = "vw"
    sentences = False

    def __init__(self, hash_bits):
        self.hash_bits = int(hash_bits)
        self.n_features = 1 << self.hash_bits

    def to_dict(self):
        return {"format": self.format, "n_features": self.n_features,
                "hash_bits": self.hash_bits}

    def parse(self, block):
        try:
            y, w, indptr, indices, data = parse_vw(block.data, self.hash_bits,
                                                   block.first_line)
        except ValueError as e:
            raise DataError(f"{block.path}, {e}") from None
        X = sp.csr_matrix((data, indices, indptr), shape=(y.size, self.n_features))
        X.sum_duplicates()                  # hash collisions within a row
        if np.isnan(y).all():
            y = None
        return Chunk(X, y, None if np.all(w == 1) else w)


class ConllFeaturizer:
    """CoNLL column files (a token a line, a blank line between sentences,
    the label last), featurized by CRF++ templates and hashed to
    ``2**hash_bits`` columns.

    Parameters
    ----------
    hash_bits : int
        The columns are ``2**hash_bits``.
    n_columns : int
        Columns of a labelled line (feature columns + the label).
    template : str
        The CRF++ template text (see ``_templates``).
    """

    format = "conll"
    sentences = True

    def __init__(self, hash_bits, n_columns, template):
        self.hash_bits = int(hash_bits)
        self.n_features = 1 << self.hash_bits
        self.n_columns = int(n_columns)
        self.template = template
        self.templates = parse_template(template, self.n_columns - 1)

    def to_dict(self):
        return {"format": self.format, "n_features": self.n_features,
                "hash_bits": self.hash_bits, "n_columns": self.n_columns,
                "template": self.template}

    def split(self, block, labelled=None):
        """The block's columns: ``(fields, offsets)``, ``fields`` a bytes
        array of shape (n_tokens, n_cols) and sentence ``s`` the tokens
        ``offsets[s]:offsets[s+1]``; ``labelled`` None accepts lines with or
        without the label column."""
        lines = block.data.split(b"\n")
        if lines and lines[-1] == b"":
            lines.pop()
        parts = list(map(bytes.split, lines))
        counts = np.fromiter(map(len, parts), dtype=np.int64, count=len(parts))
        tok = counts > 0
        ok = (self.n_columns, self.n_columns - 1) if labelled is None else (
            (self.n_columns,) if labelled else (self.n_columns - 1,))
        n_cols = int(counts[tok][0]) if tok.any() else self.n_columns
        bad = np.flatnonzero(tok & (counts != n_cols))
        if n_cols not in ok or bad.size:
            at = int(bad[0]) if bad.size and n_cols in ok else int(np.flatnonzero(tok)[0])
            raise DataError(
                f"{block.path}, line {block.first_line + at}: {int(counts[at])} column(s), "
                f"expected {' or '.join(map(str, ok))} (a CoNLL line is 'feature columns... "
                "label')")
        flat = list(chain.from_iterable(compress(parts, tok)))
        fields = np.array(flat, dtype=bytes) if flat else np.zeros(0, dtype="S1")
        fields = fields.reshape(-1, n_cols)
        # sentence index of every token: the blank lines before it
        sentence = np.cumsum(~tok)[tok]
        starts = np.flatnonzero(np.diff(sentence, prepend=-1) != 0)
        offsets = np.append(starts, sentence.size).astype(np.int64)
        return fields, offsets

    def parse(self, block):
        fields, offsets = self.split(block)
        n = fields.shape[0]
        labelled = fields.shape[1] == self.n_columns
        sentence = np.repeat(np.arange(offsets.size - 1), np.diff(offsets))
        column_hashes = []
        for c in range(self.n_columns - 1):
            col = np.ascontiguousarray(fields[:, c])
            column_hashes.append(hash_strings(col.view(np.uint8).reshape(n, -1), 0, True))
        H = feature_hashes(self.templates, column_hashes, sentence, _hash_rows)
        T = H.shape[1]
        indices = (H & np.uint32(self.n_features - 1)).astype(np.int32).ravel()
        indptr = np.arange(0, n * T + 1, T, dtype=np.int64)
        X = sp.csr_matrix((np.ones(n * T), indices, indptr), shape=(n, self.n_features))
        X.sum_duplicates()
        y = np.char.decode(fields[:, -1], "utf-8") if labelled else None
        return Chunk(X, y, None, offsets)


def _hash_rows(rows):
    return hash_strings(np.ascontiguousarray(rows), 0, False)


def featurizer_from_dict(d, training=False):
    """The featurizer a model header describes (``training``: for more
    training, see ``SvmlightFeaturizer``)."""
    fmt = d["format"]
    if fmt == "svmlight":
        return SvmlightFeaturizer(d["n_features"], d["zero_based"], training)
    if fmt == "vw":
        return VWFeaturizer(d["hash_bits"])
    if fmt == "conll":
        return ConllFeaturizer(d["hash_bits"], d["n_columns"], d["template"])
    raise ValueError(f"unknown data format {fmt!r} in the model header")
