"""Threads inside one fit: ``n_jobs`` resolution and a deterministic runner.

An estimator's ``n_jobs`` here means threads working on *one* model (the
compiled kernels release the GIL), not joblib workers fitting several. The
rules, shared by every estimator that takes such an ``n_jobs``:

- ``effective_n_jobs``: scikit-learn's convention (None is 1, -1 all the
  cores, -2 all but one, ...), with a ValueError naming the parameter for
  anything else. None is always 1, even inside a ``joblib.parallel_config``
  context: the number of threads changes the order of the floating-point
  sums, so the default must not depend on the caller's context.
- ``balanced_chunks``: a fixed partition of the items (sequences, rows) into
  contiguous chunks of about equal total size.
- ``ThreadRunner``: runs one call per chunk, the calling thread taking the
  first chunk, and returns the results in chunk order, so that the caller
  reduces them in a fixed order and a given ``n_jobs`` gives the same model
  bit for bit on every run.
"""
import copy
from concurrent.futures import ThreadPoolExecutor
from numbers import Integral

import joblib
import numpy as np


def check_n_jobs(n_jobs, name="n_jobs"):
    """Refuse an ``n_jobs`` that is not None or a non-zero int.

    Parameters
    ----------
    n_jobs : object
        The value given.
    name : str, default='n_jobs'
        The parameter's name, for the message.

    Raises
    ------
    ValueError
        Naming the parameter and the value.
    """
    if n_jobs is None:
        return
    if (isinstance(n_jobs, (bool, np.bool_)) or not isinstance(n_jobs, Integral)
            or n_jobs == 0):
        raise ValueError(f"{name} must be None or a non-zero int (1 thread, 2, ...; -1 "
                         f"for all the cores, -2 for all but one), got {n_jobs!r}.")


def effective_n_jobs(n_jobs, name="n_jobs"):
    """The number of threads ``n_jobs`` asks for.

    Parameters
    ----------
    n_jobs : int or None
        None is 1; a positive int is that many threads; a negative one is
        ``n_cpus + 1 + n_jobs`` (-1: all the cores, -2: all but one), at
        least 1. ``n_cpus`` is ``joblib.cpu_count()``, which honours the
        process's CPU affinity and a container's CPU quota.
    name : str, default='n_jobs'
        The parameter's name, for the error message.

    Returns
    -------
    n_threads : int
        At least 1.

    Raises
    ------
    ValueError
        If ``n_jobs`` is 0 or not an int (see `check_n_jobs`).
    """
    check_n_jobs(n_jobs, name)
    if n_jobs is None:
        return 1
    if n_jobs > 0:
        return int(n_jobs)
    return max(1, joblib.cpu_count() + 1 + int(n_jobs))


def balanced_chunks(offsets, n_chunks):
    """Boundaries of contiguous chunks of items of about equal total size.

    Parameters
    ----------
    offsets : array-like of int, shape (n_items + 1,)
        Cumulative sizes: item ``i`` spans ``offsets[i] .. offsets[i + 1]``
        (e.g. the first token of every sequence, and the total).
    n_chunks : int
        The number of chunks wanted (at least 1).

    Returns
    -------
    bounds : int64 ndarray of shape (k + 1,)
        Chunk ``c`` is items ``bounds[c] .. bounds[c + 1]``, never empty;
        ``k <= n_chunks`` (fewer when there are fewer items, or when items
        so large that two cuts fall on the same boundary). A function of
        ``offsets`` and ``n_chunks`` only, so the partition, and the order
        of the sums over it, is the same on every run.
    """
    offsets = np.asarray(offsets, dtype=np.int64)
    n_items = offsets.size - 1
    k = max(1, min(int(n_chunks), n_items))
    total = offsets[-1] - offsets[0]
    # the cut nearest to each of the k - 1 equal shares of the total size (the
    # lower one on a tie)
    targets = offsets[0] + total * np.arange(1, k) / k
    cuts = np.searchsorted(offsets, targets)
    lower = np.maximum(cuts - 1, 0)
    cuts = np.where(targets - offsets[lower] <= offsets[cuts] - targets, lower, cuts)
    inner = cuts[(cuts > 0) & (cuts < n_items)]
    return np.unique(np.concatenate(([0], inner, [n_items]))).astype(np.int64)


def copy_state(src, into=None):
    """A deep copy of a training state, written into ``into``'s arrays when it can.

    A thread's copy of the state is made afresh at every pass; writing it
    into the arrays of the previous pass's copy (same shapes and dtypes)
    avoids allocating, and first touching, the whole state again, which on
    Linux costs more than the copy itself (and a worker thread's large
    allocations come from fresh pages every time). Objects with a
    ``__dict__`` (dataclasses) are copied field by field, recursively;
    anything else is deep-copied.

    Parameters
    ----------
    src : object
        The state to copy (not modified).
    into : object or None, default=None
        A state of the same kind to reuse (its arrays are overwritten), or
        None for a plain ``copy.deepcopy``. It must share no array with
        ``src``.

    Returns
    -------
    copy : object
        ``into``, updated to equal ``src``, or a new deep copy.
    """
    if into is None or type(into) is not type(src) or not hasattr(src, "__dict__"):
        return copy.deepcopy(src)
    for name, value in vars(src).items():
        old = vars(into).get(name)
        if (isinstance(value, np.ndarray) and isinstance(old, np.ndarray)
                and old.shape == value.shape and old.dtype == value.dtype
                and old.flags.writeable and old.flags.c_contiguous
                and not np.may_share_memory(old, value)):
            np.copyto(old, value)
        elif hasattr(value, "__dict__") and not isinstance(value, np.ndarray) and (
                type(old) is type(value)) and not isinstance(value, np.random.RandomState):
            setattr(into, name, copy_state(value, old))
        else:
            setattr(into, name, copy.deepcopy(value))
    for name in [k for k in vars(into) if k not in vars(src)]:
        delattr(into, name)
    return into


def shard_order(order, work, n_shards):
    """A pass's visiting order cut into contiguous shards of about equal work.

    Parameters
    ----------
    order : ndarray of int
        The items (rows, sequences) in the order the pass visits them.
    work : ndarray of int
        The work of every item, indexed by item (e.g. its non-zeros).
    n_shards : int
        The shards wanted (the threads).

    Returns
    -------
    shards : list of ndarray
        Views of ``order``, in order, never empty (fewer than ``n_shards``
        when there are fewer items): `balanced_chunks` of the cumulated work.
    """
    bounds = balanced_chunks(np.concatenate(([0], np.cumsum(work[order]))), n_shards)
    return [order[a:b] for a, b in zip(bounds[:-1], bounds[1:])]


def sharded_pass(runner, start, order, work, run_shard, mix, spare):
    """One pass split between the threads of ``runner``, each on its own copy.

    ``order`` is cut into contiguous shards of about equal ``work``
    (`shard_order`); each thread takes a copy of the state ``start``
    (`copy_state`, into a state of ``spare`` while there is one) and runs
    ``run_shard(shard, copy)``, which passes over its shard without the GIL
    and returns the copy; ``mix(states, shares, start)`` then mixes the
    copies, each weighted by its shard's share of the items. The partition and the order
    of the sums depend on ``order``, ``work`` and the threads only, so a
    given ``n_jobs`` gives the same model bit for bit; the caller replaces
    its state only when every thread has finished without error.

    Returns
    -------
    mixed : state
        ``mix``'s result.
    states : list of state
        The threads' copies after their shard (the first may live on in the
        mix; the others are free for the next pass's ``spare``).
    shares : list of float
        Each shard's share of the items.
    """
    shards = shard_order(order, work, runner.n_threads)
    copies = [copy_state(start, spare.pop() if spare else None) for _ in shards]
    states = runner.map(lambda job: run_shard(*job), list(zip(shards, copies)))
    shares = [shard.size / order.size for shard in shards]
    return mix(states, shares, start), states, shares


class ThreadRunner:
    """Run one call per chunk on ``n_threads`` threads; results in chunk order.

    The calling thread runs the first chunk and a pool of ``n_threads - 1``
    threads the others (each call should release the GIL for its work). With
    one thread there is no pool: the calls run one after the other in the
    caller, exactly as without the runner. Use it as a context manager (the
    pool is made on entry and joined on exit), one per fit.

    Parameters
    ----------
    n_threads : int
        At least 1 (`effective_n_jobs`).
    """

    def __init__(self, n_threads):
        if not isinstance(n_threads, Integral) or n_threads < 1:
            raise ValueError(f"n_threads must be an int >= 1, got {n_threads!r}.")
        self.n_threads = int(n_threads)
        self._pool = None

    def __enter__(self):
        if self.n_threads > 1:
            self._pool = ThreadPoolExecutor(max_workers=self.n_threads - 1,
                                            thread_name_prefix="skso")
        return self

    def __exit__(self, *exc):
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None
        return False

    def map(self, fn, items):
        """``[fn(item) for item in items]``, the calls spread over the threads.

        Every call has finished when this returns or raises (no thread is
        still writing into the caller's buffers); if calls fail, the
        exception of the first failed item, in item order, is raised.

        Parameters
        ----------
        fn : callable
            Called once per item.
        items : sequence
            The chunks.

        Returns
        -------
        results : list
            ``fn(item)`` for every item, in the order of ``items``.
        """
        items = list(items)
        if self._pool is None or len(items) <= 1:
            return [fn(item) for item in items]
        futures = [self._pool.submit(fn, item) for item in items[1:]]
        results, errors = [None] * len(items), [None] * len(items)
        try:
            results[0] = fn(items[0])
        except BaseException as exc:     # (re-raised below, after the others finish)
            errors[0] = exc
        for i, fut in enumerate(futures, start=1):
            try:
                results[i] = fut.result()
            except BaseException as exc:
                errors[i] = exc
        failed = next((e for e in errors if e is not None), None)
        if failed is not None:
            raise failed
        return results
