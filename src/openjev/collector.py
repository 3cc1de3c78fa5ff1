"""Python's cyclic garbage collector kept off the large, acyclic values a request brings.

A JSON body read into Python is acyclic (lists, dicts, strings, numbers): reference counting frees it.
The cyclic collector still walks every container it tracks, with the GIL held, so a value of many
containers stalls the event loop twice over (measured on the 2-core development machine, a 0.5 MB fit
body of 16 states of 50-deep lists, 240,000 values, within the body's value cap):

- while it is parsed: every 700 allocations a collection walks the young value, and the older
  generations walk it again as it grows (`orjson.loads` of that body: 157 ms with the collector on,
  10 ms paused);
- while it is alive: each full collection walks all of it (105-268 ms each under load, nine of them
  during one fit, collecting nothing; `/health/live` p99 over the fit 165-198 ms).

`paused()` turns automatic collection off while a body is parsed and validated (a time the body's value
cap bounds), and on again when the last concurrent parse ends; where it was off already it stays off.

`frozen()` keeps a fit's values out of the walk for the fit's life: at each fit's start everything the
collector tracks so far (the fit's examples among it) moves to the permanent generation (`gc.freeze`,
O(1)); when no fit runs any more it all goes back to the oldest generation (`gc.unfreeze`, O(1)) and is
walked again. Reference counting frees a fit's values as usual meanwhile. The price: cyclic garbage
already there when a fit starts is collected only once the last running fit has ended (at most
OPENJEV_TASK_MAX_FITS run at once, each within its readouts' timeouts).
"""

from __future__ import annotations

import contextlib
import gc
import threading
from collections.abc import Iterator

_lock = threading.Lock()
_pausing = _freezing = 0
_resume = False


@contextlib.contextmanager
def paused() -> Iterator[None]:
    """No automatic collection inside (module doc); nestable and safe across threads."""
    global _pausing, _resume
    with _lock:
        if _pausing == 0:
            _resume = gc.isenabled()
            gc.disable()
        _pausing += 1
    try:
        yield
    finally:
        with _lock:
            _pausing -= 1
            if _pausing == 0 and _resume:
                gc.enable()


@contextlib.contextmanager
def frozen() -> Iterator[None]:
    """What the collector tracks, frozen on entering; back when the last of those inside leaves (module doc)."""
    global _freezing
    with _lock:
        _freezing += 1
        gc.freeze()
    try:
        yield
    finally:
        with _lock:
            _freezing -= 1
            if _freezing == 0:
                gc.unfreeze()
