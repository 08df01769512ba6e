"""The command line behaves like the tools users know (issue 22.5), run as the real ``gtui``.

``--help`` lists the global options, the commands and the exit codes; a mistyped command or job
name gets "did you mean"; ``gtui completion bash|zsh|fish`` prints a completion script, and the
bash one, sourced by a real bash, completes commands, options, queue files and job names;
``NO_COLOR`` and a non-terminal stdout give plain output.
"""

from __future__ import annotations

import os
import pty
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import gtui, write_queue

BIN = Path(sys.executable).parent
QUEUE = """
[[jobs]]
name = "train-vit"
gpus = 0
cmd = '''printf '\\033[31mRED\\033[0m plain\\n' '''

[[jobs]]
name = "eval-{ds}"
gpus = 0
matrix = { ds = ["cifar", "imagenet"] }
cmd = "true"
"""


def test_help_lists_global_options_commands_and_exit_codes() -> None:
    r = gtui("--help")
    assert r.returncode == 0, r.stderr
    out = r.stdout
    for option in ("--fake-gpus SPEC", "--no-tmux", "--version", "GTUI_FAKE_GPUS", "NO_COLOR"):
        assert option in out, option
    for command in ("run", "validate", "status", "kill", "wait", "completion", "import"):
        assert f"\n    {command} " in out or f"\n    {command}\n" in out, command
    codes = out[out.index("exit codes:") :]
    for code, words in (
        ("0", "ok"),
        ("1", "failed"),
        ("2", "bad input"),
        ("3", "another scheduler"),
        ("124", "timeout"),
        ("130", "interrupted"),
    ):
        line = next((ln for ln in codes.splitlines() if ln.strip().startswith(code + " ")), "")
        assert words in line, (code, codes)


def test_a_mistyped_command_gets_did_you_mean(tmp_path: Path) -> None:
    q = write_queue(tmp_path, QUEUE)
    r = gtui("stauts", str(q))
    assert r.returncode == 2
    assert r.stderr.strip() == "gtui: unknown command `stauts`; did you mean `status`?"
    r = gtui("valdate", str(q))
    assert "did you mean `validate`?" in r.stderr and r.returncode == 2
    assert "Traceback" not in r.stderr


def test_a_word_that_is_neither_command_nor_file_says_both(tmp_path: Path) -> None:
    r = gtui("zzqx", cwd=tmp_path)
    assert r.returncode == 2
    assert "zzqx" in r.stderr and "command" in r.stderr and "queue file" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr


def test_a_mistyped_job_name_gets_did_you_mean(tmp_path: Path) -> None:
    q = write_queue(tmp_path, QUEUE)
    r = gtui("kill", str(q), "train-vti")
    assert r.returncode == 2
    assert "did you mean `train-vit`?" in r.stderr, r.stderr


@pytest.mark.parametrize(
    ("shell", "marker"),
    [("bash", "complete -o nospace"), ("zsh", "compdef"), ("fish", "complete --command gtui")],
)
def test_completion_prints_a_script_for_each_shell(shell: str, marker: str) -> None:
    r = gtui("completion", shell)
    assert r.returncode == 0, r.stderr
    assert marker in r.stdout and "gtui" in r.stdout


def test_completion_for_an_unknown_shell_is_one_clear_line() -> None:
    r = gtui("completion", "tcsh")
    assert r.returncode == 2
    assert "bash" in r.stderr and "zsh" in r.stderr and "fish" in r.stderr
    assert "Traceback" not in r.stderr


def _bash_complete(line: str, cwd: Path) -> list[str]:
    """What a real bash offers for ``line`` (cursor at its end) with gtui's script sourced."""
    words = line.split(" ")
    script = (
        'source <(gtui completion bash)\n'
        f"COMP_LINE={_q(line)}; COMP_POINT={len(line)}; COMP_TYPE=9\n"
        f"COMP_WORDS=({' '.join(_q(w) for w in words)}); COMP_CWORD={len(words) - 1}\n"
        "_python_argcomplete gtui\n"
        'printf "%s\\n" "${COMPREPLY[@]}"\n'
    )
    env = {**os.environ, "PATH": f"{BIN}:{os.environ['PATH']}"}
    r = subprocess.run(
        ["bash", "--norc", "--noprofile", "-c", script],
        capture_output=True, text=True, cwd=cwd, env=env, timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert r.returncode == 0, r.stderr
    return [w.strip() for w in r.stdout.splitlines() if w.strip()]


def _q(word: str) -> str:
    return "'" + word.replace("'", "'\\''") + "'"


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_bash_completes_commands_options_queue_files_and_job_names(tmp_path: Path) -> None:
    write_queue(tmp_path, QUEUE, name="exp.toml")
    (tmp_path / "notes.txt").write_text("not a queue\n")
    assert {"validate", "wait"} <= set(_bash_complete("gtui va", tmp_path) + _bash_complete("gtui wa", tmp_path))
    assert "--json" in _bash_complete("gtui status exp.toml --j", tmp_path)
    assert "exp.toml" in _bash_complete("gtui ex", tmp_path)  # `gtui QUEUE.toml`, the dashboard
    files = _bash_complete("gtui run ", tmp_path)
    assert "exp.toml" in files and "notes.txt" not in files, files
    jobs = _bash_complete("gtui kill exp.toml ", tmp_path)
    assert {"train-vit", "eval-cifar", "eval-imagenet", "eval"} <= set(jobs), jobs
    assert _bash_complete("gtui log exp.toml tr", tmp_path) == ["train-vit"]
    shells = _bash_complete("gtui completion ", tmp_path)
    assert set(shells) == {"bash", "zsh", "fish"}, shells


def _on_a_terminal(args: list[str], env: dict[str, str], cwd: Path) -> str:
    """Run the real gtui with its stdout on a pseudo-terminal; what it wrote there."""
    main, other = pty.openpty()
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", "gtui", *args],
            stdout=other, stderr=other, stdin=subprocess.DEVNULL, cwd=cwd, env=env,
        )
        os.close(other)
        chunks: list[bytes] = []
        while True:
            try:
                data = os.read(main, 65536)
            except OSError:  # EIO: the child closed the terminal
                break
            if not data:
                break
            chunks.append(data)
        assert proc.wait(timeout=60) == 0, b"".join(chunks)
        return b"".join(chunks).decode("utf-8", "replace")
    finally:
        os.close(main)


def _ran(tmp_path: Path) -> Path:
    q = write_queue(tmp_path, QUEUE)
    r = gtui("run", str(q), timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    return q


def test_no_color_gives_a_plain_log_on_a_terminal(tmp_path: Path) -> None:
    q = _ran(tmp_path)
    base = {k: v for k, v in os.environ.items() if k != "NO_COLOR"}
    coloured = _on_a_terminal(["log", str(q), "train-vit"], base, tmp_path)
    assert "\x1b[31mRED" in coloured  # the log's own colours, kept on a terminal
    plain = _on_a_terminal(["log", str(q), "train-vit"], {**base, "NO_COLOR": "1"}, tmp_path)
    assert "RED plain" in plain and "\x1b" not in plain, repr(plain)


def test_a_non_terminal_stdout_gets_no_escape_of_gtuis_own(tmp_path: Path) -> None:
    q = _ran(tmp_path)
    for args in (["status", str(q)], ["--help"], ["validate", str(q)], ["completion", "--help"]):
        r = gtui(*args)
        assert r.returncode == 0, (args, r.stderr)
        assert "\x1b" not in r.stdout, args
