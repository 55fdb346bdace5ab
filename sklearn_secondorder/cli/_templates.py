"""CRF++-style feature templates for CoNLL column files, expanded with NumPy.

A template file has one template a line (CRF++'s syntax)::

    # comment
    U00:%x[-1,0]
    U05:%x[-1,0]/%x[0,0]
    B

``%x[r,c]`` is column ``c`` of the token ``r`` positions away within the
sentence; outside it, CRF++'s padding ``_B-1``, ``_B-2``... (before) and
``_B+1``... (after). The feature of a ``U`` template at a token is the line
with every ``%x[r,c]`` replaced (``U05:He/is``, ``feature_strings``). ``B``
lines (CRF++'s label bigrams) are accepted and add nothing: the taggers'
linear-chain CRF always has its label-transition weights. Observation-
conditioned bigrams (``B01:%x[0,0]``) are not supported.

The features are hashed without building their strings
(``feature_hashes``): each column value is hashed once per chunk and a
feature's column is the hash of its pieces' hashes, so every template is a
few NumPy operations over all the tokens of a chunk, never a Python step
per feature.
"""
import re

import numpy as np

_REF = re.compile(r"%x\[\s*(-?\d+)\s*,\s*(\d+)\s*\]")

#: The word column's unigrams and bigrams in a window of 2 (column 0).
_WORD_FEATURES = """\
U00:%x[-2,0]
U01:%x[-1,0]
U02:%x[0,0]
U03:%x[1,0]
U04:%x[2,0]
U05:%x[-1,0]/%x[0,0]
U06:%x[0,0]/%x[1,0]
"""

#: CRF++'s example template for the CoNLL-2000 chunking task (word and POS
#: unigrams, bigrams and trigrams in a window of 2): for files with a word
#: and a POS column before the label.
CHUNKING_TEMPLATE = "# Unigram\n" + _WORD_FEATURES + """
U10:%x[-2,1]
U11:%x[-1,1]
U12:%x[0,1]
U13:%x[1,1]
U14:%x[2,1]
U15:%x[-2,1]/%x[-1,1]
U16:%x[-1,1]/%x[0,1]
U17:%x[0,1]/%x[1,1]
U18:%x[1,1]/%x[2,1]

U20:%x[-2,1]/%x[-1,1]/%x[0,1]
U21:%x[-1,1]/%x[0,1]/%x[1,1]
U22:%x[0,1]/%x[1,1]/%x[2,1]

# Bigram
B
"""

#: The word-column part of the chunking template: for files with only a
#: word column before the label.
WORDS_TEMPLATE = _WORD_FEATURES + "B\n"

BUILTIN_TEMPLATES = {"chunking": CHUNKING_TEMPLATE, "words": WORDS_TEMPLATE}


def parse_template(text, n_feature_columns=None, source="template"):
    """Read CRF++ template lines.

    Parameters
    ----------
    text : str
        The template file's text.
    n_feature_columns : int, default=None
        The columns a template may refer to (all but the label column); None
        does not check.
    source : str, default='template'
        Named in the error messages.

    Returns
    -------
    templates : list of list
        One entry per ``U`` template: its pieces in order, ``str`` literals
        and ``(row, column)`` references.

    Raises
    ------
    ValueError
        On a line that is not a ``U`` / ``B`` template, a ``U`` template
        without ``%x[r,c]``, an observation bigram, or a column out of range.
    """
    templates = []
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line[0] == "B":
            if _REF.search(line):
                raise ValueError(f"{source}, line {lineno}: {line!r}: observation bigram "
                                 "templates are not supported (a plain 'B' is)")
            continue
        if line[0] != "U":
            raise ValueError(f"{source}, line {lineno}: {line!r} is not a CRF++ template "
                             "(a line starts with U or B)")
        pieces, pos = [], 0
        for m in _REF.finditer(line):
            if m.start() > pos:
                pieces.append(line[pos:m.start()])
            row, col = int(m.group(1)), int(m.group(2))
            if n_feature_columns is not None and col >= n_feature_columns:
                raise ValueError(
                    f"{source}, line {lineno}: {line!r} uses column {col}, but the data "
                    f"have {n_feature_columns} feature column(s) (0 to "
                    f"{n_feature_columns - 1}; the last column is the label)")
            pieces.append((row, col))
            pos = m.end()
        if pos < len(line):
            pieces.append(line[pos:])
        if not any(isinstance(p, tuple) for p in pieces):
            raise ValueError(f"{source}, line {lineno}: {line!r} has no %x[row,col]")
        templates.append(pieces)
    if not templates:
        raise ValueError(f"{source}: no U template")
    return templates


def _shifted_index(sentence, row):
    """Index of the token ``row`` positions away within each sentence, and
    for tokens where that falls outside the sentence, CRF++'s padding number
    (``-k`` for ``_B-k`` before the start, ``+k`` for ``_B+k`` after the end;
    0 inside)."""
    n = sentence.shape[0]
    idx = np.arange(n) + row
    clipped = np.clip(idx, 0, max(n - 1, 0))
    inside = (idx >= 0) & (idx < n)
    inside &= sentence[clipped] == sentence
    pad = np.zeros(n, dtype=np.int64)
    where = np.flatnonzero(~inside)
    if where.size:
        start = np.searchsorted(sentence, sentence[where], side="left")
        end = np.searchsorted(sentence, sentence[where], side="right")
        target = where + row
        pad[where] = np.where(target < start, target - start, target - end + 1)
    return clipped, pad


def _padding(k):
    return f"_B{'-' if k < 0 else '+'}{abs(k)}"


def feature_strings(templates, columns, sentence):
    """The CRF++ feature strings of every template at every token.

    The reference the hashed features (``feature_hashes``) stand for; slow
    (Python objects), for tests and inspection.

    Parameters
    ----------
    templates : list
        ``parse_template``'s output.
    columns : list of ndarray of str
        The feature columns, each of shape (n_tokens,).
    sentence : ndarray of shape (n_tokens,)
        The sentence index of every token (non-decreasing).

    Returns
    -------
    features : list of list of str
        ``features[token][template]``, e.g. ``'U05:He/is'``.
    """
    n = sentence.shape[0]
    out = [[] for _ in range(n)]
    for pieces in templates:
        parts = []
        for piece in pieces:
            if isinstance(piece, tuple):
                clipped, pad = _shifted_index(sentence, piece[0])
                col = columns[piece[1]]
                parts.append([str(col[j]) if k == 0 else _padding(k)
                              for j, k in zip(clipped.tolist(), pad.tolist())])
            else:
                parts.append([piece] * n)
        for i, feat in enumerate(map("".join, zip(*parts))):
            out[i].append(feat)
    return out


def feature_hashes(templates, column_hashes, sentence, hash_fn):
    """The hashed feature of every template at every token, in NumPy.

    A feature's hash is ``hash_fn`` (MurmurHash3) of the little-endian
    32-bit hashes of its pieces, in order: the template's literal text
    (``'U05:'``, ``'/'``) and the referenced values (the column value, or
    CRF++'s padding ``_B-1``...). So no feature string is built: each column
    value is hashed once per chunk and each template is a few vector
    operations.

    Parameters
    ----------
    templates : list
        ``parse_template``'s output.
    column_hashes : list of ndarray of uint32
        ``hash_fn`` of every value of each feature column.
    sentence : ndarray of shape (n_tokens,)
        The sentence index of every token (non-decreasing).
    hash_fn : callable
        ``hash_fn(rows)`` hashes each row of a ``(n, width)`` uint8 array
        (``_core._hashing.hash_strings(rows, 0, False)``); it also
        hashes the literals and paddings (one-row arrays).

    Returns
    -------
    hashes : ndarray of shape (n_tokens, n_templates), dtype uint32
    """
    def const(text):
        raw = np.frombuffer(text.encode("utf-8"), dtype=np.uint8)
        return np.uint32(hash_fn(raw.reshape(1, -1))[0])

    n = sentence.shape[0]
    out = np.empty((n, len(templates)), dtype=np.uint32)
    for t, pieces in enumerate(templates):
        parts = np.empty((n, len(pieces)), dtype="<u4")
        for i, piece in enumerate(pieces):
            if isinstance(piece, tuple):
                clipped, pad = _shifted_index(sentence, piece[0])
                h = column_hashes[piece[1]][clipped]
                for k in np.unique(pad[pad != 0]).tolist():
                    h[pad == k] = const(_padding(k))
                parts[:, i] = h
            else:
                parts[:, i] = const(piece)
        out[:, t] = hash_fn(parts.view(np.uint8).reshape(n, 4 * len(pieces)))
    return out
