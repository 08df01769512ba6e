"""``cpus``, ``ram`` (per job and as [settings] defaults), ``fake_host`` and ``enforce`` in the
queue file: read, defaulted, and every mistake named at its line; ``ram = "auto"``'s request."""

from __future__ import annotations

from pathlib import Path

import pytest

from gtui.core.errors import GtuiError
from gtui.core.gpus.host import parse_fake_host, read_host
from gtui.core.model import JobSpec
from gtui.core.queue.reader import load_queue
from gtui.core.state.usage import ram_asked

G = 1024


def load(tmp_path: Path, text: str):  # type: ignore[no-untyped-def]
    path = tmp_path / "q.toml"
    path.write_text(text)
    return load_queue(path)


def test_jobs_take_the_settings_defaults_unless_they_say(tmp_path: Path) -> None:
    q = load(
        tmp_path,
        '[settings]\ncpus = 2\nram = "4G"\nfake_host = "4c/16G"\nenforce = true\n\n'
        '[[jobs]]\nname = "a"\ncmd = "true"\n\n'
        '[[jobs]]\nname = "b"\ncmd = "true"\ncpus = 8\nram = "auto"\n\n'
        '[[jobs]]\nname = "m{x}"\ncmd = "echo {x}"\nmatrix = { x = [1, 2] }\nram = "1G"\n',
    )
    assert (q.settings.fake_host, q.settings.enforce) == ("4c/16G", True)
    got = {j.name: (j.cpus, j.ram_mib, j.ram_auto) for j in q.jobs}
    assert got == {
        "a": (2, 4 * G, False),
        "b": (8, None, True),
        "m1": (2, G, False),
        "m2": (2, G, False),
    }


def test_a_queue_without_them_asks_nothing(tmp_path: Path) -> None:
    q = load(tmp_path, '[[jobs]]\ncmd = "true"\n')
    assert (q.jobs[0].cpus, q.jobs[0].ram_mib, q.settings.fake_host, q.settings.enforce) == (
        None,
        None,
        None,
        False,
    )


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ('[[jobs]]\ncmd = "true"\ncpus = 0\n', "cpus"),
        ('[[jobs]]\ncmd = "true"\nram = "0"\n', "ram"),
        ('[[jobs]]\ncmd = "true"\nram = "lots"\n', "ram"),
        ('[settings]\nfake_host = "16/64G"\n[[jobs]]\ncmd = "true"\n', "CORESc/MEMORY"),
        ('[settings]\nenforce = "yes"\n[[jobs]]\ncmd = "true"\n', "enforce"),
    ],
)
def test_mistakes_name_the_key_and_line(tmp_path: Path, text: str, said: str) -> None:
    with pytest.raises(GtuiError) as e:
        load(tmp_path, text)
    assert said in str(e.value) and "q.toml:" in str(e.value)


def test_fake_host_spec() -> None:
    assert parse_fake_host("16c/64G") == (16, 64 * G)
    assert parse_fake_host(" 4c / 512M ") == (4, 512)
    host = read_host("4c/16G", [6 * G, 2 * G])
    assert (host.cores, host.ram_total_mib, host.ram_used_mib, host.source) == (
        4,
        16 * G,
        8 * G,
        "fake",
    )


def test_ram_auto_asks_the_last_runs_host_peak_with_a_margin() -> None:
    auto = JobSpec(name="a", cmd="true", ram_auto=True)
    assert ram_asked(auto, None) is None  # first run: asks nothing, measures
    assert ram_asked(auto, 10 * G) == 12 * G  # 10G * 1.2, whole GiB
    assert ram_asked(JobSpec(name="b", cmd="true", ram_mib=3 * G), 10 * G) == 3 * G
