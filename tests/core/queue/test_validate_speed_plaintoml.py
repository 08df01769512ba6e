"""The fast reader of plain queue files (gtui.core.queue.plaintoml) against tomllib and the scanner.

``parse_plain`` must return exactly ``(tomllib.loads(text), scan(text))`` or None: these tests
generate many texts, plain and tricky (escapes, multi-line strings, inline tables, arrays of
tables, comments, unicode, dotted and quoted keys, duplicates, odd line breaks), and check that
whatever it accepts reads the same as tomllib (values and their types) and scans the same, that
it refuses what tomllib refuses, and that a load of a queue file gives the same jobs, warnings and
errors (file:line, key) whichever reader read it.
"""

from __future__ import annotations

import math
import os
import re
import tempfile
import tomllib
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from gtui.core.errors import QueueFileError
from gtui.core.queue import parse, placeholders, queuefile
from gtui.core.queue.plaintoml import parse_plain
from gtui.core.queue.tomlscan import Scan, scan
from tests.conftest import REPO

# Generated examples per property: enough for CI's few seconds; GTUI_PLAIN_EXAMPLES=20000 for a
# deeper run (a change to plaintoml.py deserves one).
EXAMPLES = int(os.environ.get("GTUI_PLAIN_EXAMPLES", "400"))

# ---------------------------------------------------------------------------------------------
# comparing


def typed(value: Any) -> Any:
    """``value`` with every scalar's type kept, so 1, 1.0 and True differ (and nan == nan)."""
    if isinstance(value, dict):
        return ("dict", [(k, typed(v)) for k, v in value.items()])
    if isinstance(value, list):
        return ("list", [typed(v) for v in value])
    if isinstance(value, float):
        return ("float", "nan" if math.isnan(value) else repr(value))
    return (type(value).__name__, value)


def scan_facts(sc: Scan) -> Any:
    """Everything a reader of a Scan can see."""
    tables = [
        (t.path, t.array, t.line, dict(t.keys), list(t.repeated), dict(t.inline_entries))
        for t in sc.tables
    ]
    paths = {t.path for t in sc.tables} | {("jobs",), ("diagnose",), ("settings", "diagnose")}
    entries = {
        p: [(e.line, e.first, e.last, dict(e.keys)) for e in sc.entries(*p)] for p in sorted(paths)
    }
    keys = {(t.path, k): sc.key_line(t.path, k) for t in sc.tables for k in ("cmd", "name", "zz")}
    return tables, entries, keys, list(sc.lines), list(sc.content)


def check_same(text: str) -> tuple[dict[str, Any], Scan] | None:
    """Assert parse_plain(text) is tomllib's reading and scan's scan of it, or None."""
    got = parse_plain(text)
    try:
        want: dict[str, Any] | None = tomllib.loads(text)
    except (tomllib.TOMLDecodeError, ValueError):  # ValueError: an integer too long for int()
        want = None
    if got is None:
        return None
    assert want is not None, f"accepted a text tomllib refuses: {text!r}"
    assert typed(got[0]) == typed(want), text
    assert scan_facts(got[1]) == scan_facts(scan(text)), text
    return got


# ---------------------------------------------------------------------------------------------
# generated texts

BARE = st.sampled_from(["a", "b", "cmd", "name", "env", "jobs", "settings", "x-1", "_", "9"])
# Text without control characters (most texts), and text with any character (a few).
CLEAN_CHARS = st.characters(blacklist_categories=("Cs", "Cc"), max_codepoint=0x2FFF)
TEXT = st.text(
    st.characters(
        blacklist_categories=("Cs", "Cc"), blacklist_characters='"\\', max_codepoint=0x2FFF
    ),
    max_size=12,
)
CLEAN_TEXT = st.text(CLEAN_CHARS, max_size=12)
ANY_TEXT = st.text(st.characters(blacklist_categories=("Cs",), max_codepoint=0x2FFF), max_size=12)


def often(common: st.SearchStrategy[str], rare: st.SearchStrategy[str], odds: int = 8) -> Any:
    """``common`` most of the time, ``rare`` once in ``odds`` draws or so."""
    return st.sampled_from(range(odds + 1)).flatmap(lambda n: rare if n == odds else common)


def _basic(s: str) -> str:
    return '"' + s + '"'


ESCAPES = often(
    st.sampled_from(["\\n", "\\t", '\\"', "\\\\", "\\u00e9", "\\U0001F600", "\\b"]),
    st.sampled_from(["\\x", "\\e", "\\ud800", "\\/"]),  # not TOML 1.0 escapes
    odds=20,
)
BASIC = st.one_of(
    TEXT.map(_basic),
    TEXT.map(_basic),
    st.lists(st.one_of(TEXT, ESCAPES), max_size=4).map(lambda parts: _basic("".join(parts))),
    st.sampled_from(['"a,b"', '"k = v"', '"#x"', '"{gpu}"', '"[1]"', '"it\'s"', '"\t"', '""']),
)
LITERAL = st.one_of(
    st.text(CLEAN_CHARS.filter(lambda c: c != "'"), max_size=10).map(lambda s: "'" + s + "'"),
    st.sampled_from(["'a\\b'", "'\"q\"'", "'#'", "''", "'a,b'", "'x = 1'"]),
)
ODD_NUMBERS = st.sampled_from(
    [
        "+0",
        "-0",
        "+7",
        "007",
        "1_000",
        "0x1F",
        "0o17",
        "0b11",
        "1.",
        ".5",
        "1E-05",
        "0e0",
        "inf",
        "-inf",
        "nan",
        "+nan",
        "1979-05-27",
        "1979-05-27T07:32:00Z",
        "07:32:00",
        "True",
        "truex",
        "1__0",
        "٣",
    ]
)
NUMBER = often(
    st.one_of(
        st.integers(-(10**20), 10**20).map(str),
        st.floats(allow_nan=False, allow_infinity=False).map(repr),
        st.sampled_from(["0", "1e5", "-1.5e+3", "0.0", "true", "false"]),
    ),
    ODD_NUMBERS,
    odds=12,
)
SCALAR = st.one_of(BASIC, LITERAL, NUMBER)
SEP = st.sampled_from([", ", ",", " ,", ",\t"])


@st.composite
def arrays(draw: st.DrawFn, inner: st.SearchStrategy[str]) -> str:
    items = draw(st.lists(inner, max_size=4))
    sep = draw(SEP)
    trailing = draw(st.sampled_from(["", "", ",", " , "]) if items else st.just(""))
    if draw(st.integers(0, 40)) == 0:
        trailing = ","  # in an empty array: invalid
    return "[" + draw(st.sampled_from(["", " "])) + sep.join(items) + trailing + "]"


@st.composite
def inline_tables(draw: st.DrawFn, inner: st.SearchStrategy[str]) -> str:
    keys = draw(st.lists(BARE, max_size=3, unique=True))
    if draw(st.integers(0, 20)) == 0:
        keys.append(draw(st.sampled_from(['"q k"', "a.b", "'l'", "a"])))  # quoted, dotted, twice
    pairs = [f"{k}{draw(st.sampled_from(['=', ' = ']))}{draw(inner)}" for k in keys]
    trailing = "," if draw(st.integers(0, 40)) == 0 else ""
    return "{" + draw(st.sampled_from(["", " "])) + ", ".join(pairs) + trailing + " }"


VALUE = often(
    st.one_of(
        SCALAR,
        SCALAR,
        SCALAR,
        arrays(SCALAR),
        inline_tables(SCALAR),
        inline_tables(arrays(SCALAR)),
        arrays(inline_tables(SCALAR)),
        arrays(arrays(SCALAR)),
    ),
    st.sampled_from(
        ['"""one"""', "'''two'''", '"""', "'''", '"""a\\', "[", "{", "", "= 1", '"x" "y"', "1 2"]
    ),
    odds=40,
)
COMMENT = often(st.just(""), often(CLEAN_TEXT, ANY_TEXT, 30).map(lambda s: " #" + s), odds=3)
ODD_KEYS = st.sampled_from(['"quoted"', "'lit'", "a.b", "a . b", "é", "a b", ""])


@st.composite
def lines(draw: st.DrawFn, key: str) -> str:
    """One line: mostly ``key = value`` (valid or nearly), sometimes anything else."""
    kind = draw(
        often(st.sampled_from(["kv"] * 8 + ["header", "blank", "comment"]), st.just("raw"), 60)
    )
    ws = draw(st.sampled_from(["", "", "", "  ", "\t"]))
    if kind == "kv":
        if draw(st.integers(0, 60)) == 0:
            key = draw(ODD_KEYS)
        eq = draw(st.sampled_from([" = ", " = ", "=", " =\t", "  =  "]))
        return f"{ws}{key}{eq}{draw(VALUE)}{draw(COMMENT)}"
    if kind == "header":
        name = draw(often(BARE, st.sampled_from(["a.b", '"q"', "settings.diagnose", ""]), 10))
        pad = draw(st.sampled_from(["", "", " "]))
        odd = st.sampled_from([("[ [", "]]"), ("[[", "]"), ("[", "]]")])
        open_, close = draw(
            often(st.sampled_from([("[", "]"), ("[[", "]]"), ("[[", "]]")]), odd, 30)
        )
        return f"{ws}{open_}{pad}{name}{pad}{close}{draw(COMMENT)}"
    if kind == "blank":
        return ws
    if kind == "comment":
        return f"{ws}#{draw(often(CLEAN_TEXT, ANY_TEXT, 30))}"
    return draw(ANY_TEXT)


@st.composite
def documents(draw: st.DrawFn) -> str:
    """Up to 30 lines; keys mostly fresh (k0, k1...) so that many texts are valid TOML, and a
    few repeated on purpose."""
    body = []
    for i in range(draw(st.integers(0, 30))):
        key = f"k{i}" if draw(st.integers(0, 40)) else draw(BARE)
        body.append(draw(lines(key)))
    breaks = st.sampled_from(["\r\n", "\r", "\u2028", "\x85", "\x0c"])
    newline = draw(often(st.just("\n"), breaks, odds=6))
    end = draw(st.sampled_from(["", "\n"]))
    return newline.join(body) + end


@given(documents())
@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@example("a = 1\na = 2\n")
@example("[a]\n[a]\n")
@example("[[a]]\n[a]\n")
@example("a = []\n[[a]]\n")
@example("jobs = [ {cmd = 'a'}, {cmd = 'b'} ]\n")
@example('x = "1"\r\ny = 2\r\n')
def test_plain_reads_as_tomllib_and_scans_as_the_scanner(text: str) -> None:
    check_same(text)


# ---------------------------------------------------------------------------------------------
# a table: what it must read, and what it must leave to tomllib

PLAIN = [
    "",
    "# only a comment\n",
    'a = "x"',
    '[settings]\ngpus = [0, 1]\nenv = { A = "1", B = 2 }  # trailing\n\n[[jobs]]\ncmd = "x"\n',
    '[ settings ]\n[[ jobs ]]\ncmd = "é ü 中文 🚀"\n[[jobs]]\ncmd = "#not a comment"\n',
    "a = 'C:\\path\\x'\nb = '\"quoted\"'\n",
    "a = 1.5e3\nb = -0\nc = +7\nd = true\ne = []\nf = {}\ng = [1, 'x', 2.0, false,]\n",
    "a = 0\nb = 10\nc = 123456789012345678901234567890\nd = 0.5\n",
    "cmd = \"awk '{print $1}' {{gpu}}\"\n",
    'a = "tab\there"\n',
    '[[jobs]]\ncmd = "x"\nmatrix = { lr = [0.1, 0.01], seed = [1, 2] }\n',
    'a = "x"\r\n[b]\r\nc = 1\r\n',
    "a = 1979-05-27\n",  # a date: tomllib reads the value alone
    'a = """one line"""\n',
    "a = { b.c = 1 }\n",
    'a = [[1, 2], ["x"]]\n',
    "jobs = [ {cmd = 'a'}, {cmd = 'b'} ]\n",
]
NOT_PLAIN = [
    'a = "x\\ny"\nb = 1\n',  # a value tomllib reads alone is fine; this one is read alone too
    'a = """\nmulti\n"""\n',
    "a = '''\nmulti\n'''\n",
    'a = [\n  "x",\n]\n',
    "a = {\n}\n",
    "a.b = 1\n",
    '"quoted" = 1\n',
    "[a.b]\nc = 1\n",
    '["q"]\n',
    "[[settings.diagnose]]\nkind = 'x'\n",
    "a = 1\na = 2\n",
    "[a]\n[a]\n",
    "[a]\n[[a]]\n",
    "[[a]]\n[a]\n",
    "a = 1\n[a]\n",
    "a = [1]\n[[a]]\n",
    "a = 1\rb = 2\n",
    "a = 'x\u2028y'\n",
    "# \x85\n",
    "a = \x01\n",
    "é = 1\n",
    "a = 1 b = 2\n",
    "a\n",
    "a = 007\n",
    "a = { b = 1, }\n",
    "a = [,]\n",
    "[a] x\n",
    "[[a]\n",
    "[]\n",
    "a = " + "1" * 5000 + "\n",
]


@pytest.mark.parametrize("text", PLAIN)
def test_plain_texts_are_read_here(text: str) -> None:
    assert check_same(text) is not None


@pytest.mark.parametrize("text", NOT_PLAIN)
def test_other_texts_are_left_to_tomllib(text: str) -> None:
    if text.startswith('a = "x\\ny"'):
        assert check_same(text) is not None  # an escape: that one value goes to tomllib alone
        return
    assert parse_plain(text) is None


# ---------------------------------------------------------------------------------------------
# runs of tables of one shape (a generated queue file): read whole by a regex of that shape

SHAPE_LINES = st.sampled_from(
    [
        'name = "{v}"',
        'cmd = "python t.py --lr {v}"',
        "gpus = {i}",
        'mem = "{i}G"',
        "priority = {i}",
        '  cwd   =   "{v}"',
        "\tretries\t=\t{i}",
    ]
)
# what may differ in one table of the run: a value that is not of the shape (an escape, a quote,
# a leading zero, a float, a long integer, an empty string), a comment, spaces at a line's end,
# a key more or less, a line break in another form, the end of the text without a newline
ODD = st.sampled_from(
    [
        '"a\\tb"',
        '"a\\"b"',
        "'lit'",
        "007",
        "1.5",
        "12345678901234567890",
        '""',
        "# a comment",
        "   ",
        "extra = 1",
        "gpus = 2",
        "\n",
        "{ A = 1 }",
    ]
)


@st.composite
def shaped_runs(draw: st.DrawFn) -> str:
    shape = draw(st.lists(SHAPE_LINES, min_size=1, max_size=5, unique=True))
    blank = draw(st.sampled_from(["\n", "\n\n", "", "\n\n\n"]))
    header = draw(st.sampled_from(["[[jobs]]", "[[jobs]] # a job", "[[ jobs ]]"]))
    parts = ['[settings]\nmode = "pack"\n\n']
    for i in range(draw(st.integers(1, 12))):
        body = [line.format(v=f"v{i}", i=i) for line in shape]
        odd = draw(often(st.just(""), ODD, 3))
        if odd:
            at = draw(st.integers(0, len(body)))
            if "=" in odd or odd.startswith("#") or not odd.strip() or odd == "\n":
                body.insert(at, odd)
            elif at < len(body):
                key = body[at].split("=", 1)[0]
                body[at] = f"{key}= {odd}"
        parts.append(header + "\n" + "\n".join(body) + "\n" + blank)
    text = "".join(parts)
    if draw(st.booleans()):
        text = text.rstrip("\n")
    if draw(st.integers(0, 9)) == 0:
        text = text.replace("\n", "\r\n")
    return text


@given(shaped_runs())
@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
@example('[[jobs]]\nname = "a"\n\n[[jobs]]\nname = "b"\n\n[[jobs]]\nname = "c"\nx = 1\n')
@example('[[jobs]]\nname = "a"\n[[jobs]]\nname = "b"\n\n\n[[jobs]]\nname = ""\n[[jobs]]\n')
@example("[[jobs]]\ngpus = 1\n[[jobs]]\ngpus = 2\n[[jobs]]\ngpus = 3\n\n# c\ngpus = 4\n")
@example("[[jobs]]\nn = 1\n[[jobs]]\nn = 2\n[[jobs]]\nn = 3\nn = 4\n")
def test_runs_of_one_shape_read_as_tomllib_and_scan_as_the_scanner(text: str) -> None:
    check_same(text)


def test_a_run_of_one_shape_is_read_by_the_fast_reader() -> None:
    from benchmarks.scale import write_queue as scale_queue

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "q.toml"
        scale_queue(path, 300)
        text = path.read_text()
    assert check_same(text) is not None
    assert check_same(text.replace('mem = "70G"', 'mem = "7\\u0030G"', 1)) is not None


# ---------------------------------------------------------------------------------------------
# a whole load: the same jobs, warnings and errors whichever reader read the file


def load_result(path: Path, text: str, plain: bool, monkeypatch: pytest.MonkeyPatch) -> Any:
    with monkeypatch.context() as m:  # (a load without a reader of its own keeps nothing)
        if not plain:
            m.setattr(parse, "parse_plain", lambda text, **_: None)
        try:
            qf = queuefile.load_queue(path, text=text, machine={0: 81920, 1: 81920, 2: 24576})
        except QueueFileError as e:
            return ("error", str(e), e.line, e.key)
    return (
        "ok",
        queuefile.settings_to_json(qf.settings),
        [(queuefile.job_to_json(j), j.line, j.entry, j.matrix) for j in qf.jobs],
        qf.warnings,
    )


# each key of a [[jobs]] table: forms that load (warnings included), and mistakes
JOB_KEYS = {
    "cmd": [
        '"python train.py --gpu {{gpu}} {i}"',
        '"echo {i} {{port}} {{n_gpus}}"',
        '"echo {i} {{nope}}"',
        '"CUDA_VISIBLE_DEVICES={{gpu}} python x.py {i}"',
        "'echo \"{i}\" {{lr}}'",
        '"echo \\"{i}\\" # {i}"  # a comment',
        "\"awk '{{{{print $1}}}}' {i}\"",
    ],
    "gpus": ["{g}", "1"],
    "mem": ['"{m}G"', "{m}", '"500M"'],
    "priority": ["{g}", "-3"],
    "after": ["[{after}]", "{one}", "[]"],
    "retries": ["2", "-1"],
    "timeout": ['"1h"', "90"],
    "env": ['{{ SEED = "{i}", LR = 0.1 }}', "{{}}", '{{ A = "x,y=z" }}'],
    "matrix": ["{{ lr = [0.1, 0.01] }}", "{{ lr = [1, 2], seed = ['a', 'b'] }}"],
}
MISTAKES = {
    "name": ['"bad/name{i}"', '"j0"', '"sweep{i}-{{nokey}}"'],
    "cmd": ['""', "1", '"x {{gpu3}}"'],
    "gpus": ["-1", '"two"', "9"],
    "mem": ['"lots"', '"200G"'],
    "priority": ["1.5"],
    "after": ['["nobody"]', "[1]", '["j{i}"]', '["sweep0-{{lr}}"]'],
    "retries": ["-2"],
    "timeout": ['"0s"'],
    "env": ['{{ "BAD NAME" = 1 }}', "{{ A = [1] }}"],
    "matrix": ["{{ lr = [] }}", "{{ gpu = [1] }}"],
    "colour": ["1"],
}


@st.composite
def job_tables(draw: st.DrawFn, i: int, names: list[str], mistake: bool) -> str:
    """A [[jobs]] table (its ``after`` names earlier jobs); its name is added to ``names``."""
    keys = draw(st.lists(st.sampled_from(sorted(JOB_KEYS)), max_size=5, unique=True))
    keys = ["name", "cmd", *(k for k in keys if k != "cmd")]
    if not names and "after" in keys:
        keys.remove("after")
    bad = draw(st.sampled_from(sorted(MISTAKES))) if mistake else None
    if bad is not None and bad not in keys:
        keys.append(bad)
    name = draw(st.sampled_from([f"j{i}", f"j{i}", f"sweep{i}-{{lr}}"]))
    if "{lr}" in name and "matrix" not in keys:
        keys.append("matrix")
    fill = {
        "i": i,
        "g": draw(st.integers(0, 3)),
        "m": draw(st.sampled_from([1, 20, 30, 90])),
        "after": ", ".join(
            f'"{n}"'
            for n in draw(st.lists(st.sampled_from(names or ["-"]), min_size=1, max_size=3))
        ),
    }
    fill["one"] = fill["after"].split(", ")[0]
    out = []
    for key in keys:
        if key == "name" and key != bad:
            form = name.replace("{", "{{").replace("}", "}}")
            out.append(f'name = "{form}"' if draw(st.integers(0, 4)) else f"name = '{form}'")
        elif key == "cmd" and bad == "cmd" and draw(st.booleans()):
            continue  # no cmd at all
        else:
            forms = MISTAKES[key] if key == bad else JOB_KEYS[key]
            out.append(f"{key} = {draw(st.sampled_from(forms))}")
        if draw(st.integers(0, 8)) == 0:
            out.append(draw(st.sampled_from(["# a comment", "", "  "])))
    names.append(name)
    header = draw(st.sampled_from(["[[jobs]]", "[[jobs]]", "[[ jobs ]]  # entry"]))
    return header + "\n" + "\n".join(line.format(**fill) for line in out) + "\n"


SETTINGS_LINES = st.lists(
    st.sampled_from(
        [
            'mode = "pack"',
            "reserve = 1",
            "gpus = [0, 1]",
            "isolate = false",
            "retries = -1",
            'poll = "1s"',
            'env = { A = "1" }',
        ]
    ),
    max_size=3,
    unique=True,
)


@st.composite
def queue_files(draw: st.DrawFn) -> str:
    settings_lines = draw(SETTINGS_LINES)
    n = draw(st.integers(0, 8))
    # the job with a mistake (-1: none; n: in [settings]); half the files have none
    wrong = draw(st.integers(-1, n)) if draw(st.booleans()) else -1
    if wrong == n:
        settings_lines.append(draw(st.sampled_from(["bogus = 1", "reserve = -1", "[jobs]"])))
    parts = ["[settings]\n" + "\n".join(settings_lines) + "\n"]
    names: list[str] = []
    parts += [draw(job_tables(i, names, i == wrong)) for i in range(n)]
    return "\n".join(parts)


@given(text=queue_files())
@settings(max_examples=EXAMPLES // 2, deadline=None, suppress_health_check=list(HealthCheck))
def test_load_is_the_same_whichever_reader(
    text: str, tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path_factory.mktemp("q") / "q.toml"
    path.write_text(text)
    fast = load_result(path, text, True, monkeypatch)
    slow = load_result(path, text, False, monkeypatch)
    assert fast == slow, text


@pytest.mark.parametrize("depth", [1, 2, 27, 28, 29, 30, 31, 32, 33, 40])
@pytest.mark.parametrize(
    "form",
    [
        "x = {array}\n",
        "[settings]\nenv = {table}\n",
        '[[jobs]]\ncmd = "a"\nenv = {table}\n',
        '[[jobs]]\ncmd = "a"\nafter = {array}\n',
        '[[jobs]]\ncmd = "a"\nmatrix = {{ lr = {array} }}\n',
    ],
)
def test_deep_nesting_is_refused_alike_whichever_reader(
    depth: int, form: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The fast reader checks the nesting of only the values it left to tomllib: the same
    files are refused (or not) as when the whole document is walked."""
    text = form.format(array="[" * depth + "]" * depth, table="{ a = " * depth + "1" + " }" * depth)
    path = tmp_path / "q.toml"
    path.write_text(text)
    fast = load_result(path, text, True, monkeypatch)
    assert fast == load_result(path, text, False, monkeypatch)
    # levels above the value: the root, a [table] or an [[array]] and its table, a matrix
    above = 1 + ("[settings]" in form) + 2 * ("[[jobs]]" in form) + ("matrix" in form)
    refused = fast[0] == "error" and "nested too deeply" in fast[1]
    assert refused == (above + depth > queuefile.MAX_NESTING), fast


FIXTURES = sorted(
    [*REPO.glob("sample_queues/*.toml"), *REPO.glob("tests/**/*.toml")],
    key=lambda p: str(p.relative_to(REPO)),
)


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: str(p.relative_to(REPO)))
def test_every_fixture_loads_the_same_whichever_reader(
    path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every sample queue and broken-file fixture: the same jobs, warnings, or error (message,
    line, key) through the plain reader and its shapes as through tomllib and the scanner."""
    text = path.read_text()
    fast = load_result(path, text, True, monkeypatch)
    assert fast == load_result(path, text, False, monkeypatch)


SCALE_20 = 'name = "train-000020"\ncmd = " exec sleep 3600 # lr 20"\ngpus = 1\nmem = "70G"\n'
CHANGES = [
    ("scale", "", ""),
    ("scale", 'name = "train-000020"', 'name = "train-000003"'),  # a duplicate, deep in a run
    ("scale", SCALE_20, SCALE_20.replace("gpus = 1", "gpus = 9")),  # more than the pool has
    ("scale", SCALE_20, SCALE_20.replace("70G", "90G")),  # more than any GPU has
    ("scale", SCALE_20, SCALE_20.replace("70G", "auto")),
    ("scale", SCALE_20, SCALE_20.replace("name =", "nom =")),  # a typo'd key
    ("scale", SCALE_20, SCALE_20.replace("# lr 20", "--gpu {gpu}")),  # a warning
    ("scale", SCALE_20, SCALE_20 + 'after = ["train-000021"]\n'),  # a key more
    ("scale", SCALE_20, SCALE_20 + 'after = ["train-000020"]\n'),  # waits for itself
    ("scale", SCALE_20, SCALE_20 + 'after = ["train-00002"]\n'),  # no such job: a hint
    ("scale", SCALE_20, SCALE_20 + "gpus = 2\n"),  # set twice: tomllib's error
    ("scale", SCALE_20, SCALE_20.replace("gpus = 1\n", "")),  # a key less
    ("scale", SCALE_20 + "\n", SCALE_20 + "# a comment\n\n"),
    ("validate", "", ""),
    ("validate", 'name = "job38"', 'name = "job3"'),
]


@pytest.mark.parametrize(("which", "old", "new"), CHANGES)
def test_generated_queues_load_the_same_whichever_reader(
    which: str, old: str, new: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The benchmarks' generated files (runs of tables of one shape), with one table changed
    deep in a run: the same QueueFile, warnings or error whichever reader read them."""
    if which == "scale":
        from benchmarks.scale import write_queue as generate
    else:
        from benchmarks.validate import write_queue as generate
    path = tmp_path / "q.toml"
    generate(path, 60)
    text = path.read_text()
    assert old in text
    text = text.replace(old, new, 1)
    path.write_text(text)
    fast = load_result(path, text, True, monkeypatch)
    assert fast == load_result(path, text, False, monkeypatch)


def test_the_benchmark_file_is_read_by_the_fast_reader(tmp_path: Path) -> None:
    from benchmarks.validate import write_queue

    path = tmp_path / "big.toml"
    write_queue(path, 300)
    assert check_same(path.read_text()) is not None


# ---------------------------------------------------------------------------------------------
# placeholders_used: its fast paths give what the full token scan gives


def reference_placeholders_used(cmd: str) -> set[str]:
    used: set[str] = set()
    for m in placeholders._TOKEN.finditer(cmd):
        if m.group("seed") is not None:
            n = m.group("seed_n")
            used.add("gpu" if n is None else f"gpu{n}")
        elif m.group("ident") is not None:
            used.add(m.group("ident"))
    return used


PIECES = st.sampled_from(
    ["{", "}", "{{", "}}", "$", "${", "\\", "gpu", "gpu1", "port", "lr", "_x", "1", " ", "a", "٣"]
)


@given(st.lists(PIECES, max_size=12).map("".join))
@settings(max_examples=1000, deadline=None)
@example("{a}}")
@example("{{a}")
@example("${available_gpu_2} {gpu}")
def test_placeholders_used_fast_paths(cmd: str) -> None:
    assert placeholders.placeholders_used(cmd) == reference_placeholders_used(cmd)
    want = {int(u[3:]) for u in reference_placeholders_used(cmd) if re.fullmatch(r"gpu\d+", u)}
    assert placeholders.gpu_indices_used(cmd) == want
