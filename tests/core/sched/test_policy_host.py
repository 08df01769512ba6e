"""Host cores and memory in the placement policy (rule 10, sched/hostfit.py): given as data,
counted as a GPU's memory is, named in the waiting reasons, and never promised beyond the host
(a hypothesis property over the worlds of test_policy_properties.py)."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given
from hypothesis import strategies as st

from gtui.core.gpus.snapshot import GpuSnapshot, HostInfo
from gtui.core.model import Settings
from gtui.core.sched.hostfit import HostHolder
from gtui.core.sched.policy import FAST_FROM, Allocation, Candidate, Decision, place
from tests.core.sched.test_policy_properties import PROFILE, World, worlds

G = 1024
NO_GPUS = GpuSnapshot(gpus=(), taken_at=0.0, source="fake")


def cpu_job(name: str, order: int, cpus: int | None = None, ram: int | None = None) -> Candidate:
    return Candidate(name, 0, None, order=order, cpus=cpus, ram_mib=ram)


def decide(
    candidates: list[Candidate],
    host: HostInfo | None,
    allocations: tuple[Allocation, ...] = (),
    host_claims: tuple[HostHolder, ...] = (),
) -> Decision:
    return place(
        NO_GPUS,
        candidates,
        allocations,
        Settings(),
        dep_states={},
        running_count=len(allocations),
        now=0.0,
        host=host,
        host_claims=host_claims,
    )


def test_cores_are_shared_out_and_the_wait_names_them() -> None:
    jobs = [cpu_job(f"j{i}", i, cpus=2) for i in range(8)]
    d = decide(jobs, HostInfo(4, 16 * G, 0, "fake"))
    assert [s.name for s in d.starts] == ["j0", "j1"]
    assert d.reasons["j2"] == "needs 2 cores: 0 free (j0 2, j1 2)"


def test_running_jobs_and_neighbours_claims_hold_cores() -> None:
    ours = (Allocation("train-a", (), None, cpus=16),)
    claims = (HostHolder("bob's eval", cpus=8),)
    d = decide(
        [cpu_job("big", 0, cpus=8), cpu_job("small", 1, cpus=6)], HostInfo(30, G, 0), ours, claims
    )
    assert d.reasons["big"] == "needs 8 cores: 6 free (train-a 16, bob's eval 8)"
    assert [s.name for s in d.starts] == ["small"]


def test_memory_asked_and_not_yet_used_stays_promised() -> None:
    # 64G host, 20G in use by everything; our job asked 40G and uses 10G of it: 30G promised.
    ours = (Allocation("train-a", (), None, ram_mib=40 * G, ram_used_mib=10 * G),)
    claims = (HostHolder("bob's eval", ram_mib=8 * G, ram_used_mib=4 * G),)
    host = HostInfo(16, 64 * G, 20 * G)
    d = decide([cpu_job("load", 0, ram=12 * G), cpu_job("fits", 1, ram=10 * G)], host, ours, claims)
    assert d.reasons["load"] == "needs 12G RAM: 10G free (train-a 40G, bob's eval 8G)"
    assert [s.name for s in d.starts] == ["fits"]


def test_a_request_above_the_host_can_never_start() -> None:
    d = decide([cpu_job("a", 0, cpus=64), cpu_job("b", 1, ram=128 * G)], HostInfo(16, 64 * G, 0))
    assert d.reasons == {
        "a": "needs 64 cores: the host has 16",
        "b": "needs 128G RAM: the host has 64G",
    }


def test_jobs_that_ask_nothing_are_not_counted() -> None:
    full = HostInfo(4, 16 * G, 16 * G)
    ours = (Allocation("hog", (), None, cpus=4),)
    d = decide([cpu_job("plain", 0)], full, ours)
    assert [s.name for s in d.starts] == ["plain"]


def test_an_unread_host_counts_nothing() -> None:
    d = decide([cpu_job("a", 0, cpus=64)], None)
    assert [s.name for s in d.starts] == ["a"]


def test_a_long_queue_asking_cores_is_decided_by_the_readable_walk() -> None:
    jobs = [cpu_job(f"j{i}", i, cpus=1 + i % 3) for i in range(FAST_FROM + 10)]
    d = decide(jobs, HostInfo(8, 16 * G, 0))
    assert sum(1 + int(s.name[1:]) % 3 for s in d.starts) <= 8
    # 1+2+3+1 = 7; j4 asks 2 and waits, j6 (1) backfills the last core
    assert [s.name for s in d.starts] == ["j0", "j1", "j2", "j3", "j6"]
    assert d.reasons["j4"] == "needs 2 cores: 1 free (j2 3, j1 2, j0 1, 1 more)"


@st.composite
def host_worlds(draw: st.DrawFn) -> tuple[World, HostInfo, tuple[HostHolder, ...]]:
    """A world of test_policy_properties.py whose jobs (waiting and running) may ask cores and
    memory, on a host that may be partly used, with neighbours' claims."""
    w = draw(worlds())
    cpus = st.sampled_from([None, None, 1, 2, 4, 8, 16])
    rams = st.sampled_from([None, None, 1 * G, 4 * G, 16 * G, 60 * G])
    candidates = tuple(replace(c, cpus=draw(cpus), ram_mib=draw(rams)) for c in w.candidates)
    allocations = tuple(
        replace(a, cpus=draw(cpus), ram_mib=draw(rams), ram_used_mib=draw(st.sampled_from([0, G])))
        for a in w.allocations
    )
    host = HostInfo(
        draw(st.sampled_from([8, 4, 16, 64])),
        draw(st.sampled_from([64, 16, 256])) * G,
        draw(st.sampled_from([0, 4, 12])) * G,
    )
    claims = tuple(
        HostHolder(f"n{i}", draw(st.sampled_from([0, 2, 8])), draw(st.sampled_from([0, 8 * G])))
        for i in range(draw(st.integers(0, 2)))
    )
    return replace(w, candidates=candidates, allocations=allocations), host, claims


@PROFILE
@given(host_worlds())
def test_the_policy_never_promises_more_cores_or_memory_than_the_host_has(
    world: tuple[World, HostInfo, tuple[HostHolder, ...]],
) -> None:
    w, host, claims = world
    d = w.decide(host, claims)
    holders = [*w.allocations, *claims]
    cores_free = host.cores - sum(h.cpus or 0 for h in holders)
    promised = sum(max(0, (a.ram_mib or 0) - a.ram_used_mib) for a in w.allocations)
    promised += sum(c.ram_promised_mib for c in claims)
    ram_free = host.ram_total_mib - host.ram_used_mib - promised
    by_name = {c.name: c for c in w.candidates}
    started = [by_name[s.name] for s in d.starts]
    asked_cores = sum(c.cpus or 0 for c in started)
    asked_ram = sum(c.ram_mib or 0 for c in started)
    assert asked_cores == 0 or asked_cores <= cores_free
    assert asked_ram == 0 or asked_ram <= ram_free
    for c in started:
        assert not c.cpus or c.cpus <= host.cores
        assert not c.ram_mib or c.ram_mib <= host.ram_total_mib


@PROFILE
@given(worlds())
def test_a_queue_that_asks_nothing_decides_as_without_a_host(w: World) -> None:
    assert w.decide(HostInfo(1, G, G)) == w.decide()
