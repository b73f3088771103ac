"""The completion heap drops dead entries without changing what the simulation sees."""

from __future__ import annotations

from shapeshift.sim.executor import CompletionQueue


def _drain(queue: CompletionQueue, live: dict[str, int]) -> list[tuple[float, str]]:
    """What the simulation loop acts on: entries whose version is the job's current one."""
    seen = []
    while len(queue):
        time, job_id, version = queue.pop()
        if live.get(job_id) == version:
            seen.append((time, job_id))
    return seen


def test_compaction_keeps_the_live_entries_in_the_same_order():
    # 10 jobs, each restarted 999 times: versions 0..999 pushed with finish times that
    # alternate, so dead entries sit on top of the heap. Only version 999 is live, at time
    # 1000 + j for job j: the drain must give the 10 jobs in time order, with or without
    # compaction (the compacting queue must have dropped entries on the way).
    current: dict[str, int] = {}
    plain, compacting = CompletionQueue(), CompletionQueue(lambda j, v: current[j] == v)
    for version in range(1000):
        for j in range(10):
            job_id = f"j{j}"
            current[job_id] = version
            at = 1000.0 + j if version == 999 else float(version % 7)
            plain.push(at, job_id, version)
            compacting.push(at, job_id, version)
    assert len(compacting) < len(plain) == 10_000
    expected = [(1000.0 + j, f"j{j}") for j in range(10)]
    assert _drain(plain, current) == expected
    assert _drain(compacting, current) == expected


def _pop_until(queue: CompletionQueue, now: float) -> None:
    """As the loop does before deciding at ``now``: every entry due by then is popped."""
    while queue.peek_time() <= now:
        queue.pop()


def test_dropped_entries_still_count_as_queued_until_their_time():
    # One job restarted 5,000 times: version 0 due at 9,000 s, versions 1..4,998 at
    # 1..4,998 s, and the live one (version 5,000) at 10 s. The first compaction (at 4,096
    # entries) drops the 9,000 s entry among others. The plain heap would still hold it
    # after 10 s, and the loop ends a stuck run only once no entry is left, nor due at the
    # instant itself: ``quiet_from`` must say False up to 9,000 s and True after it.
    queue = CompletionQueue(lambda j, v: v == 5000)
    queue.push(9000.0, "a", 0)
    for version in range(1, 4999):
        queue.push(float(version), "a", version)
    queue.push(10.0, "a", 5000)
    assert len(queue) < 5000  # compacted on the way
    for now, quiet in ((10.0, False), (4000.0, False), (8999.0, False), (9000.0, False), (9000.5, True)):
        _pop_until(queue, now)
        assert queue.quiet_from(now) is quiet, now


def test_a_dropped_entry_due_at_the_instant_is_seen():
    # 4,096 dead entries due at 0..4,095 s: the 4,096th push compacts the heap to nothing.
    # Nothing is queued, but the loop would have seen the last one due at 4,095 s.
    queue = CompletionQueue(lambda j, v: False)
    for version in range(CompletionQueue.MIN_COMPACT):
        queue.push(float(version), "a", version)
    assert len(queue) == 0
    assert not queue.quiet_from(4095.0)
    assert queue.quiet_from(4095.5)
