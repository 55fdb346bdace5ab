"""Streaming data files in chunks: the pre-scan, the training featurizer, chunks, shuffling.

``scan`` reads the files once (compiled scans, no feature parsing) for what
training needs first: rows, classes, svmlight's index range, CoNLL's columns;
``make_featurizer`` builds the training featurizer from it. ``iter_chunks``
yields the ``Chunk`` s of the files (``_files.iter_blocks`` parsed by a
featurizer of ``_featurizers``) and ``shuffled`` passes them through a
shuffle buffer. Memory holds one block and one chunk (plus the shuffle
buffer, if any), never the file.

``ReadAhead`` runs such a stream on a reader thread, a few chunks ahead of
the learner: the compiled parsers and the learners' passes release the GIL,
so that reading and parsing the next chunk overlaps training on this one.
"""
import mmap
import os
import queue
import threading
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

from .._text import count_newlines, newline_positions, scan_svmlight, scan_vw
from ._featurizers import Chunk, ConllFeaturizer, SvmlightFeaturizer, VWFeaturizer
from ._files import Block, DataError, first_lines, iter_blocks, text_start
from ._templates import BUILTIN_TEMPLATES, parse_template


@dataclass
class ScanResult:
    """What training needs to know of the whole data before the first chunk
    (``labels``: the scan's ``LabelNote``, None without a scan)."""

    n_rows: int
    n_units: int
    classes: np.ndarray
    min_index: int = -1
    max_index: int = -1
    n_columns: int = 0
    labels: object = None


class LabelNote:
    """What the scan notes of the numeric labels beyond their set: the first
    that is not an integer (a regression target), and whether the set grew
    past ``max_labels``.

    The set stops growing past ``max_labels`` (a regressor needs only to
    know whether the labels are two classes), and past 20 labels once a
    non-integer one is seen (the file is not one of class labels): a real
    target of millions of distinct values is then not held whole.
    """

    def __init__(self, max_labels=None):
        self.max_labels = max_labels
        self.real = None        # (path, the first non-integer label) or None
        self.many = False       # the set stopped growing

    def note(self, labels, path):
        """This note, having seen ``labels`` (of ``path``)."""
        self.add(None, np.unique(labels), path)
        return self

    def add(self, classes, u, path):
        """``classes`` united with a block's distinct labels ``u`` (of ``path``)."""
        if u.dtype.kind != "f":
            return u if classes is None else np.union1d(classes, u)
        if self.real is None:
            frac = u[np.isfinite(u) & (u != np.floor(u))]
            if frac.size:
                self.real = (str(path), float(frac[0]))
        cap = self.max_labels if self.real is None else min(20, self.max_labels or 20)
        if classes is not None and cap is not None and classes.size > cap:
            self.many = True
            return classes
        return u if classes is None else np.union1d(classes, u)


def scan(paths, fmt, *, featurizer=None, read_ahead=False, max_labels=None):
    """Rows, classes (and svmlight's index range / CoNLL's columns) of the files.

    Compiled scans for svmlight and VW (no feature parsing); CoNLL files are
    split into columns (the label column is what is needed). With
    ``read_ahead``, a reader thread reads the next blocks of the file while
    two are scanned at once (the compiled scans release the GIL). The
    result's ``labels`` (``LabelNote``) says whether a label is not an
    integer; ``max_labels`` bounds the classes collected.
    """
    note = LabelNote(max_labels)
    n_rows = n_units = 0
    lo, hi, n_columns = -1, -1, 0
    classes = None
    for path in paths:
        if fmt == "conll" and n_columns == 0:
            n_columns = len(first_lines(path, 1)[0].split()) if first_lines(path, 1) else 0
            if n_columns < 2:
                raise DataError(f"{path}: a CoNLL file needs at least 2 columns (features "
                                "and the label)")
            featurizer = ConllFeaturizer(10, n_columns, "U:%x[0,0]")
        if fmt != "conll" and _mappable(path):
            results = _mapped_scans(path, _SCANNERS[fmt], concurrent=read_ahead)
            try:
                n_rows, n_units, lo, hi, classes = _scan_blocks(
                    None, path, fmt, featurizer, n_rows, n_units, lo, hi, classes,
                    results=results, note=note)
            finally:
                results.close()
            continue
        blocks = (iter_blocks(path, 1 << 16, sentences=True) if fmt == "conll" else
                  iter_blocks(path, None, block_bytes=1 << 24))
        if read_ahead:
            blocks = ReadAhead(blocks, 2)
        try:
            n_rows, n_units, lo, hi, classes = _scan_blocks(
                blocks, path, fmt, featurizer, n_rows, n_units, lo, hi, classes,
                concurrent=read_ahead and fmt != "conll", note=note)
        finally:
            if read_ahead:
                blocks.close()
    if n_rows == 0:
        raise DataError(f"{', '.join(map(str, paths))}: no data rows")
    return ScanResult(n_rows, n_units, classes, lo, hi, n_columns, note)


_SCANNERS = {"svmlight": scan_svmlight, "vw": scan_vw}
#: Bytes of a plain file scanned at a time (``_mapped_scans``).
MAPPED_PIECE_BYTES = 1 << 24


def _mappable(path):
    """A regular, uncompressed file (a pipe or a gzip file is read in blocks)."""
    if not os.path.isfile(path):
        return False
    with open(path, "rb") as f:
        return f.read(2) != b"\x1f\x8b"


def _map_file(path):
    """A read-only mapping of the file at ``path``, or None when it is empty
    (an empty file cannot be mapped)."""
    with open(path, "rb") as f:
        if os.fstat(f.fileno()).st_size == 0:
            return None
        return mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)


def _release_pages(m, start, stop):
    """Give back the pages of bytes ``start:stop`` of the mapping ``m`` (they
    are read again from the file if touched); a no-op where the system has no
    ``MADV_DONTNEED``."""
    release = getattr(mmap, "MADV_DONTNEED", None)
    if release is not None:
        first_page = start - start % mmap.PAGESIZE
        m.madvise(release, first_page, stop - first_page)


def _mapped_scans(path, scanner, concurrent):
    """``(None, scanner(piece, first_line))`` for the pieces of a plain file,
    about ``MAPPED_PIECE_BYTES`` each, cut after a newline, in order.

    The pieces are read in a read-only mapping of the file: no copy into
    Python's memory, and each piece's pages are released once it is scanned,
    so that the memory held is two pieces whatever the file's size.
    ``concurrent``: two pieces scanned at once (the scans release the GIL).
    The pieces are scanned from line 1; a bad line's message is made again
    with the lines before its piece counted.
    """
    piece_bytes = MAPPED_PIECE_BYTES
    m = _map_file(path)
    if m is None:
        return
    size, view = len(m), memoryview(m)
    cuts = [text_start(m[:4], path)]         # (after a byte-order mark)
    while cuts[-1] < size:
        nl = m.find(b"\n", min(cuts[-1] + piece_bytes, size) - 1)
        cuts.append(size if nl < 0 else nl + 1)
    pieces = [view[a:b] for a, b in zip(cuts[:-1], cuts[1:])]

    def scanned(k):
        try:
            return scanner(pieces[k], 1)
        except ValueError:
            line = 1 + sum(count_newlines(pieces[j]) for j in range(k))
            return scanner(pieces[k], line)     # (raises, naming the line)

    try:
        with ThreadPoolExecutor(2 if concurrent else 1,
                                thread_name_prefix="skso-scan") as pool:
            pending = deque()

            def oldest():
                done, future = pending.popleft()
                result = future.result()
                _release_pages(m, cuts[done], cuts[done + 1])  # (once scanned)
                return None, result

            try:
                for k in range(len(pieces)):
                    pending.append((k, pool.submit(scanned, k)))
                    if len(pending) == 2:
                        yield oldest()
                while pending:
                    yield oldest()
            finally:
                for _, future in pending:
                    future.cancel()
    finally:
        for piece in pieces:
            piece.release()
        view.release()
        m.close()


def _scanned(blocks, scanner, concurrent):
    """``(block, scanner(block.data, block.first_line))`` in the blocks'
    order; ``concurrent``: two blocks scanned at once on a pool of two
    threads (an error is raised at its block, after the blocks before it)."""
    if not concurrent:
        for block in blocks:
            yield block, scanner(block.data, block.first_line)
        return
    with ThreadPoolExecutor(2, thread_name_prefix="skso-scan") as pool:
        pending = deque()
        try:
            for block in blocks:
                pending.append((block, pool.submit(scanner, block.data, block.first_line)))
                if len(pending) == 2:
                    done, future = pending.popleft()
                    yield done, future.result()
            while pending:
                done, future = pending.popleft()
                yield done, future.result()
        finally:
            for _, future in pending:
                future.cancel()


def _scan_blocks(blocks, path, fmt, featurizer, n_rows, n_units, lo, hi, classes,
                 concurrent=False, results=None, note=None):
    """``scan``'s loop over the blocks of one file (or the ``(block,
    scanned)`` pairs of ``results``): the running totals (the label set
    grown by ``note``, a ``LabelNote``)."""
    note = LabelNote() if note is None else note
    scanner = _SCANNERS.get(fmt)
    if results is None:
        results = (_scanned(blocks, scanner, concurrent) if scanner is not None
                   else ((block, None) for block in blocks))
    while True:
        try:
            block, scanned = next(results)
        except StopIteration:
            break
        except DataError:
            raise                      # (the reader's, naming its file already)
        except ValueError as e:        # (a scan's, naming the line)
            raise DataError(f"{path}, {e}") from None
        if fmt == "svmlight":
            labels, a, b = scanned
            if a >= 0:
                lo = a if lo < 0 else min(lo, a)
                hi = max(hi, b)
            units = labels.size
        elif fmt == "vw":
            labels = scanned
            if np.isnan(labels).any():
                at = int(np.flatnonzero(np.isnan(labels))[0])
                raise DataError(f"{path}: row {n_rows + at + 1} has no label "
                                "(training needs every row's label)")
            units = labels.size
        else:
            fields, offsets = featurizer.split(block, labelled=True)
            labels = np.char.decode(fields[:, -1], "utf-8")
            units = offsets.size - 1
        classes = note.add(classes, np.unique(labels), path)
        n_rows += labels.size
        n_units += units
    return n_rows, n_units, lo, hi, classes


def make_featurizer(fmt, scanned, *, hash_bits, zero_based=None, template=None):
    """The featurizer of training data, from the pre-scan and the options."""
    if fmt == "svmlight":
        if zero_based is None:
            zero_based = scanned.min_index == 0
        if not zero_based and scanned.min_index == 0:
            raise DataError("the data have feature index 0 but --one-based was given")
        return SvmlightFeaturizer(scanned.max_index + (1 if zero_based else 0), zero_based,
                                  training=True)
    if fmt == "vw":
        return VWFeaturizer(hash_bits)
    n_feat = scanned.n_columns - 1
    if template is None:
        template = "chunking" if n_feat >= 2 else "words"
    if template in BUILTIN_TEMPLATES:
        text = BUILTIN_TEMPLATES[template]
    else:
        try:
            with open(template, encoding="utf-8-sig") as f:
                text = f.read()
        except OSError as e:
            raise DataError(f"cannot read the template file {template!r}: {e}") from None
    parse_template(text, n_feat, source=str(template))     # checked against the columns
    return ConllFeaturizer(hash_bits, scanned.n_columns, text)


# ---- streaming ------------------------------------------------------------------------
def iter_chunks(paths, featurizer, chunk_size, *, first_chunk_size=None, keep_text=True):
    """Chunks of about ``chunk_size`` rows (lines; CoNLL: whole sentences of
    at least ``chunk_size`` lines), the very first of ``first_chunk_size``.

    ``keep_text=False`` drops each block's text once it is parsed (its
    ``data`` is then ``b""``): a chunk waiting in a read-ahead queue then
    holds its rows, not their text besides (a block's text is about 0.75x
    the CSR rows it parses into on hashed CoNLL tokens).

    Yields
    ------
    chunk : Chunk
    block : Block
        The block it was parsed from (position in the file, line numbers).
    """
    first = first_chunk_size
    for path in paths:
        if not keep_text and not featurizer.sentences and _mappable(path):
            blocks = _mapped_blocks(path, chunk_size, first)
        else:
            blocks = iter_blocks(path, chunk_size, first_max_lines=first,
                                 sentences=featurizer.sentences)
        for block in blocks:
            first = None
            chunk = featurizer.parse(block)
            if not keep_text:
                block.data = b""
            if chunk.n_rows:
                yield chunk, block


#: Bytes of a plain file searched for newlines at a time (``_mapped_blocks``).
MAPPED_WINDOW_BYTES = 1 << 22


def _mapped_blocks(path, max_lines, first_max_lines=None):
    """``iter_blocks(path, max_lines, first_max_lines=...)`` of a plain file,
    its blocks' ``data`` read-only views of a mapping of the file.

    No block is copied into Python's memory (``iter_blocks`` reads into a
    buffer, then copies each block out of it), and a block's pages are
    released once the consumer asks for the next block: the memory held is
    the block being parsed, whatever the file's size. The consumer must not
    keep a block's ``data`` past that (``iter_chunks(keep_text=False)``
    drops it once parsed).
    """
    m = _map_file(path)
    if m is None:
        return
    size, view = len(m), memoryview(m)
    try:
        start = text_start(m[:4], path)         # (after a byte-order mark)
        line = 1
        limit = first_max_lines or max_lines
        while start < size:
            cut, found, pos = size, 0, start    # (the file's end, unless `limit` lines)
            while pos < size:
                stop = min(size, pos + MAPPED_WINDOW_BYTES)
                with view[pos:stop] as window:
                    nl = newline_positions(window)
                if found + nl.size >= limit:
                    cut = pos + int(nl[limit - found - 1]) + 1
                    found = limit
                    break
                found += nl.size
                pos = stop
            piece = view[start:cut]
            try:
                yield Block(piece, line, str(path), cut, cut)
            finally:
                piece.release()
                _release_pages(m, start, cut)   # (once parsed)
            line += found
            start = cut
            limit = max_lines
    finally:
        view.release()
        m.close()


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


# ---- the reader thread -----------------------------------------------------------------
_END = object()         # the reader's last item: the end of the stream, or its error


class ReadAhead:
    """The items of an iterable, produced on a reader thread up to ``depth`` ahead.

    The thread iterates ``items`` (a stream of chunks: reading, parsing,
    shuffling) and puts them in a queue of ``depth`` items, while the caller
    trains on the previous one: memory holds at most ``depth + 2`` chunks
    (the queue's, the one being parsed and the one being trained on). The
    items come in the same order as from ``items`` itself; an exception of
    the reader (a bad line's ``DataError``) is raised by ``__next__`` in the
    caller's thread, after the items before it.

    ``close`` (also on leaving a ``with`` block, and at the end of the
    stream) stops the thread and waits for it: it finishes the item it is
    parsing and closes ``items`` (its files) in its own thread. The thread
    is a daemon, so that even an unclosed reader never holds up the exit.

    Parameters
    ----------
    items : iterable
        Iterated on the reader thread only.
    depth : int, default=2
        Items parsed ahead (the queue's size).
    """

    def __init__(self, items, depth=2):
        self._queue = queue.Queue(maxsize=max(1, int(depth)))
        self._stop = threading.Event()
        self._done = False
        self._thread = threading.Thread(target=self._read, args=(items,),
                                        name="skso-reader", daemon=True)
        self._thread.start()

    def _put(self, item):
        # wait for room in the queue, but not for a caller that has stopped
        # taking items (an error in training, Ctrl-C)
        while not self._stop.is_set():
            try:
                self._queue.put(item, timeout=0.05)
                return True
            except queue.Full:
                pass
        return False

    def _read(self, items):
        it = iter(items)
        try:
            for item in it:
                if not self._put((item, None)) or self._stop.is_set():
                    return
            self._put((_END, None))
        except BaseException as e:      # (any: handed to the caller, raised there)
            self._put((_END, e))
        finally:
            close = getattr(it, "close", None)
            if close is not None:       # a generator: its files close now, here
                close()

    def __iter__(self):
        return self

    def __next__(self):
        if self._done:
            raise StopIteration
        item, error = self._queue.get()
        if item is _END:
            self.close()
            if error is not None:
                raise error
            raise StopIteration
        return item

    def close(self):
        """Stop the reader thread and wait for it (the items left are dropped)."""
        self._done = True
        self._stop.set()
        while True:                     # free the parsed chunks, wake a blocked put
            try:
                self._queue.get_nowait()
            except queue.Empty:
                break
        if self._thread is not threading.current_thread():
            self._thread.join()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False
