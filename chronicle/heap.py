"""The garbage collector of Chronicle's long-lived processes, settled once they have started.

Python's cyclic collector walks every tracked object of a generation, and its oldest
generation holds everything the process imported: Django, the apps, their models and
URL patterns, about a hundred thousand objects. Each full collection walked them all
again, and under load that was a pause of 50–170 ms in a frontend or the shard owner,
every few seconds, in the middle of some request or firing pass (measured with a
``gc.callbacks`` probe during a storm of 2,000 sleeps).

So a process that has finished starting freezes what it has (``gc.freeze``: those
objects are never walked again; they live as long as the process anyway) and collects
its youngest generation less often, so that the short-lived objects of a request or a
batch are mostly gone before a collection would promote them towards the oldest.
Cycles created later are still collected as before.
"""

from __future__ import annotations

import gc

# Allocations between collections of the youngest generation (Python's default: 700),
# and how many of each generation's collections make one of the next (defaults 10, 10).
YOUNG_THRESHOLD = 20_000
OLDER_THRESHOLDS = (20, 10)


def settle_after_start() -> None:
    """Collect once, freeze what start-up built, and space out young collections.

    Call it when the process has imported and configured everything it serves with
    (a frontend worker once its application is built, a daemon before its loop).
    """
    gc.collect()
    gc.freeze()
    gc.set_threshold(YOUNG_THRESHOLD, *OLDER_THRESHOLDS)
