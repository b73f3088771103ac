"""Grouping a user's job names into "similar name" clusters, cheaply.

Helios' rolling predictor averages a user's jobs *with a similar name*. Comparing every
new name with every earlier one (``difflib`` ratio) is quadratic in a user's history,
too slow on 80k-job traces, so names are grouped once, when first seen:

1. a name's *stem* (lower-cased, each run of digits replaced by ``#``, so
   ``bert_lr0.1_run12`` and ``bert_lr0.3_run7`` share ``bert_lr#.#_run#``) that the user
   already has joins that cluster (a dictionary lookup);
2. otherwise the stem is compared with the user's ``max_compare`` most recent cluster
   leaders by ``difflib.SequenceMatcher.ratio`` (with the cheap upper bounds first) and
   joins the first leader at or above ``cutoff``;
3. otherwise it leads a new cluster.

The result is cached per (user, name), so each distinct name pays at most
``max_compare`` comparisons once. Cluster ids are assigned in first-seen order, so the
grouping is deterministic.
"""

from __future__ import annotations

import re
from difflib import SequenceMatcher

_DIGITS = re.compile(r"\d+")


def name_stem(name: str) -> str:
    """``name`` lower-cased with every run of digits replaced by ``#``."""
    return _DIGITS.sub("#", name.strip().lower())


class NameClusters:
    """Per-user clusters of similar job names (leader clustering on name stems)."""

    def __init__(self, cutoff: float = 0.8, max_compare: int = 64):
        if not 0.0 < cutoff <= 1.0:
            raise ValueError("name similarity cutoff must be in (0, 1]")
        self.cutoff = cutoff
        self.max_compare = max_compare
        self._cache: dict[tuple[str, str], int] = {}
        self._stems: dict[tuple[str, str], int] = {}
        self._leaders: dict[str, list[tuple[str, int]]] = {}
        self._next = 0

    def cluster(self, user: str, name: str) -> int:
        """The cluster id of ``name`` among ``user``'s names; -1 when the job has no name."""
        if not name:
            return -1
        key = (user, name)
        found = self._cache.get(key)
        if found is not None:
            return found
        stem = name_stem(name)
        found = self._stems.get((user, stem))
        if found is None:
            found = self._match(user, stem)
            self._stems[(user, stem)] = found
        self._cache[key] = found
        return found

    def _match(self, user: str, stem: str) -> int:
        leaders = self._leaders.setdefault(user, [])
        matcher = SequenceMatcher(None, autojunk=False)
        matcher.set_seq2(stem)
        cutoff = self.cutoff
        for leader, cluster in reversed(leaders[-self.max_compare :]):
            matcher.set_seq1(leader)
            if matcher.real_quick_ratio() >= cutoff and matcher.quick_ratio() >= cutoff and matcher.ratio() >= cutoff:
                return cluster
        cluster = self._next
        self._next += 1
        leaders.append((stem, cluster))
        return cluster
