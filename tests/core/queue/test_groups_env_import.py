"""The queue file's groups, setup and env_file keys; the env_file format; gtui import
keeping what a script did before its commands as setup."""

from __future__ import annotations

from pathlib import Path

import pytest

from gtui.core.errors import GtuiError, QueueFileError
from gtui.core.model import GroupRule
from gtui.core.queue.envfile import EnvFileError, parse_env_file, read_env_file
from gtui.core.queue.importer import import_text
from gtui.core.queue.reader import load_queue
from tests.conftest import write_queue


def test_groups_setup_and_env_file_are_read(tmp_path: Path) -> None:
    q = write_queue(
        tmp_path,
        """
        [settings]
        setup = "source .venv/bin/activate"
        env_file = ".env"
        [groups.sweep-lr]
        max_parallel = 4
        priority = 2
        [[jobs]]
        name = "sweep-lr-{lr}"
        cmd = "python train.py --lr {lr}"
        matrix = { lr = [0.1, 0.01] }
        [[jobs]]
        name = "grid"
        cmd = "python grid.py --x {x}"
        matrix = { x = [1, 2] }
        group = "mine"
        setup = ""
        env_file = "other.env"
        [[jobs]]
        name = "alone"
        cmd = "true"
        """,
    )
    qf = load_queue(q)
    assert qf.settings.groups == (GroupRule("sweep-lr", 4, 2),)
    assert qf.settings.setup == "source .venv/bin/activate" and qf.settings.env_file == ".env"
    by = {j.name: j for j in qf.jobs}
    # a matrix entry's jobs form a group named after the entry, unless it names one
    assert by["sweep-lr-0.1"].group == by["sweep-lr-0.01"].group == "sweep-lr"
    assert by["grid-x=1"].group == "mine" and by["alone"].group is None
    assert by["grid-x=1"].setup == "" and by["grid-x=1"].env_file == "other.env"
    assert by["alone"].setup is None and by["alone"].env_file is None


@pytest.mark.parametrize(
    ("body", "said"),
    [
        ("[groups.a]\nmax_paralel = 2\n", "max_paralel: unknown key; did you mean `max_parallel`"),
        ("[groups.a]\nmax_parallel = -1\n", "max_parallel: must be 0 or more"),
        ("[groups]\na = 3\n", "expected a table such as [groups.a] max_parallel = 4"),
        ('[[jobs]]\ncmd = "x"\ngroup = "a b"\n', "a group name cannot contain"),
        ('[[jobs]]\ncmd = "x"\ngrup = "a"\n', "did you mean `group`"),
    ],
)
def test_mistakes_in_groups_are_named(tmp_path: Path, body: str, said: str) -> None:
    q = write_queue(tmp_path, body + ('\n[[jobs]]\ncmd = "true"\n' if "jobs" not in body else ""))
    with pytest.raises(QueueFileError) as e:
        load_queue(q)
    assert said in str(e.value)


def test_env_file_lines() -> None:
    text = (
        "# a comment\n\nA=1\nexport B = two words  # trailing comment\n"
        'C="line\\nnext \\"q\\""\nD=\'$HOME stays\'\nE=\n'
    )
    assert parse_env_file(text, "f") == {
        "A": "1",
        "B": "two words",
        "C": 'line\nnext "q"',
        "D": "$HOME stays",
        "E": "",
    }
    with pytest.raises(EnvFileError, match=r"env_file f:2: expected KEY=VALUE"):
        parse_env_file("A=1\nnot a line\n", "f")
    with pytest.raises(EnvFileError, match="quote is not closed"):
        parse_env_file("A='open\n", "f")


def test_a_missing_env_file_is_a_gtui_error(tmp_path: Path) -> None:
    with pytest.raises(GtuiError, match="No such file or directory"):
        read_env_file(tmp_path / "none.env")


def test_import_keeps_what_the_script_did_before_its_commands() -> None:
    script = (
        "#!/bin/bash\n"
        "source ~/miniconda3/etc/profile.d/conda.sh\n"
        "conda activate vit\n"
        "export HF_HOME=/data/hf\n"
        'TARGET_GPUS="0,1"\n'
        'if [ -z "$X" ]; then echo hi; fi\n'
        'COMMANDS=(\n  "python train.py | 20 | 1"\n)\n'
    )
    text, notes = import_text(script, "q.sh")
    want = (
        'setup = "source ~/miniconda3/etc/profile.d/conda.sh && conda activate vit && '
        'export HF_HOME=/data/hf"'
    )
    assert want in text
    assert any("kept as setup" in n for n in notes)
    # a command list: the lines before its first command
    text, _ = import_text("source .venv/bin/activate\npython a.py\nexport Y=2\n", "l.txt")
    assert 'setup = "source .venv/bin/activate"' in text
    assert 'cmd = "python a.py"' in text and 'cmd = "export Y=2"' in text
