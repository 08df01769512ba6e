"""Groups in the pure placement policy: a group's max_parallel (rule 11), with its waiting
reason, and a group's priority in the ranking; a long queue with a capped group is walked
by the readable walk and still holds the cap."""

from __future__ import annotations

from gtui.core.model import GroupRule, Settings
from gtui.core.sched.policy import FAST_FROM, Candidate, place
from gtui.core.sched.policy_state import rank
from tests.core.sched.test_policy import G, gpu, snap


def cand(name: str, group: str | None, order: int, priority: int = 0) -> Candidate:
    return Candidate(name, 1, 1 * G, priority, order, group=group)


def settings(*groups: GroupRule) -> Settings:
    return Settings(groups=groups)


def test_a_capped_group_starts_up_to_its_cap_and_the_rest_go_on() -> None:
    jobs = [cand(f"s{i}", "sweep", i) for i in range(4)] + [cand("other", None, 9)]
    d = place(
        snap(*(gpu(i) for i in range(8))),
        jobs,
        [],
        settings(GroupRule("sweep", max_parallel=3)),
        dep_states={},
        running_count=0,
        now=0.0,
        group_running={"sweep": 1},  # one already runs
    )
    assert sorted(s.name for s in d.starts) == ["other", "s0", "s1"]
    assert d.reasons == {"s2": "group sweep: 3 of 3 running", "s3": "group sweep: 3 of 3 running"}


def test_cpu_jobs_count_toward_their_group() -> None:
    jobs = [Candidate(f"c{i}", 0, None, 0, i, group="cpu") for i in range(3)]
    d = place(
        snap(gpu(0)),
        jobs,
        [],
        settings(GroupRule("cpu", max_parallel=1)),
        dep_states={},
        running_count=0,
        now=0.0,
    )
    assert [s.name for s in d.starts] == ["c0"]
    assert d.reasons["c2"] == "group cpu: 1 of 1 running"


def test_a_groups_priority_adds_to_its_jobs_own() -> None:
    jobs = [cand("plain", None, 0, priority=2), cand("boosted", "vip", 1, priority=0)]
    ranked = rank(jobs, settings(GroupRule("vip", priority=5)))
    assert [c.name for c in ranked] == ["boosted", "plain"]
    assert [c.name for c in rank(jobs, Settings())] == ["plain", "boosted"]


def test_a_long_queue_with_a_capped_group_holds_the_cap() -> None:
    jobs = [cand(f"s{i}", "sweep", i) for i in range(FAST_FROM + 10)]
    d = place(
        snap(*(gpu(i) for i in range(8))),
        jobs,
        [],
        settings(GroupRule("sweep", max_parallel=4)),
        dep_states={},
        running_count=0,
        now=0.0,
    )
    assert [s.name for s in d.starts] == ["s0", "s1", "s2", "s3"]
    assert d.reasons["s4"] == "group sweep: 4 of 4 running"
