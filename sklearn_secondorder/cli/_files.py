"""Data files as blocks of whole lines: opening (plain or gzip), sizes, format detection.

``iter_blocks`` reads a file in blocks of whole lines (CoNLL: whole
sentences); ``detect_format`` tells svmlight, Vowpal Wabbit and CoNLL apart
from the first lines; ``file_size`` / ``text_size`` give the progress
display its totals. ``DataError`` is the error of bad input data.
"""
import gzip
import os
from dataclasses import dataclass

import numpy as np

from .._text import newline_positions
from ._parser import FORMATS  # noqa: F401  (the formats, named where they are read)


class DataError(ValueError):
    """Bad input data: the message names the file and the line."""


# ---- files and blocks ---------------------------------------------------------------
#: The UTF-8 byte-order mark that Windows editors put at the start of a file.
UTF8_BOM = b"\xef\xbb\xbf"


def text_start(head, path):
    """Bytes of the byte-order mark at the start of a file's text ``head``
    (3 for UTF-8's, skipped by every reader; else 0).

    Raises
    ------
    DataError
        If the text is UTF-16 (its byte-order mark): the readers read
        UTF-8.
    """
    if head.startswith(UTF8_BOM):
        return len(UTF8_BOM)
    if head[:2] in (b"\xff\xfe", b"\xfe\xff"):
        raise DataError(f"{path}: UTF-16 text (its byte-order mark): skso reads UTF-8 (or "
                        "ASCII) files; convert it, e.g. iconv -f UTF-16 -t UTF-8")
    return 0


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
        # (a bytearray: appending a read and dropping the bytes cut off are
        # in place, where bytes would copy all that is pending at each read)
        pending = bytearray()
        nl = np.zeros(0, dtype=np.int64)   # newline positions in pending
        before = 0                         # text bytes before pending
        line = 1
        eof = False
        first_read = True
        while not eof:
            data = src.read(block_bytes)
            eof = not data
            if first_read:                 # (a byte-order mark: not text)
                first_read = False
                before = text_start(data, src.path)
                data = data[before:]
            if data:
                fresh = newline_positions(data)
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
                with memoryview(pending) as view:
                    text = bytes(view[start:cut])
                yield Block(text, line, src.path, src.tell(), before + cut)
                first_max_lines = None
                line += n_lines
                k0 += n_lines
                start = cut
            del pending[:start]
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


def first_lines(path, n=20, *, numbered=False):
    """Up to ``n`` non-blank, non-comment lines of the first 64 KiB of ``path``
    (``numbered``: ``(line number, line)`` pairs)."""
    src = _Source(path)
    try:
        head = src.read(1 << 16)
    finally:
        src.close()
    head = head[text_start(head, src.path):]
    lines = head.decode("utf-8", errors="replace").splitlines()
    if len(head) == 1 << 16 and lines:      # the last line may be cut:
        if len(lines) > 1:
            lines.pop()                     # drop it,
        else:                               # or its last (maybe cut) token
            lines[0] = lines[0].rsplit(None, 1)[0]
    out = [(i, ln) for i, ln in enumerate(lines, 1)
           if ln.strip() and not ln.lstrip().startswith("#")][:n]
    return out if numbered else [ln for _, ln in out]


def _misfits(fmt, lines):
    """The lines that are not in format ``fmt``: ``[(line number, reason),
    ...]`` (CoNLL: lines with another number of columns than most)."""
    bad = []
    if fmt == "vw":
        for i, ln in lines:
            if "|" not in ln:
                bad.append((i, "has no '|' (a VW line is 'label |namespace features')"))
    elif fmt == "svmlight":
        for i, ln in lines:
            tokens = ln.split("#", 1)[0].split()
            if not tokens or not _is_number(tokens[0]):
                bad.append((i, "does not start with a numeric label"))
                continue
            pairs = [t for t in tokens[1:] if not _is_svmlight_pair(t)]
            if pairs:
                bad.append((i, f"has {pairs[0][:30]!r}, not 'index:value'"))
    else:
        counts = [len(ln.split()) for _, ln in lines]
        n_cols = max(counts, key=counts.count)          # the most frequent (ties: first)
        for (i, _), n in zip(lines, counts):
            if n < 2:
                bad.append((i, "has 1 column (a CoNLL line is 'feature columns... label')"))
            elif n != n_cols:
                bad.append((i, f"has {n} columns, most lines {n_cols}"))
    return bad


def detect_format(path, n_lines=20):
    """``'vw'``, ``'svmlight'`` or ``'conll'``: the first format (in that
    order) that at least half of the first non-blank lines of ``path`` fit.

    Half, not all: a file with a bad line among good ones is read in the
    format of the good ones, whose parser then names the bad line and what
    is wrong with it (a garbage first line does not turn an svmlight file
    into CoNLL columns).

    Raises
    ------
    DataError
        If no format fits half the lines: the message names, for each format
        tried, the first line that does not fit it and why.
    """
    lines = first_lines(path, n_lines, numbered=True)
    if not lines:
        raise DataError(f"{path}: empty file (no data line)")
    why = {}
    for fmt in ("vw", "svmlight", "conll"):
        why[fmt] = _misfits(fmt, lines)
        if 2 * len(why[fmt]) <= len(lines):
            return fmt
    text = dict(lines)
    tried = "; ".join(f"{_FORMAT_NAMES[f]}: line {bad[0][0]} {bad[0][1]} "
                      f"({text[bad[0][0]][:60]!r})" for f, bad in why.items())
    raise DataError(f"{path}: cannot tell the format: no format fits half of the first "
                    f"{len(lines)} data line(s). Tried {tried}. Pass --format to read the "
                    "file in one format (its parser names the first bad line)")


_FORMAT_NAMES = {"vw": "Vowpal Wabbit", "svmlight": "svmlight", "conll": "CoNLL columns"}


def describe_format(fmt):
    """The format's name for messages (``'svmlight'``, ``'Vowpal Wabbit'``...)."""
    return _FORMAT_NAMES.get(fmt, fmt)


def _is_number(s):
    try:
        float(s)
    except ValueError:
        return False
    return True


def _is_svmlight_pair(t):
    a, _, b = t.partition(":")
    return (a.isdigit() or a == "qid") and _is_number(b)
