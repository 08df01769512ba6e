"""Bad input, generated: queue files and command lines a user might get wrong.

The strategies build inputs that are wrong in one known way (so the answer must be exit 2), or
random text and random edits of the sample queues (so the answer may be 0 or 2). Every case runs
the real command line in-process (``gtui.cli.main``), which is fast enough for thousands of
cases; an exception escaping it is the traceback a user would see. The properties:

- exit 2 for a wrong input, with a message on stderr that starts ``gtui:`` and, for a queue
  file, names it; never a traceback; at most three lines;
- never a changed file: the queue file keeps its bytes, nothing else in its directory changes
  (a state directory ``.gtui/`` may appear: that is gtui's, not the user's).

Used by tests/reliability/test_bad_input.py (a few hundred cases in CI) and ``python -m soak``
(thousands).
"""

from __future__ import annotations

import contextlib
import io
import re
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import tomli_w
from hypothesis import strategies as st

from gtui.cli import main as cli_main
from gtui.core.queue.queuefile import JOB_KEYS, SETTINGS_KEYS
from tests.conftest import REPO

SAMPLES = sorted((REPO / "sample_queues").glob("*.toml"))


@dataclass
class Tally:
    """How many cases each property has run (the soak reports it)."""

    counts: dict[str, int] = field(default_factory=dict)

    def add(self, what: str) -> None:
        self.counts[what] = self.counts.get(what, 0) + 1

    @property
    def total(self) -> int:
        return sum(self.counts.values())


TALLY = Tally()


# ---------------------------------------------------------------------------------------------
# running the command line and checking the outcome


@dataclass
class Outcome:
    code: int
    out: str
    err: str


def run_cli(argv: list[str]) -> Outcome:
    """``gtui ARGV`` in this process, its exit status and output (argparse's exits included)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = cli_main(argv)
        except SystemExit as e:  # argparse: --help, usage errors
            code = e.code if isinstance(e.code, int) else (0 if e.code is None else 2)
    return Outcome(int(code), out.getvalue(), err.getvalue())


def snapshot(directory: Path) -> dict[str, bytes]:
    """Every user file under ``directory`` (gtui's own ``.gtui/`` left out) and its bytes."""
    files = {}
    for path in sorted(directory.rglob("*")):
        rel = path.relative_to(directory)
        if rel.parts[0] == ".gtui" or not path.is_file():
            continue
        files[str(rel)] = path.read_bytes()
    return files


def check_refused(outcome: Outcome, shown: str | None, argv: list[str]) -> None:
    """Exit 2, a plain message (naming ``shown`` when given), no traceback."""
    where = f"gtui {' '.join(argv)!r}"
    assert outcome.code == 2, f"{where}: exit {outcome.code}\n{outcome.out}\n{outcome.err}"
    check_plain(outcome, argv)
    assert outcome.err.strip(), f"{where}: exit 2 with no message"
    if shown is not None:
        assert shown in outcome.err, f"{where}: the message does not name {shown}: {outcome.err}"


def check_plain(outcome: Outcome, argv: list[str]) -> None:
    where = f"gtui {' '.join(argv)!r}"
    assert "Traceback" not in outcome.err + outcome.out, f"{where}:\n{outcome.err}"
    odd = [c for c in outcome.err if not (c.isprintable() or c == "\n")]
    assert not odd, f"{where}: control characters reach the terminal: {odd}: {outcome.err!r}"
    lines = [line for line in outcome.err.split("\n") if line.strip()]
    if outcome.code == 2 and not outcome.err.startswith("usage:"):
        assert outcome.err.startswith("gtui: "), f"{where}: {outcome.err!r}"
        assert len(lines) <= 3, f"{where}: {len(lines)} lines:\n{outcome.err}"


def in_fresh_dir(fn: Callable[[Path], None]) -> None:
    with tempfile.TemporaryDirectory(prefix="gtui-fuzz-") as d:
        fn(Path(d))


# ---------------------------------------------------------------------------------------------
# queue files wrong in one known way


def base_doc() -> dict[str, Any]:
    """A valid queue: simulated GPUs (so pool checks are made), a CPU job and a GPU job."""
    return {
        "settings": {"fake_gpus": "2x80G", "poll": "1s"},
        "jobs": [
            {"name": "prep", "cmd": "echo prep", "gpus": 0},
            {"name": "train", "cmd": "echo train", "gpus": 1, "mem": "10G", "after": ["prep"]},
        ],
    }


_NO_DIGITS = st.text(alphabet="xyzQ!?#%^ abc", min_size=1, max_size=12)
NOT_A_SIZE = st.one_of(
    _NO_DIGITS,
    st.sampled_from(["-5G", "5Q", "G", "5 5G", "1e999G", "12 parsecs", "-1", "0x10G", "½G"]),
    st.booleans(),
    st.lists(st.integers(), max_size=2),
    st.integers(max_value=-1),
)
NOT_A_DURATION = st.one_of(
    _NO_DIGITS,
    st.sampled_from(["-5s", "5x", "s", "1h-5m", "1e999s", "forever", "-1"]),
    st.booleans(),
    st.lists(st.integers(), max_size=2),
    st.integers(max_value=-1),
)
NOT_AN_INT = st.one_of(
    st.text(max_size=8),
    st.floats(allow_nan=False, allow_infinity=False).filter(lambda f: f != int(f)),
    st.booleans(),
    st.lists(st.integers(), max_size=2),
)
NOT_A_TABLE = st.one_of(st.text(max_size=8), st.integers(), st.lists(st.integers(), max_size=2))
BAD_NAME_CHARS = " /\\,{}\"'$*?[]<>|;&()`\t\n"
BAD_NAME = st.one_of(
    st.builds(
        lambda a, c, b: a + c + b,
        st.text(alphabet="abc-_.", max_size=5),
        st.sampled_from(list(BAD_NAME_CHARS)),
        st.text(max_size=5),
    ),
    st.sampled_from(["", "-x", ".hidden", "..", "../escape", "a" * 129]),
)


def _settings(key: str, value: st.SearchStrategy[Any]) -> st.SearchStrategy[tuple[str, Any]]:
    return st.tuples(st.just(f"settings.{key}"), value)


def _job(key: str, value: st.SearchStrategy[Any]) -> st.SearchStrategy[tuple[str, Any]]:
    return st.tuples(st.just(f"jobs.{key}"), value)


def _unknown(known: tuple[str, ...]) -> st.SearchStrategy[str]:
    return st.text(min_size=1, max_size=12).filter(lambda k: k not in known)


# (where, bad value): where is "settings.KEY", "jobs.KEY" (the GPU job) or a special mutation.
WRONG_VALUE = st.one_of(
    _settings(
        "mode", st.text(max_size=10).filter(lambda v: v not in ("exclusive", "shared", "pack"))
    ),
    _settings(
        "placement", st.text(max_size=10).filter(lambda v: v not in ("most_available", "best_fit"))
    ),
    _settings("on_failure", st.text(max_size=10).filter(lambda v: v not in ("continue", "pause"))),
    _settings("reserve", st.one_of(st.integers(max_value=-1), NOT_AN_INT)),
    _settings("max_parallel", st.one_of(st.integers(max_value=-1), NOT_AN_INT)),
    _settings("retries", st.one_of(st.integers(max_value=-2), NOT_AN_INT)),
    _settings(
        "oom_grow", st.one_of(st.floats(max_value=0.99, allow_nan=False), st.text(max_size=5))
    ),
    _settings("poll", st.one_of(NOT_A_DURATION, st.just("0s"), st.just(0))),
    _settings("kill_grace", NOT_A_DURATION),
    _settings("starve_after", NOT_A_DURATION),
    _settings("isolate", st.one_of(st.text(max_size=5), st.integers())),
    _settings("multi_gpu_first", st.one_of(st.text(max_size=5), st.integers())),
    _settings("env", st.one_of(NOT_A_TABLE, st.just({"A=B": "1"}), st.just({"X": [1]}))),
    _settings("log_dir", st.one_of(st.integers(), st.just(""), st.just("a\0b"))),
    _settings("gpus", st.one_of(st.just("some"), st.just([-1]), st.just(["a"]), st.just(1.5))),
    _settings("exclude", st.one_of(st.just(["a"]), st.just("x"), st.just([1.5]))),
    _settings("fake_gpus", st.one_of(_NO_DIGITS, st.just("4x"), st.just("80G@200"), st.integers())),
    st.tuples(st.just("settings.?"), _unknown(SETTINGS_KEYS)),
    _job("gpus", st.one_of(st.integers(max_value=-1), st.integers(min_value=3), NOT_AN_INT)),
    _job("mem", st.one_of(NOT_A_SIZE, st.sampled_from(["81G", "1000G", "1T"]))),
    _job("priority", NOT_AN_INT),
    _job("retries", st.one_of(st.integers(max_value=-2), NOT_AN_INT)),
    _job("timeout", st.one_of(NOT_A_DURATION, st.just("0s"), st.just(0))),
    _job(
        "after",
        st.one_of(
            st.just(["nosuch"]),
            st.just(["train"]),
            st.integers(),
            st.just([1]),
            st.lists(
                st.text(min_size=1, max_size=6).filter(lambda n: n not in ("prep", "train")),
                min_size=1,
                max_size=2,
            ),
        ),
    ),
    _job("cwd", st.one_of(st.integers(), st.just(""), st.just("a\0b"))),
    _job("env", st.one_of(NOT_A_TABLE, st.just({"1X": "a"}), st.just({"X": {"y": 1}}))),
    _job("name", st.one_of(BAD_NAME, st.just("prep"), st.integers())),
    _job("cmd", st.one_of(st.just(""), st.just("   "), st.integers(), st.just("echo \0"))),
    _job("matrix", st.one_of(NOT_A_TABLE, st.just({}), st.just({"lr": []}), st.just({"1x": [1]}))),
    _job("cmd", st.just("echo {gpu3}")),
    st.tuples(st.just("jobs.?"), _unknown(JOB_KEYS)),
    st.tuples(st.just("cycle"), st.just(None)),
    st.tuples(st.just("cpu-mem"), st.just(None)),
    st.tuples(st.just("no-cmd"), st.just(None)),
    st.tuples(st.just("jobs-not-tables"), NOT_A_TABLE),
    st.tuples(st.just("top-level"), _unknown(("settings", "jobs", "diagnose"))),
    st.tuples(st.just("settings-not-a-table"), st.one_of(st.integers(), st.text(max_size=5))),
)


def wrong_doc(where: str, value: Any) -> dict[str, Any]:
    """The valid base document made wrong in one way."""
    doc = base_doc()
    gpu_job = doc["jobs"][1]
    if where == "settings.?":
        doc["settings"][value] = 1
    elif where.startswith("settings."):
        doc["settings"][where.split(".", 1)[1]] = value
    elif where == "jobs.?":
        gpu_job[value] = 1
    elif where.startswith("jobs."):
        gpu_job[where.split(".", 1)[1]] = value
    elif where == "cycle":
        doc["jobs"][0]["after"] = ["train"]
    elif where == "cpu-mem":
        doc["jobs"][0]["mem"] = "1G"
    elif where == "no-cmd":
        del gpu_job["cmd"]
    elif where == "jobs-not-tables":
        doc["jobs"] = value if not isinstance(value, list) else [*value, 1]
    elif where == "top-level":
        doc[value] = 1
    elif where == "settings-not-a-table":
        doc["settings"] = value
    return doc


def check_wrong_queue(where: str, value: Any) -> None:
    """A queue file wrong in one known way: validate, status and run all exit 2 naming the file,
    and neither the file nor its directory changes."""
    TALLY.add("wrong queue files")

    # Wrong only against the GPUs (more GPUs or memory than there is): `status` reads no GPU,
    # and `run` finds it once it has read them, after taking the queue's lock.
    pool = (where == "jobs.gpus" and type(value) is int and value > 2) or (
        where == "jobs.mem" and value in ("81G", "1000G", "1T")
    )

    def body(d: Path) -> None:
        queue = d / "q.toml"
        queue.write_text(tomli_w.dumps(wrong_doc(where, value)))
        before = snapshot(d)
        for argv in (["validate", str(queue)], ["run", str(queue)], ["status", str(queue)]):
            outcome = run_cli(argv)
            if pool and argv[0] == "status":
                check_plain(outcome, argv)
            else:
                check_refused(outcome, "q.toml", argv)
            assert snapshot(d) == before, f"gtui {argv[0]} changed a file ({where}={value!r})"
        if not pool:
            assert not (d / ".gtui").exists(), f"a refused file must not get run state ({where})"

    in_fresh_dir(body)


# ---------------------------------------------------------------------------------------------
# nesting: deep enough to break a recursive reader


@st.composite
def nested_queue(draw: st.DrawFn) -> str:
    """A queue file with arrays or inline tables nested 33 to 3,000 deep in one random place."""
    depth = draw(st.one_of(st.integers(33, 120), st.integers(300, 3000)))
    kind = draw(st.sampled_from(["array", "table", "mixed"]))
    opens, closes = [], []
    for i in range(depth):
        table = kind == "table" or (kind == "mixed" and i % 2 == 1)
        opens.append("{a = " if table else "[")
        closes.append("}" if table else "]")
    value = "".join(opens) + "1" + "".join(reversed(closes))
    where = draw(st.sampled_from(["matrix", "env", "settings", "top"]))
    if where == "matrix":
        return f'[[jobs]]\ncmd = "x {{v}}"\nmatrix = {{ v = [{value}] }}\n'
    if where == "env":
        return f'[[jobs]]\ncmd = "x"\nenv = {{ A = {value} }}\n'
    if where == "settings":
        return f'[settings]\nenv = {{ A = {value} }}\n[[jobs]]\ncmd = "x"\n'
    return f'x = {value}\n[[jobs]]\ncmd = "x"\n'


def check_nested(text: str) -> None:
    """A file nested to break the reader: a plain one-line refusal, never a RecursionError."""
    TALLY.add("deeply nested files")

    def body(d: Path) -> None:
        queue = d / "q.toml"
        queue.write_text(text)
        for argv in (["validate", str(queue)], ["status", str(queue)]):
            outcome = run_cli(argv)
            check_refused(outcome, "q.toml", argv)
            assert "nested too deeply" in outcome.err, outcome.err

    in_fresh_dir(body)


# ---------------------------------------------------------------------------------------------
# random text, random edits of the samples


def check_any_text(data: bytes) -> None:
    """Anything at all as a queue file: exit 0 or 2, a plain message, the file unchanged."""
    TALLY.add("random files")

    def body(d: Path) -> None:
        queue = d / "q.toml"
        queue.write_bytes(data)
        before = snapshot(d)
        argv = ["validate", str(queue)]
        outcome = run_cli(argv)
        assert outcome.code in (0, 2), (argv, data[:200], outcome)
        check_plain(outcome, argv)
        assert snapshot(d) == before

    in_fresh_dir(body)


@st.composite
def edited_sample(draw: st.DrawFn) -> tuple[str, str]:
    """A sample queue with a few random edits: characters dropped or inserted, lines
    duplicated, swapped or cut."""
    path = draw(st.sampled_from(SAMPLES))
    text = path.read_text()
    for _ in range(draw(st.integers(1, 4))):
        lines = text.split("\n")
        kind = draw(st.sampled_from(["drop", "insert", "dup", "swap", "cut", "replace"]))
        if kind in ("drop", "insert", "replace") and text:
            i = draw(st.integers(0, len(text) - 1))
            n = draw(st.integers(1, 8))
            junk = draw(st.text(min_size=1, max_size=8))
            if kind == "drop":
                text = text[:i] + text[i + n :]
            elif kind == "insert":
                text = text[:i] + junk + text[i:]
            else:
                text = text[:i] + junk + text[i + len(junk) :]
        elif kind in ("dup", "swap") and len(lines) > 1:
            i = draw(st.integers(0, len(lines) - 1))
            j = draw(st.integers(0, len(lines) - 1))
            if kind == "dup":
                lines.insert(j, lines[i])
            else:
                lines[i], lines[j] = lines[j], lines[i]
            text = "\n".join(lines)
        elif kind == "cut":
            text = text[: draw(st.integers(0, len(text)))]
    return path.name, text


def check_edited_sample(sample: tuple[str, str]) -> None:
    """A sample queue after random edits: validate exits 0 or 2, plainly, changing nothing."""
    TALLY.add("edited samples")
    name, text = sample

    def body(d: Path) -> None:
        queue = d / name
        queue.write_text(text)
        (d / "mock_train.py").write_text("")
        before = snapshot(d)
        argv = ["validate", str(queue)]
        outcome = run_cli(argv)
        assert outcome.code in (0, 2), (argv, text, outcome)
        check_plain(outcome, argv)
        if outcome.code == 2:
            assert name in outcome.err, outcome.err
        assert snapshot(d) == before

    in_fresh_dir(body)


# ---------------------------------------------------------------------------------------------
# command lines

VALID_QUEUE = tomli_w.dumps(base_doc())
JUNK_WORD = st.text(max_size=10).filter(lambda w: "\0" not in w)


@st.composite
def wrong_command_line(draw: st.DrawFn) -> tuple[list[str], str | None]:
    """A command line wrong in one known way, over a valid queue file ``{Q}`` (the placeholder
    is replaced by its path), with the global options sprinkled anywhere. Returns the argv and
    the text the message must contain (None: any message)."""
    family = draw(
        st.sampled_from(
            [
                "unknown-option",
                "missing-file",
                "broken-file",
                "directory",
                "add-bad-value",
                "unknown-job",
                "bad-fake-gpus",
                "import-missing",
                "no-queue",
                "missing-option-value",
            ]
        )
    )
    verbs = ["run", "validate", "status", "kill", "pause", "resume", "retry", "add"]
    verb = draw(st.sampled_from(verbs))
    must: str | None = None
    if family == "unknown-option":
        opt = "--" + draw(st.text(alphabet="abcdefghijklmnopqrstuvwxyz-", min_size=3, max_size=10))
        known = ("--help", "--version", "--json", "--no-tmux", "--fake-gpus", "--backend")
        if opt in known or opt.startswith(
            (
                "--ba",  # --backend, a global option (argparse takes prefixes)
                "--he",
                "--ve",
                "--js",
                "--no",
                "--fa",
                "--na",
                "--gp",
                "--me",
                "--pr",
                "--af",
                "--re",
                "--ti",
                "--cw",
            )
        ):
            opt = "--bogus-option"
        argv = [verb, "{Q}", opt]
        if verb in ("kill", "retry"):
            argv.append("prep")
        must = "unrecognized arguments"
    elif family == "missing-file":
        argv = [verb, "{D}/nosuch" + draw(st.text(alphabet="abc", max_size=4)) + ".toml"]
        if verb in ("kill", "retry"):
            argv.append("prep")
        must = "nosuch"
    elif family == "broken-file":
        argv = [verb, "{B}"]
        if verb in ("kill", "retry"):
            argv.append("prep")
        must = "broken.toml"
    elif family == "directory":
        argv = [draw(st.sampled_from(["run", "validate", "status"])), "{D}"]
    elif family == "add-bad-value":
        opt, value = draw(
            st.sampled_from(
                [
                    ("--gpus", "-1"),
                    ("--gpus", "two"),
                    ("--gpus", "9"),
                    ("--mem", "lots"),
                    ("--mem", "999T"),
                    ("--priority", "high"),
                    ("--retries", "-5"),
                    ("--timeout", "soon"),
                    ("--after", "nosuch"),
                    ("--name", "a/b"),
                    ("--name", "../up"),
                    ("--name", "x;rm -rf ~"),
                    ("--name", "prep"),
                    ("--cwd", "/nonexistent/dir"),
                ]
            )
        )
        argv = [
            "add",
            "{Q}",
            opt,
            value,
            "--",
            "echo",
            draw(JUNK_WORD.filter(lambda w: "\0" not in w)) or "x",
        ]
    elif family == "unknown-job":
        name = "x" + draw(st.text(alphabet="abcxyz-_.0123456789", max_size=10))
        argv = [draw(st.sampled_from(["kill", "pause", "resume", "retry"])), "{Q}", name]
        must = name
    elif family == "bad-fake-gpus":
        argv = ["--fake-gpus", draw(_NO_DIGITS.filter(lambda s: s.strip())), "run", "{Q}"]
    elif family == "import-missing":
        argv = ["import", "{D}/nosuch.sh"]
    elif family == "no-queue":
        argv = [draw(st.sampled_from(["run", "validate", "status", "kill", "add"]))]
    else:  # missing-option-value
        argv = ["add", "{Q}", draw(st.sampled_from(["--gpus", "--mem", "--name", "--after"]))]
    if family in ("missing-file", "broken-file") and verb == "add":
        argv += ["--", "echo", "x"]  # else "no command" is the first thing wrong
    if draw(st.booleans()) and family not in ("bad-fake-gpus",):
        # Global options may stand anywhere: they must not change the verdict.
        pos = draw(st.integers(0, len(argv)))
        if "--" in argv:
            pos = min(pos, argv.index("--"))
        argv.insert(pos, "--no-tmux")
    return argv, must


def check_wrong_command_line(case: tuple[list[str], str | None]) -> None:
    """A wrong command line: exit 2, plainly, and the queue file (and every file) unchanged."""
    TALLY.add("wrong command lines")
    template, must = case

    def body(d: Path) -> None:
        queue = d / "q.toml"
        queue.write_text(VALID_QUEUE)
        (d / "broken.toml").write_text('[settings]\nmode = "bogus"\n')
        before = snapshot(d)
        subst = {"{Q}": str(queue), "{B}": str(d / "broken.toml"), "{D}": str(d)}
        argv = [re.sub(r"\{[QBD]\}", lambda m: subst[m.group(0)], a) for a in template]
        outcome = run_cli(argv)
        check_refused(outcome, must, argv)
        assert snapshot(d) == before, f"gtui {argv} changed a file"
        db = d / ".gtui" / "q.db"
        if db.exists():  # a refused command may have opened the state: every job still queued
            from gtui.core.state.store import Store

            with Store(db, readonly=True) as store:
                states = {r.state.value for r in store.load().values()}
            assert states <= {"queued"}, states

    in_fresh_dir(body)
