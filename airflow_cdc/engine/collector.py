"""CPython's cyclic garbage collector while an engine runs.

The collector examines the young generation every ``threshold0`` (700 by default) allocations
of container objects. The engine builds about half a dozen per change (records, envelopes,
serialized forms) and keeps thousands in flight between the source and the consumer, so every
few hundred changes a collection walks objects that reference counting frees anyway, and the
survivors it promotes make the older generations' passes more frequent and longer. Measured here
(``bench/pg_snapshot.py --quick``): 166k-205k rows/s with the default, 246k-254k with 10000;
peak RSS unchanged (the engine makes no reference cycles of its own).

While at least one engine runs, the young-generation threshold is at least
``gc.generation0.threshold``; when the last one stops, the interpreter's own setting comes back
(unless something else changed it meanwhile). The setting is per process: an application that
tunes the collector itself sets ``gc.generation0.threshold=0``.
"""

from __future__ import annotations

import gc
import threading

_lock = threading.Lock()
_holders = 0
_saved: tuple[int, int, int] | None = None
_ours: tuple[int, int, int] | None = None


def raise_threshold(threshold0: int) -> bool:
    """Raise the young generation's threshold to ``threshold0`` (if it is lower); True if this
    call holds the setting and must :func:`release` it."""
    global _holders, _saved, _ours
    if threshold0 <= 0:
        return False
    with _lock:
        if _holders == 0:
            current = gc.get_threshold()
            if current[0] >= threshold0 or current[0] == 0:  # already higher, or collection disabled
                return False
            _saved = current
            _ours = (threshold0, current[1], current[2])
            gc.set_threshold(*_ours)
        _holders += 1
        return True


def release() -> None:
    """One holder is done; the last one puts the saved thresholds back."""
    global _holders, _saved, _ours
    with _lock:
        _holders -= 1
        if _holders == 0:
            if _saved is not None and gc.get_threshold() == _ours:
                gc.set_threshold(*_saved)
            _saved = _ours = None
