"""`[settings] gpus`, `exclude` and `reserve` may name a cluster's nodes: node names
and node:GPU strings go to the same fields as `[cluster]`'s, numbers stay numbers, a bad name is
one clear error, and names without a cluster backend are refused, saying how to fix it."""

from __future__ import annotations

from pathlib import Path

import pytest

from gtui.core.errors import QueueFileError
from gtui.core.queue.queuefile import load_queue
from tests.conftest import gtui, write_queue

JOB = '\n[[jobs]]\ncmd = "true"\n'


def settings_of(tmp_path: Path, body: str):  # type: ignore[no-untyped-def]
    return load_queue(write_queue(tmp_path, body + JOB)).settings


def test_gpus_and_exclude_split_names_from_numbers(tmp_path: Path) -> None:
    s = settings_of(
        tmp_path,
        '[settings]\ngpus = ["node1", 3, "node2:0"]\nexclude = ["node3", "node4:1", 2]\n'
        '[cluster]\nbackend = "ray"\n',
    )
    assert s.gpus == (3,) and s.cluster_gpus == ("node1", "node2:0")
    assert s.exclude == (2,) and s.cluster_exclude == ("node3", "node4:1")


def test_only_names_leave_the_numbers_unconstrained(tmp_path: Path) -> None:
    s = settings_of(tmp_path, '[settings]\ngpus = ["node1"]\n[cluster]\nbackend = "ray"\n')
    assert s.gpus == "all" and s.cluster_gpus == ("node1",)


def test_a_per_node_reserve_in_settings(tmp_path: Path) -> None:
    s = settings_of(tmp_path, '[settings]\nreserve = { node1 = 1, node2 = 0 }\n')
    assert s.reserve == 0 and s.cluster_reserve == (("node1", 1), ("node2", 0))


def test_numbers_are_unchanged(tmp_path: Path) -> None:
    s = settings_of(tmp_path, '[settings]\ngpus = [0, 1, 2, 3]\nexclude = [3]\nreserve = 1\n')
    assert (s.gpus, s.exclude, s.reserve) == ((0, 1, 2, 3), (3,), 1)
    assert (s.cluster_gpus, s.cluster_exclude, s.cluster_reserve) == ((), (), ())
    assert settings_of(tmp_path, '[settings]\ngpus = "0, 1"\n').gpus == (0, 1)


def test_settings_and_cluster_names_add_up(tmp_path: Path) -> None:
    s = settings_of(
        tmp_path,
        '[settings]\nexclude = ["node2"]\nreserve = { node1 = 1 }\n'
        '[cluster]\nexclude = ["node3:1", "node2"]\nreserve = { node2 = 2 }\n',
    )
    assert s.cluster_exclude == ("node2", "node3:1")
    assert s.cluster_reserve == (("node1", 1), ("node2", 2))


@pytest.mark.parametrize(
    ("body", "words"),
    [
        ('gpus = ["node 1"]', '"node 1" is neither a GPU number nor a node name'),
        ('exclude = ["node2:x"]', '"node2:x" is neither a GPU number nor a node name'),
        ('exclude = ["node1", 1.5]', "1.5 is neither a GPU number nor a node name"),
        ('reserve = { node1 = -1 }', "GPUs kept free per node"),
        ('gpus = ["node1", "node1"]', "node1 is listed twice"),
    ],
)
def test_a_bad_name_is_one_error_with_the_line_and_key(
    tmp_path: Path, body: str, words: str
) -> None:
    with pytest.raises(QueueFileError) as e:
        settings_of(tmp_path, f"[settings]\n{body}\n")
    text = str(e.value)
    assert "q.toml:2" in text and words in text, text
    assert "node2:3" in text or "reserve" in text or "twice" in text  # says the fix


def test_node_names_without_a_cluster_backend_are_refused_in_words(tmp_path: Path) -> None:
    q = write_queue(tmp_path, '[settings]\nfake_gpus = "2x8G"\nexclude = ["node2"]\n' + JOB)
    done = gtui("run", str(q))
    assert done.returncode == 2, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    assert "exclude names nodes (node2)" in done.stderr
    assert 'backend = "ray"' in done.stderr


def test_validate_shows_the_names_beside_the_numbers(tmp_path: Path) -> None:
    q = write_queue(
        tmp_path,
        '[settings]\ngpus = ["node1", 3]\nexclude = ["node2:1"]\nreserve = { node1 = 1 }\n'
        '[cluster]\nbackend = "ray"\n' + JOB,
    )
    done = gtui("validate", str(q))
    assert done.returncode == 0, done.stderr
    assert "gpus 3,node1" in done.stdout and "exclude node2:1" in done.stdout
    assert "reserve node1=1" in done.stdout


def test_validate_refuses_node_names_without_a_cluster_as_run_does(tmp_path: Path) -> None:
    """`gtui validate` says what `gtui run` would say at its start, and `--backend ray` on its
    command line makes the same file valid (the backend may come from there)."""
    q = write_queue(tmp_path, '[settings]\nfake_gpus = "2x8G"\nexclude = ["node2"]\n' + JOB)
    refused = gtui("validate", str(q))
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert "Traceback" not in refused.stderr
    assert "exclude names nodes (node2)" in refused.stderr
    ok = gtui("validate", str(q), "--backend", "ray")
    assert ok.returncode == 0, ok.stderr
