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
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from shapeshift.slurm.assoc import USE_PARENT, Assoc, assoc_key


class FairShare:
    """Usage per association (decayed) and the fair-share factor of each user association."""

    def __init__(self, tree: Mapping[str, Assoc], half_life: float, fair_tree: bool = True):
        self.tree = dict(tree)
        self.fair_tree = fair_tree
        #: Per-second decay, Slurm's first-order approximation of 2^(-1/half_life).
        self.decay = 1 - 0.693 / half_life if half_life > 0 else 1.0
        self.usage: dict[str, float] = dict.fromkeys(self.tree, 0.0)
        self.children: dict[str, list[str]] = {k: [] for k in self.tree}
        for key, assoc in self.tree.items():
            if key != "root":
                self.children.setdefault(self._parent_key(assoc), []).append(key)
        self.factors: dict[str, float] = {}
        self._level: dict[str, float] = {}  # sum of shares per parent, rebuilt when the tree grows
        self._dirty = True

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
            self.usage[new.key] = 0.0
            self.children[new.key] = []
            self.children.setdefault(self._parent_key(new), []).append(new.key)
        self._level.clear()
        self._dirty = True
        return key

    def _parent_key(self, assoc: Assoc) -> str:
        return assoc.parent if assoc.parent in self.tree else "root"

    def add_usage(self, key: str, amount: float) -> None:
        """Charge ``amount`` (billable TRES-seconds, already decayed) to ``key`` and every
        account above it, as ``_apply_new_usage`` does up the ``fs_assoc_ptr`` chain."""
        while True:
            self.usage[key] = self.usage.get(key, 0.0) + amount
            if key == "root":
                return
            key = self._parent_key(self.tree[key])

    def decay_all(self, elapsed: float) -> None:
        if self.decay != 1.0 and elapsed > 0:
            factor = self.decay**elapsed
            for key in self.usage:
                self.usage[key] *= factor

    def charge_tick(self, elapsed: float, running: list[tuple[str, float]]) -> None:
        """One calc period of ``elapsed`` seconds: decay, then charge each running job
        ``(key, billable TRES)`` for the period (``run_decay = elapsed * decay**elapsed``)."""
        self.decay_all(elapsed)
        run_decay = elapsed * (self.decay**elapsed)
        for key, billable in running:
            self.add_usage(key, run_decay * billable)
        self.recompute()

    def factor(self, key: str) -> float:
        if self._dirty:
            self.factors = self._fair_tree() if self.fair_tree else self._classic()
            self._dirty = False
        return self.factors.get(key, 0.0)

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
        root_usage = self.usage.get("root", 0.0)
        factors: dict[str, float] = {}
        stack: list[tuple[str, float, float]] = [(c, 1.0, 1.0) for c in self.children["root"]]
        while stack:
            key, parent_norm, parent_efctv = stack.pop()
            assoc = self.tree[key]
            ua = min(self.usage[key] / root_usage, 1.0) if root_usage else 0.0
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

    def _fair_tree(self) -> dict[str, float]:
        users = [k for k, a in self.tree.items() if a.user]
        total = len(users)
        factors: dict[str, float] = {}
        if not total:
            return factors
        state = {"rank": total, "rnt": total}

        def level_fs(key: str) -> float:
            assoc = self.tree[key]
            if assoc.shares == USE_PARENT:
                return math.inf if assoc.user else math.nan
            parent_usage = self.usage.get(self._parent_key(assoc), 0.0)
            u = self.usage[key] / parent_usage if parent_usage else 0.0
            s = self._shares(key)
            if s == 0:
                return 0.0
            return s / u if u else math.inf

        def walk(siblings: list[str], account_tied: bool) -> None:
            levels = {k: level_fs(k) for k in siblings}
            ranked = sorted(siblings, key=lambda k: (-levels[k], 0 if self.tree[k].user else 1))
            previous = None
            i = 0
            while i < len(ranked):
                key = ranked[i]
                value = levels[key]
                tied = account_tied if i == 0 else value == previous
                if self.tree[key].user:
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
                        if self.tree[other].user or levels[other] != value:
                            break
                        group.append(other)
                    walk([c for g in group for c in self.children[g]], tied)
                    i += len(group)
                previous = value

        walk(list(self.children["root"]), False)
        return factors
