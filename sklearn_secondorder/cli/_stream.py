"""Reading data files in chunks: formats, featurizers, the pre-scan, shuffling.

A file is read in blocks of whole lines (``iter_blocks``); a featurizer turns
a block into a ``Chunk`` of CSR rows with compiled parsing only:

svmlight / libsvm
    ``sklearn.datasets.load_svmlight_file`` on the block's bytes.
Vowpal Wabbit
    ``_core._text_readers.parse_vw`` (hashed features).
CoNLL columns
    one ``str.split`` of each line, then the CRF++ templates expanded with
    NumPy's string functions and hashed by ``_core._text_readers.hash_strings``.

Memory holds one block and one chunk (plus the shuffle buffer, if any),
never the file.
"""
import gzip
import os
from dataclasses import dataclass
from itertools import chain, compress

import numpy as np
import scipy.sparse as sp

from .._core._text_readers import (
    hash_strings,
    parse_svmlight,
    parse_vw,
    scan_svmlight,
    scan_vw,
)
from ._templates import BUILTIN_TEMPLATES, feature_hashes, parse_template

FORMATS = ("svmlight", "vw", "conll")


class DataError(ValueError):
    """Bad input data: the message names the file and the line."""


# ---- files and blocks ---------------------------------------------------------------
class _Source:
    """An opened (maybe gzip) file and the position read in the file on disk."""

    def __init__(self, path):
        self.path = str(path)
        self.raw = open(path, "rb")
        magic = self.raw.read(2)
        self.raw.seek(0)
        self.gzipped = magic == b"\x1f\x8b"
        self.stream = gzip.GzipFile(fileobj=self.raw, mode="rb") if self.gzipped else self.raw
        self.size = os.fstat(self.raw.fileno()).st_size

    def read(self, n):
        try:
            return self.stream.read(n)
        except (OSError, EOFError) as e:
            raise DataError(f"{self.path}: cannot read: {e}") from e

    def tell(self):
        return self.raw.tell()

    def close(self):
        if self.gzipped:
            self.stream.close()
        self.raw.close()


@dataclass
class Block:
    """Whole lines of a file: ``data`` from line ``first_line`` on, the bytes
    of the file read so far (``position``, compressed bytes for gzip) and
    the offset of the block's end in the (decompressed) text (``end``)."""

    data: bytes
    first_line: int
    path: str
    position: int
    end: int = 0


def iter_blocks(path, max_lines, *, first_max_lines=None, sentences=False,
                block_bytes=1 << 22):
    """Blocks of at most ``max_lines`` lines (``sentences``: at least
    ``max_lines`` lines, cut after a blank line, so no sentence is split).

    Parameters
    ----------
    path : str
        The file (gzip is detected by its magic bytes).
    max_lines : int or None
        Lines per block; None: whatever whole lines each read brings.
    first_max_lines : int, default=None
        Lines of the first block (None: ``max_lines``).
    sentences : bool, default=False
        Cut only after blank lines (CoNLL files).
    block_bytes : int, default=4 MiB
        Bytes read at a time.

    Yields
    ------
    block : Block
    """
    src = _Source(path)
    try:
        pending = b""
        nl = np.zeros(0, dtype=np.int64)   # newline positions in pending
        before = 0                         # text bytes before pending
        line = 1
        eof = False
        while not eof:
            data = src.read(block_bytes)
            eof = not data
            if data:
                fresh = np.flatnonzero(np.frombuffer(data, dtype=np.uint8) == 10)
                nl = np.concatenate((nl, fresh + len(pending)))
                pending += data
            if sentences:
                # a blank line follows newline j when the next newline is
                # right after it (or after a lone '\r')
                gap = np.diff(nl)
                after = np.frombuffer(pending, dtype=np.uint8)[
                    np.minimum(nl[:-1] + 1, max(len(pending) - 1, 0))]
                blank = np.flatnonzero((gap == 1) | ((gap == 2) & (after == 13)))
            start, k0 = 0, 0
            while start < len(pending):
                limit = first_max_lines or max_lines
                if limit is None:                 # everything up to the last newline
                    if nl.size > k0:
                        cut, n_lines = int(nl[-1]) + 1, nl.size - k0
                    elif eof:
                        cut, n_lines = len(pending), 1
                    else:
                        break
                elif sentences:
                    j = np.searchsorted(blank, k0 + limit - 1)
                    if j < blank.size:
                        cut_line = blank[j] + 1          # the blank line's newline
                        cut = int(nl[cut_line]) + 1
                        n_lines = cut_line + 1 - k0
                    elif eof:
                        cut, n_lines = len(pending), nl.size - k0 + 1
                    else:
                        break
                else:
                    if nl.size - k0 >= limit:
                        cut = int(nl[k0 + limit - 1]) + 1
                        n_lines = limit
                    elif eof:
                        cut, n_lines = len(pending), nl.size - k0 + 1
                    else:
                        break
                yield Block(pending[start:cut], line, src.path, src.tell(), before + cut)
                first_max_lines = None
                line += n_lines
                k0 += n_lines
                start = cut
            pending = pending[start:]
            nl = nl[k0:] - start
            before += start
    finally:
        src.close()


def file_size(path):
    """Bytes of the file on disk."""
    return os.stat(path).st_size


def text_size(path):
    """Bytes of the text: the file's size, or for gzip the size its trailer
    records (modulo 2**32, so at least the file's size is taken)."""
    src = _Source(path)
    try:
        if not src.gzipped or src.size < 18:
            return src.size
        src.raw.seek(-4, os.SEEK_END)
        isize = int.from_bytes(src.raw.read(4), "little")
    finally:
        src.close()
    while isize < src.size:
        isize += 1 << 32
    return isize


def _first_lines(path, n=20):
    src = _Source(path)
    try:
        head = src.read(1 << 16)
    finally:
        src.close()
    lines = head.decode("utf-8", errors="replace").splitlines()
    return [ln for ln in lines[:n] if ln.strip() and not ln.lstrip().startswith("#")][:n]


def detect_format(path):
    """``'svmlight'``, ``'vw'`` or ``'conll'`` from the first lines of ``path``.

    Raises
    ------
    DataError
        If no format fits the first non-blank line.
    """
    lines = _first_lines(path)
    if not lines:
        raise DataError(f"{path}: empty file (no data line)")
    first = lines[0]
    if "|" in first:
        return "vw"
    tokens = first.split()
    if len(tokens) >= 1 and all(":" in t for t in tokens[1:]) and _is_number(tokens[0]):
        if all(_is_svmlight_pair(t) for t in tokens[1:]):
            return "svmlight"
    if len(tokens) >= 2:
        return "conll"
    raise DataError(f"{path}, line 1: cannot tell the format of {first[:80]!r}: expected "
                    "svmlight ('label index:value ...'), Vowpal Wabbit ('label |ns f ...') or "
                    "CoNLL columns ('word ... label'); pass --format")


def _is_number(s):
    try:
        float(s)
    except ValueError:
        return False
    return True


def _is_svmlight_pair(t):
    a, _, b = t.partition(":")
    return (a.isdigit() or a == "qid") and _is_number(b)


# ---- chunks -------------------------------------------------------------------------
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
    """

    format = "svmlight"
    sentences = False

    def __init__(self, n_features, zero_based):
        self.n_features = int(n_features)
        self.zero_based = bool(zero_based)

    def to_dict(self):
        return {"format": self.format, "n_features": self.n_features,
                "zero_based": self.zero_based}

    def parse(self, block):
        try:
            y, indptr, indices, data = parse_svmlight(block.data, self.zero_based,
                                                      self.n_features, block.first_line)
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


def featurizer_from_dict(d):
    """The featurizer a model header describes."""
    fmt = d["format"]
    if fmt == "svmlight":
        return SvmlightFeaturizer(d["n_features"], d["zero_based"])
    if fmt == "vw":
        return VWFeaturizer(d["hash_bits"])
    if fmt == "conll":
        return ConllFeaturizer(d["hash_bits"], d["n_columns"], d["template"])
    raise ValueError(f"unknown data format {fmt!r} in the model header")


# ---- the pre-scan ---------------------------------------------------------------------
@dataclass
class ScanResult:
    """What training needs to know of the whole data before the first chunk."""

    n_rows: int
    n_units: int
    classes: np.ndarray
    min_index: int = -1
    max_index: int = -1
    n_columns: int = 0


def scan(paths, fmt, *, featurizer=None):
    """Rows, classes (and svmlight's index range / CoNLL's columns) of the files.

    Compiled scans for svmlight and VW (no feature parsing); CoNLL files are
    split into columns (the label column is what is needed).
    """
    n_rows = n_units = 0
    lo, hi, n_columns = -1, -1, 0
    classes = None
    for path in paths:
        if fmt == "conll" and n_columns == 0:
            n_columns = len(_first_lines(path, 1)[0].split()) if _first_lines(path, 1) else 0
            if n_columns < 2:
                raise DataError(f"{path}: a CoNLL file needs at least 2 columns (features "
                                "and the label)")
            featurizer = ConllFeaturizer(10, n_columns, "U:%x[0,0]")
        blocks = (iter_blocks(path, 1 << 16, sentences=True) if fmt == "conll" else
                  iter_blocks(path, None, block_bytes=1 << 24))
        for block in blocks:
            if fmt == "svmlight":
                try:
                    labels, a, b = scan_svmlight(block.data, block.first_line)
                except ValueError as e:
                    raise DataError(f"{path}, {e}") from None
                if a >= 0:
                    lo = a if lo < 0 else min(lo, a)
                    hi = max(hi, b)
                units = labels.size
            elif fmt == "vw":
                try:
                    labels = scan_vw(block.data, block.first_line)
                except ValueError as e:
                    raise DataError(f"{path}, {e}") from None
                if np.isnan(labels).any():
                    at = int(np.flatnonzero(np.isnan(labels))[0])
                    raise DataError(f"{path}: row {n_rows + at + 1} has no label "
                                    "(training needs every row's label)")
                units = labels.size
            else:
                fields, offsets = featurizer.split(block, labelled=True)
                labels = np.char.decode(fields[:, -1], "utf-8")
                units = offsets.size - 1
            u = np.unique(labels)
            classes = u if classes is None else np.union1d(classes, u)
            n_rows += labels.size
            n_units += units
    if n_rows == 0:
        raise DataError(f"{', '.join(map(str, paths))}: no data rows")
    return ScanResult(n_rows, n_units, classes, lo, hi, n_columns)


def make_featurizer(fmt, scanned, *, hash_bits, zero_based=None, template=None):
    """The featurizer of training data, from the pre-scan and the options."""
    if fmt == "svmlight":
        if zero_based is None:
            zero_based = scanned.min_index == 0
        if not zero_based and scanned.min_index == 0:
            raise DataError("the data have feature index 0 but --one-based was given")
        return SvmlightFeaturizer(scanned.max_index + (1 if zero_based else 0), zero_based)
    if fmt == "vw":
        return VWFeaturizer(hash_bits)
    n_feat = scanned.n_columns - 1
    if template is None:
        template = "chunking" if n_feat >= 2 else "words"
    if template in BUILTIN_TEMPLATES:
        text = BUILTIN_TEMPLATES[template]
    else:
        try:
            with open(template, encoding="utf-8") as f:
                text = f.read()
        except OSError as e:
            raise DataError(f"cannot read the template file {template!r}: {e}") from None
    parse_template(text, n_feat, source=str(template))     # checked against the columns
    return ConllFeaturizer(hash_bits, scanned.n_columns, text)


# ---- streaming ------------------------------------------------------------------------
def iter_chunks(paths, featurizer, chunk_size, *, first_chunk_size=None):
    """Chunks of about ``chunk_size`` rows (lines; CoNLL: whole sentences of
    at least ``chunk_size`` lines), the very first of ``first_chunk_size``.

    Yields
    ------
    chunk : Chunk
    block : Block
        The block it was parsed from (position in the file, line numbers).
    """
    first = first_chunk_size
    for path in paths:
        for block in iter_blocks(path, chunk_size, first_max_lines=first,
                                 sentences=featurizer.sentences):
            first = None
            chunk = featurizer.parse(block)
            if chunk.n_rows:
                yield chunk, block


def shuffled(chunks, buffer_units, rng):
    """The rows (CoNLL: sentences) of ``chunks`` through a shuffle buffer of
    ``buffer_units``: each chunk out holds rows drawn at random from the
    buffer; memory holds the buffer and one chunk."""
    pool, size, last, out_units = [], 0, None, 1
    for chunk, block in chunks:
        out_units = chunk.n_units
        pool.append(chunk)
        size += chunk.n_units
        last = block
        if size >= buffer_units + out_units:
            merged = Chunk.concat(pool)
            perm = rng.permutation(merged.n_units)
            yield merged.take(perm[:out_units]), block
            pool, size = [merged.take(perm[out_units:])], merged.n_units - out_units
    if pool:
        merged = Chunk.concat(pool)
        perm = rng.permutation(merged.n_units)
        for a in range(0, merged.n_units, out_units):
            yield merged.take(perm[a:a + out_units]), last

