"""The planner alone: a job book over a store in a temp dir, simulated GPUs, no
Engine. A pass starts what fits, gives every other waiting job its reason in words, and
blocks a job whose ``after`` failed; its caches follow the book's commits."""

from __future__ import annotations

from pathlib import Path

from gtui.core.api import Event, JobChanged, ReasonChanged, WaitingSummary
from gtui.core.bus import EventBus
from gtui.core.gpus.fake import FakeBackend
from gtui.core.model import JobState
from gtui.core.queue.queuefile import load_queue
from gtui.core.sched.outcome import defer_start
from gtui.core.sched.planner import Planner
from gtui.core.sched.policy import Start
from gtui.core.state.book import JobBook
from gtui.core.state.store import Store
from tests.conftest import write_queue

QUEUE = """
[[jobs]]
name = "first"
mem = "70G"
cmd = "true"

[[jobs]]
name = "second"
mem = "70G"
cmd = "true"

[[jobs]]
name = "prep"
gpus = 0
cmd = "true"

[[jobs]]
name = "eval"
gpus = 0
after = ["prep"]
cmd = "true"
"""


def make(tmp_path: Path) -> tuple[Planner, JobBook, list[Event]]:
    path = write_queue(tmp_path, QUEUE)
    bus = EventBus()
    events: list[Event] = []

    def sink(event: Event) -> None:
        events.append(event)

    bus.subscribe(sink)
    book = JobBook(Store(tmp_path / "state.db"), bus, path.name)
    planner = Planner(book, bus)
    book.apply(load_queue(path), initial=True)
    return planner, book, events


def test_a_pass_starts_what_fits_and_says_why_the_rest_waits(tmp_path: Path) -> None:
    planner, book, events = make(tmp_path)
    settings = load_queue(tmp_path / "q.toml").settings
    snapshot = FakeBackend("1x80G").read()
    decision = planner.decide(snapshot, settings, {}, paused=False, now=0.0)
    assert Start("first", (0,)) in decision.starts
    assert "second" not in {s.name for s in decision.starts}
    assert "70" in decision.reasons["second"]  # what it needs, in words
    assert planner.last is decision
    # The job starts (as the scheduler would commit it); the rest are explained.
    first = book.records["first"]
    first.state, first.gpus = JobState.RUNNING, (0,)
    book.commit(first)
    planner.explain(decision, now=True)
    second = book.records["second"]
    assert second.reason == decision.reasons["second"]
    assert any(isinstance(e, ReasonChanged) and e.job.record.name == "second" for e in events)
    # second and eval wait; prep starts in this pass (it needs no GPU)
    assert planner.summary == f"3 waiting: {second.reason}; after prep (queued); starting"
    last = events[-1]
    assert isinstance(last, WaitingSummary) and last.text == planner.summary
    # The next pass sees the running job (its commit was followed): no second start on GPU 0.
    again = planner.decide(snapshot, settings, {}, paused=False, now=0.0)
    assert "first" not in again.reasons
    assert "second" not in {s.name for s in again.starts}
    # Paused: nothing starts.
    paused = planner.decide(snapshot, settings, {}, paused=True, now=0.0)
    assert paused.starts == ()


def test_a_job_after_a_failed_one_is_blocked(tmp_path: Path) -> None:
    planner, book, events = make(tmp_path)
    prep = book.records["prep"]
    prep.state = JobState.FAILED
    book.commit(prep)
    planner.block_dependents()
    # Ended records are kept in the store, not as objects: ask the book for the state.
    assert book.records.state("eval") is JobState.BLOCKED
    changed = [e for e in events if type(e) is JobChanged]
    assert [e.job.record.name for e in changed] == ["eval"]
    assert "after prep (failed)" in changed[0].job.record.reason


def test_kept_candidates_follow_what_they_were_made_from(tmp_path: Path) -> None:
    """A queued job's Candidate is kept alone (no tuple beside it, which at 100,000 jobs
    costs memory): it is made again
    when the file changes its GPUs, priority or ``after``, its memory changes, or it is held
    or backs off; and reused, the same object, while none of that changes."""
    planner, book, _ = make(tmp_path)
    first = planner._waiting_candidates()
    by_name = {c.name: c for c in first}
    book.version += 1  # something else changed: the list is made again from what is kept
    again = {c.name: c for c in planner._waiting_candidates()}
    assert all(again[n] is by_name[n] for n in by_name)
    edited = QUEUE.replace('name = "second"\nmem = "70G"', 'name = "second"\nmem = "70G"\ngpus = 2')
    edited = edited.replace('name = "prep"\ngpus = 0', 'name = "prep"\ngpus = 0\npriority = 3')
    edited = edited.replace('after = ["prep"]', 'after = ["first"]')
    book.apply(load_queue(write_queue(tmp_path, edited)))
    now = {c.name: c for c in planner._waiting_candidates()}
    assert now["second"].gpus == 2 and now["prep"].priority == 3 and now["eval"].after == ("first",)
    assert now["first"] == by_name["first"]  # nothing of it changed: an equal Candidate
    rec = book.records["first"]
    rec.mem_mib = 1000
    book.commit(rec)
    assert {c.name: c for c in planner._waiting_candidates()}["first"].mem_mib == 1000
    rec.retry_at = 1e12  # backing off: held, and kept with its back-off beside it
    book.commit(rec)
    assert {c.name: c for c in planner._waiting_candidates()}["first"].held
    rec.state = JobState.HELD
    rec.retry_at = None
    book.commit(rec)
    assert {c.name: c for c in planner._waiting_candidates()}["first"].held
    rec.state = JobState.QUEUED
    book.commit(rec)
    assert not {c.name: c for c in planner._waiting_candidates()}["first"].held


def test_a_job_put_off_last_in_the_queue_is_counted_as_put_off_not_held(tmp_path: Path) -> None:
    """Jobs whose start was put off (no process could be made) wait out of placement, as a
    held job does, yet the summary counts them as put off. The last job of the queue put off
    after the others joins the end of the ranked list, where the summary counts only the new
    jobs' reasons: those must be told the same way."""
    jobs = "".join(f'[[jobs]]\nname = "w{i}"\nmem = "1G"\ncmd = "true"\n\n' for i in range(4))
    path = write_queue(tmp_path, jobs)
    bus = EventBus()
    book = JobBook(Store(tmp_path / "state.db"), bus, path.name)
    planner = Planner(book, bus)
    book.apply(load_queue(path), initial=True)
    settings = load_queue(path).settings
    snapshot = FakeBackend("1x80G").read()
    last = book.records["w3"]
    last.state, last.gpus = JobState.RUNNING, (0,)
    book.commit(last)
    for name in ("w0", "w1", "w2"):
        defer_start(book.records[name], "the user's process limit is reached", 0, ran_wrapper=False)
        book.commit(book.records[name])
    planner.explain(planner.decide(snapshot, settings, {}, paused=False, now=0.0), now=True)
    put_off = "start put off: no process could be made"
    assert planner.summary == f"3 waiting: 3 {put_off}"
    last = book.records["w3"]
    defer_start(last, "the user's process limit is reached", 0, ran_wrapper=True)
    book.commit(last)
    planner.explain(planner.decide(snapshot, settings, {}, paused=False, now=0.0), now=True)
    assert planner.summary == f"4 waiting: 4 {put_off}"


def test_a_back_off_that_ends_before_its_pass_is_told_never_says_held(tmp_path: Path) -> None:
    """Reasons are told up to half a second after their pass (the walk is paced): a job whose
    back-off ended in between keeps saying when it is tried again, never "held by you"."""
    path = write_queue(tmp_path, '[[jobs]]\nname = "w0"\nmem = "1G"\ncmd = "true"\n')
    bus = EventBus()
    book = JobBook(Store(tmp_path / "state.db"), bus, path.name)
    planner = Planner(book, bus)
    book.apply(load_queue(path), initial=True)
    rec = book.records["w0"]
    defer_start(rec, "the user's process limit is reached", 0, ran_wrapper=False)
    book.commit(rec)
    decision = planner.decide(
        FakeBackend("1x80G").read(), load_queue(path).settings, {}, paused=False, now=0.0
    )
    assert decision.starts == ()  # out of placement while it backs off
    rec.retry_at = 1.0  # the back-off is over by the time the pass is told
    planner.explain(decision, now=True)
    assert "could not start it" in rec.reason and "held" not in rec.reason
    assert planner.summary == "1 waiting: start put off: no process could be made"
