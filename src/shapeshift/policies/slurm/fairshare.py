"""Fair share as Slurm's multifactor plugin computes it: decayed usage over the
association tree, then Fair Tree ranks (the default) or the classic ``2^(-U/S)``.

Sources (Slurm ``master`` after 25.05, commit 284c3b95; the rules are unchanged since
19.05): ``src/plugins/priority/multifactor/priority_multifactor.c`` (``_decay_thread``:
``decay_factor = 1 - 0.693 / PriorityDecayHalfLife``, each calc period multiplies all
usage by ``decay_factor ** elapsed`` and charges each running job
``elapsed * decay_factor ** elapsed * billable TRES``; ``set_assoc_usage_norm``;
``_set_usage_efctv``: ``UE = UA + (UE_parent - UA) * S_child / S_siblings``;
``priority_p_calc_fs_factor``: ``2^(-UE / S_norm)``) and ``fair_tree.c`` (``level_fs =
S / U`` with ``S`` the share among siblings and ``U`` the usage over the parent's;
siblings sorted by ``level_fs`` descending, users before accounts on ties; a user's
factor is its rank / number of users, tied users sharing a rank). Docs:
https://slurm.schedmd.com/priority_multifactor.html and
https://slurm.schedmd.com/fair_tree.html.

Fair Tree is the default because Slurm's is (``read_config.c`` sets
``PRIORITY_FLAGS_FAIR_TREE`` unless ``PriorityFlags=NO_FAIR_TREE``); the classic formula
is used when the configuration turns Fair Tree off.

Usage is kept in one numpy array indexed by association, so that a calculation decays
every association at once and charges every running job with a few array operations
(``charge``) rather than one walk up the tree per job; the sums are added in the same
order as job-by-job charging, so the values are the same to the last bit.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

from shapeshift.slurm.assoc import USE_PARENT, Assoc, assoc_key


class FairShare:
    """Usage per association (decayed) and the fair-share factor of each user association."""

    def __init__(self, tree: Mapping[str, Assoc], half_life: float, fair_tree: bool = True):
        self.tree = dict(tree)
        self.fair_tree = fair_tree
        #: Per-second decay, Slurm's first-order approximation of 2^(-1/half_life).
        self.decay = 1 - 0.693 / half_life if half_life > 0 else 1.0
        #: Each association's position in ``_usage`` (the tree's order, then as added).
        self.index: dict[str, int] = {k: i for i, k in enumerate(self.tree)}
        self._usage = np.zeros(max(len(self.tree), 8))
        self.children: dict[str, list[str]] = {k: [] for k in self.tree}
        for key, assoc in self.tree.items():
            if key != "root":
                self.children.setdefault(self._parent_key(assoc), []).append(key)
        #: Each association's factor (``index`` order; 0 for accounts), and as a list.
        self._values = np.zeros(0)
        self._value_list: list[float] = []
        self._level: dict[str, float] = {}  # sum of shares per parent, rebuilt when the tree grows
        #: Per depth, each association's ancestor at that depth (-1: none); rebuilt when the tree grows.
        self._ancestors: list[np.ndarray] | None = None
        #: Per association (``index`` order): keys, parent index, share, user?, USE_PARENT?
        self._static: tuple | None = None
        self._user_flags: tuple[dict[str, bool], list[int], int] | None = None
        #: ``_ranked``'s tie-breaks, positions and users, for the ``_static`` they were built from.
        self._rank_static: tuple | None = None
        self._dirty = True

    @property
    def usage(self) -> dict[str, float]:
        """Each association's decayed usage (a copy)."""
        values = self._usage.tolist()
        return {k: values[i] for k, i in self.index.items()}

    def ensure(self, account: str, user: str) -> str:
        """The key of ``user`` in ``account``, adding the account under root and the user
        with Slurm's default share (1) when the tree lacks them."""
        key = assoc_key(account, user)
        if key in self.tree:
            return key
        for new in ([Assoc(account, "", "root", 1)] if account not in self.tree else []) + [
            Assoc(account, user, account, 1)
        ]:
            self.tree[new.key] = new
            self.index[new.key] = len(self.index)
            if len(self.index) > self._usage.size:
                self._usage = np.concatenate((self._usage, np.zeros(self._usage.size)))
            self.children[new.key] = []
            self.children.setdefault(self._parent_key(new), []).append(new.key)
        self._level.clear()
        self._ancestors = None
        self._static = None
        self._dirty = True
        return key

    def _parent_key(self, assoc: Assoc) -> str:
        return assoc.parent if assoc.parent in self.tree else "root"

    def add_usage(self, key: str, amount: float) -> None:
        """Charge ``amount`` (billable TRES-seconds, already decayed) to ``key`` and every
        account above it, as ``_apply_new_usage`` does up the ``fs_assoc_ptr`` chain."""
        while True:
            self._usage[self.index[key]] += amount
            if key == "root":
                return
            key = self._parent_key(self.tree[key])

    def charge(self, keys: np.ndarray, amounts: np.ndarray) -> None:
        """``add_usage(k, a)`` for each pair of association index ``keys[i]`` and amount
        ``amounts[i]``, in that order. An association has one depth, so all its charges
        are added by one ``np.add.at`` (which adds in order): the same sums as one by one."""
        if not keys.size:
            return
        for level in self._ancestry():
            targets = level[keys]
            hit = targets >= 0
            np.add.at(self._usage, targets[hit], amounts[hit])

    def _ancestry(self) -> list[np.ndarray]:
        if self._ancestors is None:
            chains: list[list[int]] = []
            for key in self.index:
                chain = [self.index[key]]
                while key != "root":
                    key = self._parent_key(self.tree[key])
                    chain.append(self.index[key])
                chains.append(chain[::-1])  # root first: position = depth
            depth = max(len(c) for c in chains)
            table = np.full((depth, len(chains)), -1, dtype=np.int64)
            for i, chain in enumerate(chains):
                table[: len(chain), i] = chain
            self._ancestors = list(table)
        return self._ancestors

    def decay_all(self, elapsed: float) -> None:
        if self.decay != 1.0 and elapsed > 0:
            self._usage *= self.decay**elapsed

    def charge_tick(self, elapsed: float, running: list[tuple[str, float]]) -> None:
        """One calc period of ``elapsed`` seconds: decay, then charge each running job
        ``(key, billable TRES)`` for the period (``run_decay = elapsed * decay**elapsed``)."""
        self.decay_all(elapsed)
        run_decay = elapsed * (self.decay**elapsed)
        for key, billable in running:
            self.add_usage(key, run_decay * billable)
        self.recompute()

    def factor(self, key: str) -> float:
        i = self.index.get(key)
        if self._dirty:
            self.factor_values()
        return self._value_list[i] if i is not None else 0.0

    def factor_values(self) -> np.ndarray:
        """Every association's factor, in ``index`` order (0 for an account), recomputed
        when usage or the tree changed: a calculation reads the queue's from it."""
        if self._dirty:
            values = self._fair_tree() if self.fair_tree else self._by_index(self._classic())
            self._values, self._value_list = values, values.tolist()
            self._dirty = False
        return self._values

    def _by_index(self, factors: dict[str, float]) -> np.ndarray:
        """``factors`` (user association -> factor) as an array in ``index`` order, 0
        for the associations without one."""
        values = np.zeros(len(self.index))
        for key, value in factors.items():
            values[self.index[key]] = value
        return values

    def recompute(self) -> None:
        """Mark the factors stale (usage changed); the next ``factor`` recomputes them."""
        self._dirty = True

    def _shares(self, key: str) -> float:
        """Share among siblings (``shares_raw / level_shares``)."""
        assoc = self.tree[key]
        if key == "root":
            return 1.0
        parent = self._parent_key(assoc)
        level = self._level.get(parent)
        if level is None:
            level = self._level[parent] = sum(max(self.tree[s].shares, 0) for s in self.children[parent])
        return max(assoc.shares, 0) / level if level else 0.0

    def _classic(self) -> dict[str, float]:
        usage = self.usage
        root_usage = usage.get("root", 0.0)
        factors: dict[str, float] = {}
        stack: list[tuple[str, float, float]] = [(c, 1.0, 1.0) for c in self.children["root"]]
        while stack:
            key, parent_norm, parent_efctv = stack.pop()
            assoc = self.tree[key]
            ua = min(usage[key] / root_usage, 1.0) if root_usage else 0.0
            s = self._shares(key)
            if assoc.shares == USE_PARENT:
                norm, efctv = parent_norm, parent_efctv
            else:
                norm = s * parent_norm
                efctv = ua + (parent_efctv - ua) * s
            if assoc.user:
                factors[key] = 2.0 ** (-efctv / norm) if norm else 0.0
            stack.extend((c, norm, efctv) for c in self.children[key])
        return factors

    def _levels(self) -> np.ndarray:
        """Each association's ``level_fs`` (``index`` order): ``S / U`` (``U``: its usage over its
        parent's), ``inf`` with no usage, 0 with no share; a ``USE_PARENT`` user ``inf``,
        account ``nan``. One array expression over the tree (the same divisions)."""
        if self._static is None:
            keys = list(self.index)
            parent = [self.index[self._parent_key(self.tree[k])] if k != "root" else 0 for k in keys]
            shares = [self._shares(k) for k in keys]
            user = [bool(self.tree[k].user) for k in keys]
            use_parent = [self.tree[k].shares == USE_PARENT for k in keys]
            self._static = (
                keys,
                np.asarray(parent, dtype=np.int64),
                np.asarray(shares, dtype=np.float64),
                np.asarray(user, dtype=bool),
                np.asarray(use_parent, dtype=bool),
            )
        keys, parent, shares, user, use_parent = self._static
        usage = self._usage[: len(keys)]
        parent_usage = usage[parent]
        ratio = np.divide(usage, parent_usage, out=np.zeros(len(keys)), where=parent_usage != 0)
        level = np.divide(shares, ratio, out=np.full(len(keys), math.inf), where=ratio != 0)
        level[shares == 0] = 0.0
        level[use_parent & user] = math.inf
        level[use_parent & ~user] = math.nan
        return level

    def _users(self) -> tuple[dict[str, bool], list[int], int]:
        """Whether each association (``index`` order) is a user, its tie-break (users
        first) and the number of users; rebuilt when the tree grows."""
        if self._user_flags is None or self._static is None:
            is_user = {k: bool(self.tree[k].user) for k in self.index}
            self._user_flags = (is_user, [0 if u else 1 for u in is_user.values()], sum(is_user.values()))
        return self._user_flags

    def _fair_tree(self) -> np.ndarray:
        is_user, ties, total = self._users()
        factors: dict[str, float] = {}
        if not total:
            return self._by_index(factors)
        array = self._levels()
        fast = self._ranked(array, total)
        if fast is not None:
            return fast
        assert self._static is not None
        levels = dict(zip(self._static[0], array.tolist(), strict=True))
        # Siblings sort by level_fs descending, users before accounts on ties: one key
        # per association, looked up by the sort itself.
        order = dict(zip(levels, zip([-v for v in levels.values()], ties, strict=True), strict=True))
        children = self.children
        state = {"rank": total, "rnt": total}

        def walk(siblings: list[str], account_tied: bool) -> None:
            ranked = sorted(siblings, key=order.__getitem__)
            previous = None
            i = 0
            while i < len(ranked):
                key = ranked[i]
                value = levels[key]
                tied = account_tied if i == 0 else value == previous
                if is_user[key]:
                    if not tied:
                        state["rank"] = state["rnt"]
                    factors[key] = state["rank"] / total
                    state["rnt"] -= 1
                    i += 1
                else:
                    # Tied sibling accounts have their children merged (fair_tree.c _merge_accounts).
                    group = [key]
                    while i + len(group) < len(ranked):
                        other = ranked[i + len(group)]
                        if is_user[other] or levels[other] != value:
                            break
                        group.append(other)
                    walk([c for g in group for c in children[g]], tied)
                    i += len(group)
                previous = value

        walk(list(children["root"]), False)
        return self._by_index(factors)

    def _ranked(self, level: np.ndarray, total: int) -> np.ndarray | None:
        """``_fair_tree``'s factors where no two siblings have equal ``level_fs`` (nor any
        is NaN), with array operations; ``None`` otherwise (ties share ranks and merge
        accounts: the walk decides those). Without ties the walk visits the users in the
        order of their paths of sibling ranks (level descending; users before accounts and
        then tree order on ties, as the walk's stable sort), and the ``j``-th user it
        visits gets ``(total - j) / total``."""
        assert self._static is not None
        keys, parent, _, user, _ = self._static
        n = len(keys)
        root = self.index["root"]
        if np.isnan(level).any():
            return None
        if self._rank_static is None or self._rank_static[0] is not self._static:
            ties = np.asarray(self._users()[1], dtype=np.int64)
            self._rank_static = (self._static, ties, np.arange(n, dtype=np.int64), np.flatnonzero(user))
        _, ties, position, users = self._rank_static
        order = np.lexsort((position, ties, -level, parent))
        order = order[order != root]
        by_parent, by_level = parent[order], level[order]
        same = by_parent[1:] == by_parent[:-1]
        if (same & (by_level[1:] == by_level[:-1])).any():
            return None
        starts = np.flatnonzero(np.concatenate(([True], ~same)))
        first = np.repeat(starts, np.diff(np.append(starts, order.size)))
        rank = np.zeros(n, dtype=np.int64)
        rank[order] = np.arange(order.size) - first
        paths = [np.where(a[users] >= 0, rank[a[users]], -1) for a in self._ancestry()[1:]]
        visit = users[np.lexsort(paths[::-1])]
        values = np.zeros(n)
        values[visit] = (total - np.arange(visit.size)) / total
        return values


class Running:
    """The jobs a calculation charges, as arrays in start order: each one's start, end
    (``inf`` while it runs), association index and billable TRES. A job leaves after the
    first calculation at or after its end, as ``_decay_thread`` stops charging it."""

    def __init__(self) -> None:
        self.slot: dict[str, int] = {}
        self.ids: list[str] = []
        self.start = np.zeros(0)
        self.end = np.zeros(0)
        self.assoc = np.zeros(0, dtype=np.int64)
        self.billable = np.zeros(0)
        self._pending: list[tuple[str, float, int, float]] = []
        self._dead = 0

    def add(self, job_id: str, start: float, assoc: int, billable: float) -> None:
        self._pending.append((job_id, start, assoc, billable))

    def finish(self, job_id: str, end: float) -> None:
        """Record ``job_id``'s end (a job never added is ignored)."""
        if job_id not in self.slot:
            self._flush()  # added since the last flush, perhaps
        i = self.slot.get(job_id)
        if i is not None:
            self.end[i] = end

    def drop(self, job_id: str) -> float | None:
        """Take a running job out now, never charged by a later calculation (a preempted
        run, which its caller charges); its start, or ``None`` where it was not running."""
        self._flush()
        i = self.slot.pop(job_id, None)
        if i is None:
            return None
        self.end[i] = -math.inf
        self._dead += 1
        return float(self.start[i])

    def _flush(self) -> None:
        if not self._pending:
            return
        base = len(self.ids)
        ids, start, assoc, billable = zip(*self._pending, strict=True)
        self._pending.clear()
        self.ids.extend(ids)
        self.slot.update((j, base + k) for k, j in enumerate(ids))
        self.start = np.concatenate((self.start, start))
        self.end = np.concatenate((self.end, np.full(len(ids), math.inf)))
        self.assoc = np.concatenate((self.assoc, np.asarray(assoc, dtype=np.int64)))
        self.billable = np.concatenate((self.billable, billable))

    def charge(self, fairshare: FairShare, last: float, tick: float) -> None:
        """One calculation at ``tick`` (the previous at ``last``): decay all usage by
        ``decay ** (tick - last)``, then charge each job that ran in between ``delta *
        decay ** delta * billable`` for its ``delta`` seconds in the period; jobs ended by
        ``tick`` are then dropped."""
        self._flush()
        end = np.minimum(self.end, tick)
        delta = end - np.maximum(self.start, last)
        ran = np.flatnonzero(delta > 0)
        # Few distinct spans (the whole period, and the jobs that started or ended in it):
        # each coefficient in Python floats, as job-by-job charging computes it. Most jobs
        # ran the whole period; only the others' spans are sorted out.
        spans = delta[ran]
        whole = tick - last
        coef = np.full(spans.size, whole * fairshare.decay**whole)
        part = np.flatnonzero(spans != whole)
        if part.size:
            distinct, which = np.unique(spans[part], return_inverse=True)
            coef[part] = np.asarray([d * fairshare.decay**d for d in distinct.tolist()], dtype=np.float64)[which]
        amounts = coef * self.billable[ran]
        fairshare.decay_all(tick - last)
        fairshare.charge(self.assoc[ran], amounts)
        # Ended jobs become dead slots (end -inf: never charged again), compacted away
        # once they outnumber the live ones; order is kept.
        done = np.flatnonzero((self.end <= tick) & (self.end > -math.inf))
        if done.size:
            self.end[done] = -math.inf
            for i in done.tolist():
                del self.slot[self.ids[i]]
            self._dead += done.size
            if 2 * self._dead > len(self.ids):
                keep = self.end > -math.inf
                self.ids = [j for j, k in zip(self.ids, keep.tolist(), strict=True) if k]
                self.slot = {j: i for i, j in enumerate(self.ids)}
                self.start, self.end = self.start[keep], self.end[keep]
                self.assoc, self.billable = self.assoc[keep], self.billable[keep]
                self._dead = 0
