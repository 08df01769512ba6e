"""The command line behaves like the tools users know, run as the real ``gtui``.

``--help`` lists the global options, the commands and the exit codes; a mistyped command or job
name gets "did you mean"; ``gtui completion bash|zsh|fish`` prints a completion script, and each,
installed as docs/cli.md says in a real bash, zsh and fish (a test skips a shell that is not
installed), completes commands, options, queue files and job names;
``NO_COLOR`` and a non-terminal stdout give plain output.
"""

from __future__ import annotations

import os
import pty
import shutil
import subprocess
import sys
from collections.abc import Callable
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


def test_every_commands_help_has_its_own_usage_line_and_ends_with_an_example() -> None:
    """Each `gtui COMMAND --help`, as the user runs it: `usage: gtui COMMAND [-h] ...` (not the
    top usage line with the command tacked on), and an example of the command at the end."""
    from gtui.cli import SUBCOMMANDS

    for command in SUBCOMMANDS:
        r = gtui(command, "--help")
        assert r.returncode == 0, (command, r.stderr)
        first = r.stdout.splitlines()[0]
        assert first.startswith(f"usage: gtui {command} [-h]"), first
        assert "GLOBAL OPTIONS" not in first and "COMMAND [ARGS]" not in first, first
        lines = r.stdout.rstrip().splitlines()
        assert lines[-2] == "example:", (command, lines[-3:])
        words = lines[-1].split()  # the example runs this very command
        assert f"gtui {command}" in " ".join(words[words.index("gtui") :]), lines[-1]


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
    r = subprocess.run(
        ["bash", "--norc", "--noprofile", "-c", script],
        capture_output=True, text=True, cwd=cwd, env=_env(), timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert r.returncode == 0, r.stderr
    return [w.strip() for w in r.stdout.splitlines() if w.strip()]


def _q(word: str) -> str:
    return "'" + word.replace("'", "'\\''") + "'"


def _env(**more: str) -> dict[str, str]:
    return {**os.environ, "PATH": f"{BIN}:{os.environ['PATH']}", "TERM": "xterm", **more}


# An interactive zsh on a pseudo-terminal (zpty) sources SETUP, then LINE is typed and TAB
# pressed (complete-word): the completion system runs as it does for a person. Every match it
# offers passes through compadd (argcomplete's _describe calls it), which is wrapped to append
# the matches to $GTUI_CAPTURE; once the completion is over the shell writes
# $GTUI_CAPTURE.done and exits.
ZSH_DRIVER = r"""
zmodload zsh/zpty || exit 3
zpty z zsh -f -i
zpty -w z "source ${(q)1}"
zpty -w -n z "$2"$'\t'
while zpty -r z chunk; do :; done
zpty -d z
"""
ZSH_CAPTURE = r"""
PROMPT='' RPROMPT=''
bindkey '^I' complete-word
compadd() {
  # matches the completion system asks for itself (-O, -A, -D) are not offers
  if [[ ${@[1,(i)(-|--)]} == *-(O|A|D)\ * ]]; then
    builtin compadd "$@"
    return
  fi
  local -a hits
  builtin compadd -A hits "$@"
  (( $#hits )) && print -rl -- $hits >> $GTUI_CAPTURE
  builtin compadd "$@"
}
_gtui_capture_done() { : >> $GTUI_CAPTURE.done; exit }
comppostfuncs=(_gtui_capture_done)
"""


def _zsh_complete(line: str, cwd: Path, shell_dir: Path, setup: str) -> list[str]:
    """What a real zsh offers for ``line`` after ``setup`` (which loads gtui's script)."""
    shell_dir.mkdir(exist_ok=True)
    driver, inner, out = shell_dir / "driver.zsh", shell_dir / "inner.zsh", shell_dir / "offers"
    driver.write_text(ZSH_DRIVER)
    inner.write_text(setup + "\n" + ZSH_CAPTURE)
    for f in (out, out.with_name("offers.done")):
        f.unlink(missing_ok=True)
    r = subprocess.run(
        ["zsh", "-f", str(driver), str(inner), line],
        capture_output=True, text=True, cwd=cwd, timeout=60, stdin=subprocess.DEVNULL,
        env=_env(GTUI_CAPTURE=str(out), HOME=str(shell_dir)),
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert out.with_name("offers.done").exists(), f"zsh never completed {line!r}: {r.stdout}"
    offers = out.read_text().splitlines() if out.exists() else []
    return list(dict.fromkeys(w for w in offers if w.strip()))  # _describe adds each twice


def _fish_complete(line: str, cwd: Path, shell_dir: Path) -> list[str]:
    """What a real fish offers for ``line`` (``complete -C``), gtui's script installed where
    docs/cli.md says (~/.config/fish/completions/gtui.fish) under a home of its own."""
    r = subprocess.run(
        ["fish", "-c", "complete -C $GTUI_LINE"],
        capture_output=True, text=True, cwd=cwd, timeout=60, stdin=subprocess.DEVNULL,
        env=_env(
            GTUI_LINE=line,
            HOME=str(shell_dir),
            XDG_CONFIG_HOME=str(shell_dir / "config"),
            XDG_DATA_HOME=str(shell_dir / "data"),
            XDG_CACHE_HOME=str(shell_dir / "cache"),
        ),
    )
    assert r.returncode == 0, r.stderr
    return list(dict.fromkeys(w.split("\t")[0] for w in r.stdout.splitlines() if w.strip()))


def _printed(shell: str) -> str:
    r = gtui("completion", shell)
    assert r.returncode == 0, r.stderr
    return r.stdout


def _completer(shell: str, tmp_path: Path, cwd: Path) -> Callable[[str], list[str]]:
    """A real ``shell`` with gtui's completion installed as docs/cli.md says."""
    shell_dir = tmp_path / f"{shell}-home"
    shell_dir.mkdir()
    if shell == "bash":
        return lambda line: _bash_complete(line, cwd)
    if shell == "zsh":  # gtui completion zsh > "${fpath[1]}/_gtui", then compinit
        functions = shell_dir / "functions"
        functions.mkdir()
        (functions / "_gtui").write_text(_printed("zsh"))
        setup = f"fpath=({_q(str(functions))} $fpath); autoload -U compinit && compinit -u -D"
        return lambda line: _zsh_complete(line, cwd, shell_dir, setup)
    completions = shell_dir / "config" / "fish" / "completions"
    completions.mkdir(parents=True)
    (completions / "gtui.fish").write_text(_printed("fish"))
    return lambda line: _fish_complete(line, cwd, shell_dir)


def _needs(shell: str) -> pytest.MarkDecorator:
    return pytest.mark.skipif(
        shutil.which(shell) is None,
        reason=f"{shell} is not installed here (.ci/run installs it): its real-shell completion is not tried",
    )


@pytest.mark.parametrize("shell", [pytest.param(s, marks=_needs(s)) for s in ("bash", "zsh", "fish")])
def test_a_real_shell_completes_commands_options_queue_files_and_job_names(
    tmp_path: Path, shell: str
) -> None:
    here = tmp_path / "here"
    here.mkdir()
    write_queue(here, QUEUE, name="exp.toml")
    (here / "notes.txt").write_text("not a queue\n")
    (here / "runs").mkdir()
    complete = _completer(shell, tmp_path, here)
    assert "validate" in complete("gtui va")
    assert {"status", "stop"} <= set(complete("gtui st"))
    assert "--json" in complete("gtui status exp.toml --j")
    assert "exp.toml" in complete("gtui ex")  # `gtui QUEUE.toml`, the dashboard
    files = complete("gtui run ")
    assert {"exp.toml", "runs/"} <= set(files) and "notes.txt" not in files, files
    jobs = complete("gtui kill exp.toml ")
    assert {"train-vit", "eval-cifar", "eval-imagenet", "eval"} <= set(jobs), jobs
    assert complete("gtui log exp.toml tr") == ["train-vit"]
    assert complete("gtui kill exp.toml eval-i") == ["eval-imagenet"]
    shells = complete("gtui completion ")
    assert set(shells) == {"bash", "zsh", "fish"}, shells


@_needs("zsh")
def test_zsh_completes_with_the_script_evaluated_in_zshrc(tmp_path: Path) -> None:
    """docs/cli.md's other zsh way: eval "$(gtui completion zsh)" after compinit."""
    write_queue(tmp_path, QUEUE, name="exp.toml")
    setup = 'autoload -U compinit && compinit -u -D && eval "$(gtui completion zsh)"'
    shell_dir = tmp_path / ".zsh-home"
    assert _zsh_complete("gtui va", tmp_path, shell_dir, setup) == ["validate"]
    assert _zsh_complete("gtui log exp.toml tr", tmp_path, shell_dir, setup) == ["train-vit"]


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
