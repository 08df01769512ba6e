"""The queue table's choice of rows, alone (gtui.ui.widgets.job_order): its filters, the fold of
done jobs and of groups, as pure functions of the jobs' views."""

from __future__ import annotations

from collections import Counter

from gtui.core.api import JobView
from gtui.core.model import JobRecord, JobSpec, JobState
from gtui.ui.widgets.job_order import fold_groups, group_cells, visible


def view(name: str, state: JobState, group: str | None = None) -> JobView:
    spec = JobSpec(name=name, cmd="true", group=group)
    return JobView(spec=spec, record=JobRecord(name=name, state=state), order=0)


VIEWS = {
    v.spec.name: v
    for v in (
        view("a1", JobState.DONE, "alpha"),
        view("a2", JobState.RUNNING, "alpha"),
        view("a3", JobState.FAILED, "alpha"),
        view("b", JobState.QUEUED),
        view("c", JobState.DONE),
    )
}


def test_the_filters_by_state_and_by_text() -> None:
    assert visible(VIEWS, "all", "", fold_done=False, keep=None) == ["a1", "a2", "a3", "b", "c"]
    assert visible(VIEWS, "waiting", "", fold_done=False, keep=None) == ["b"]
    assert visible(VIEWS, "trouble", "", fold_done=False, keep=None) == ["a3"]
    # the text matches the job's name or its group's, case aside
    assert visible(VIEWS, "all", "ALPHA", fold_done=False, keep=None) == ["a1", "a2", "a3"]
    assert visible(VIEWS, "done", "c", fold_done=False, keep=None) == ["c"]


def test_done_jobs_fold_away_but_the_kept_one() -> None:
    assert visible(VIEWS, "all", "", fold_done=True, keep=None) == ["a2", "a3", "b"]
    assert visible(VIEWS, "all", "", fold_done=True, keep="c") == ["a2", "a3", "b", "c"]


def test_a_group_folds_into_its_first_shown_job_with_counts_of_all_its_jobs() -> None:
    order, rows, counts = fold_groups(["a2", "a3", "b"], VIEWS)
    assert order == ["a2", "b"]
    assert rows == {"a2": "alpha"}
    assert counts == {"alpha": Counter({"done": 1, "running": 1, "failed": 1})}
    cells = group_cells("alpha", counts["alpha"])
    assert cells["name"].plain == "alpha"
    assert cells["note"].plain == "1 done · 1 running · 0 waiting · 1 failed"
