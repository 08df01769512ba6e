"""The queue file: settings, jobs, sizes, matrix, names, `after`, pool checks, and every error
(the tests/broken/ corpus, through the real `gtui validate`)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gtui.core.errors import QueueFileError
from gtui.core.model import Mode, Placement, Settings
from gtui.core.queue.queuefile import (
    derive_name,
    job_from_fields,
    load_queue,
    name_problem,
    parse_settings,
)
from tests.conftest import TESTS, gtui, write_queue

BROKEN = TESTS / "broken"


# ---------------------------------------------------------------------------------------------
# settings


def test_empty_queue_is_valid(tmp_path: Path) -> None:
    q = write_queue(tmp_path, "# nothing yet\n")
    qf = load_queue(q)
    assert qf.jobs == ()
    assert qf.settings == Settings()


def test_settings_defaults_and_every_key(tmp_path: Path) -> None:
    q = write_queue(
        tmp_path,
        """
        [settings]
        gpus = [0, 1, 2, 3]
        exclude = [3]
        reserve = 1
        mode = "pack"
        placement = "best_fit"
        max_parallel = 4
        retries = -1
        oom_grow = 1.5
        poll = "500ms"
        kill_grace = "1m"
        log_dir = "~/logs"
        isolate = false
        on_failure = "pause"
        env = { WANDB_MODE = "disabled", SEED = 3, LR = 0.5 }
        starve_after = "1h30m"
        multi_gpu_first = true
        fake_gpus = "4x80G"
        """,
    )
    s = load_queue(q).settings
    assert s.gpus == (0, 1, 2, 3) and s.exclude == (3,)
    assert (s.reserve, s.mode, s.placement) == (1, Mode.PACK, Placement.BEST_FIT)
    assert (s.max_parallel, s.retries, s.oom_grow) == (4, -1, 1.5)
    assert (s.poll_s, s.kill_grace_s, s.starve_after_s) == (0.5, 60.0, 5400.0)
    assert (s.log_dir, s.isolate, s.on_failure) == ("~/logs", False, "pause")
    assert s.env == {"WANDB_MODE": "disabled", "SEED": "3", "LR": "0.5"}
    assert s.multi_gpu_first is True and s.fake_gpus == "4x80G"


def test_settings_gpus_as_the_seed_writes_them() -> None:
    assert parse_settings({"gpus": "0 1 2"}).gpus == (0, 1, 2)
    assert parse_settings({"gpus": "0,2"}).gpus == (0, 2)
    assert parse_settings({"gpus": "all"}).gpus == "all"


def test_diagnose_rules_from_both_places(tmp_path: Path) -> None:
    q = write_queue(
        tmp_path,
        """
        [[settings.diagnose]]
        kind = "dataset missing"
        pattern = "No such dataset: (\\\\w+)"
        hint = "run prep first"

        [[jobs]]
        cmd = "echo hi"

        [[diagnose]]
        kind = "preempted"
        signals = ["SIGTERM", 10]
        exit_codes = 143
        """,
    )
    rules = load_queue(q).settings.diagnose
    assert [r.kind for r in rules] == ["dataset missing", "preempted"]
    assert rules[0].pattern == "No such dataset: (\\w+)" and rules[0].hint == "run prep first"
    assert rules[1].signals == (15, 10) and rules[1].exit_codes == (143,)


# ---------------------------------------------------------------------------------------------
# jobs


@pytest.mark.parametrize(
    ("written", "mib"),
    [
        ("35", 35 * 1024),
        ("35.5", int(35.5 * 1024)),
        ('"35G"', 35 * 1024),
        ('"35GB"', 35 * 1024),
        ('"35GiB"', 35 * 1024),
        ('"500M"', 500),
        ('"500MiB"', 500),
        ('"1.5g"', 1536),
        ("0", 0),
    ],
)
def test_sizes_in_the_file(tmp_path: Path, written: str, mib: int) -> None:
    q = write_queue(tmp_path, f'[[jobs]]\ncmd = "x"\nmem = {written}\n')
    assert load_queue(q).jobs[0].mem_mib == mib


@pytest.mark.parametrize(
    ("written", "seconds"),
    [("90", 90.0), ('"90s"', 90.0), ('"5m"', 300.0), ('"4h"', 14400.0), ('"1h30m"', 5400.0)],
)
def test_durations_in_the_file(tmp_path: Path, written: str, seconds: float) -> None:
    q = write_queue(tmp_path, f'[[jobs]]\ncmd = "x"\ntimeout = {written}\n')
    assert load_queue(q).jobs[0].timeout_s == seconds


def test_job_defaults_and_retries_from_settings(tmp_path: Path) -> None:
    q = write_queue(
        tmp_path,
        """
        [settings]
        retries = 2

        [[jobs]]
        name = "a"
        cmd = "echo a"

        [[jobs]]
        name = "b"
        cmd = "echo b"
        retries = 0
        gpus = 0
        priority = 5
        after = "a"
        cwd = "sub"

        [jobs.env]
        SEED = "1"
        """,
    )
    a, b = load_queue(q).jobs
    assert (a.gpus, a.mem_mib, a.priority, a.after, a.retries, a.timeout_s, a.cwd) == (
        1,
        None,
        0,
        (),
        2,
        None,
        ".",
    )
    assert (b.retries, b.gpus, b.priority, b.after, b.cwd, b.env) == (
        0,
        0,
        5,
        ("a",),
        "sub",
        {"SEED": "1"},
    )
    assert (a.line, a.entry, b.line, b.entry) == (4, 0, 8, 1)


def test_matrix_expansion_order_and_names(tmp_path: Path) -> None:
    q = write_queue(
        tmp_path,
        """
        [[jobs]]
        name = "sweep-lr{lr}"
        cmd = "python train.py --lr {lr} --bs {bs} --opt {opt}"
        matrix = { lr = [0.1, 1e-5], bs = [32, 64], opt = ["adam"] }
        mem = "12G"
        env = { RUN = "{lr}-{bs}" }
        """,
    )
    jobs = load_queue(q).jobs
    assert [j.name for j in jobs] == [
        "sweep-lr0.1-bs=32-opt=adam",
        "sweep-lr0.1-bs=64-opt=adam",
        "sweep-lr1e-5-bs=32-opt=adam",
        "sweep-lr1e-5-bs=64-opt=adam",
    ]
    assert jobs[2].cmd == "python train.py --lr 1e-5 --bs 32 --opt adam"
    assert jobs[2].matrix == {"lr": "1e-5", "bs": "32", "opt": "adam"}
    assert jobs[3].env == {"RUN": "1e-5-64"}
    assert {j.entry for j in jobs} == {0} and all(j.mem_mib == 12 * 1024 for j in jobs)


def test_matrix_without_name_and_with_unsafe_values(tmp_path: Path) -> None:
    q = write_queue(
        tmp_path,
        """
        [[jobs]]
        cmd = "python eval.py --ckpt {ckpt}"
        matrix = { ckpt = ["runs/a b/best.pt", "runs/c/best.pt"] }
        """,
    )
    jobs = load_queue(q).jobs
    base = derive_name("python eval.py --ckpt {ckpt}")
    assert [j.name for j in jobs] == [
        f"{base}-ckpt=runs_a_b_best.pt",
        f"{base}-ckpt=runs_c_best.pt",
    ]
    assert jobs[0].cmd == "python eval.py --ckpt runs/a b/best.pt"


def test_matrix_braces_in_values_reach_the_command_unchanged(tmp_path: Path) -> None:
    from gtui.core.queue.placeholders import substitute

    q = write_queue(
        tmp_path,
        """
        [[jobs]]
        name = "fmt-{i}"
        cmd = "echo {f}"
        matrix = { i = [1], f = ["{gpu}"] }
        """,
    )
    job = load_queue(q).jobs[0]
    assert substitute(job.cmd, gpus=[4], name=job.name, attempt=1, port=None, matrix={}) == (
        "echo {gpu}"
    )


def test_after_a_matrix_entry_means_all_its_jobs(tmp_path: Path) -> None:
    q = write_queue(
        tmp_path,
        """
        [[jobs]]
        name = "prep-{ds}"
        cmd = "prep {ds}"
        gpus = 0
        matrix = { ds = ["a", "b"] }

        [[jobs]]
        name = "train-{ds}"
        cmd = "train {ds}"
        matrix = { ds = ["a", "b"] }
        after = ["prep-{ds}"]

        [[jobs]]
        name = "report"
        cmd = "report"
        gpus = 0
        after = ["train-{ds}", "prep-a"]
        """,
    )
    jobs = {j.name: j for j in load_queue(q).jobs}
    assert jobs["train-a"].after == ("prep-a",)
    assert jobs["train-b"].after == ("prep-b",)
    assert jobs["report"].after == ("train-a", "train-b", "prep-a")


def test_derived_names_are_stable_and_documented() -> None:
    assert re.fullmatch(r"train-0\.1-[0-9a-f]{6}", derive_name("python train.py --lr 0.1"))
    assert derive_name("python train.py --lr 0.1") == derive_name("python train.py --lr 0.1")
    assert derive_name("python train.py --lr 0.1") != derive_name("python train.py --lr 0.01")
    name = derive_name("CUDA_VISIBLE_DEVICES={gpu} bash scripts/run_pipeline.sh aircraft")
    assert name.startswith("run_pipeline-aircraft-")
    assert derive_name("--- ${x}").startswith("job-")


def test_a_derived_name_survives_reload(tmp_path: Path) -> None:
    body = '[[jobs]]\ncmd = "python train.py --gpu {gpu}"\n'
    first = load_queue(write_queue(tmp_path, body)).jobs[0].name
    again = load_queue(write_queue(tmp_path, "# edited\n\n" + body)).jobs[0].name
    assert first == again


@settings(max_examples=200)
@given(st.text(min_size=1, max_size=80))
def test_any_command_gets_a_valid_name(cmd: str) -> None:
    name = derive_name(cmd)
    assert name_problem(name) is None


def test_warnings_for_braces_that_are_not_placeholders(tmp_path: Path) -> None:
    q = write_queue(tmp_path, '[[jobs]]\ncmd = "echo {lr} {{lr}} {n_gpus}"\n')
    warnings = load_queue(q).warnings
    assert len(warnings) == 1 and "{lr} is not a placeholder" in warnings[0]
    assert f"{q}:2:" in warnings[0]


@pytest.mark.parametrize(
    ("cmd", "isolate", "warned"),
    [
        ("python t.py --gpu {gpu}", "true", True),
        ("python t.py --gpus ${available_gpu_0},${available_gpu_1}", "true", True),
        ("python t.py --gpu {gpu}", "false", False),
        ("CUDA_VISIBLE_DEVICES={gpu0},{gpu1} python t.py", "true", False),
        ("python t.py --gpu 0", "true", False),
    ],
)
def test_warning_for_physical_numbers_under_isolation(
    tmp_path: Path, cmd: str, isolate: str, warned: bool
) -> None:
    q = write_queue(
        tmp_path, f"[settings]\nisolate = {isolate}\n[[jobs]]\ncmd = '{cmd}'\ngpus = 2\n"
    )
    warnings = load_queue(q).warnings
    assert any("sees its GPUs as 0..1" in w for w in warnings) is warned


def test_inline_jobs_array(tmp_path: Path) -> None:
    q = write_queue(
        tmp_path,
        """
        jobs = [
          { name = "a", cmd = "echo a" },
          { name = "b", cmd = "echo b", after = ["a"] },
        ]
        """,
    )
    a, b = load_queue(q).jobs
    assert (a.line, b.line, b.after) == (2, 3, ("a",))


def test_a_cycle_is_named(tmp_path: Path) -> None:
    q = write_queue(
        tmp_path,
        """
        [[jobs]]
        name = "x"
        cmd = "x"
        after = ["y"]

        [[jobs]]
        name = "y"
        cmd = "y"
        after = ["x"]
        """,
    )
    with pytest.raises(QueueFileError) as e:
        load_queue(q)
    assert "x -> y -> x" in str(e.value) and e.value.key == "after" and e.value.line == 4


def test_a_long_chain_is_not_a_cycle(tmp_path: Path) -> None:
    parts = ['[[jobs]]\nname = "j0"\ncmd = "true"\n']
    parts += [
        f'[[jobs]]\nname = "j{i}"\ncmd = "true"\nafter = ["j{i - 1}"]\n' for i in range(1, 3000)
    ]
    q = write_queue(tmp_path, "\n".join(parts))
    assert len(load_queue(q).jobs) == 3000


# ---------------------------------------------------------------------------------------------
# the pool


def test_pool_checks_only_when_the_pool_is_known(tmp_path: Path) -> None:
    q = write_queue(tmp_path, '[[jobs]]\ncmd = "ddp"\ngpus = 4\nmem = "60G"\n')
    assert len(load_queue(q).jobs) == 1
    with pytest.raises(QueueFileError, match="the pool has 2"):
        load_queue(q, pool=[81920, 81920])
    with pytest.raises(QueueFileError, match="largest: 24G"):
        load_queue(q, pool=[24576] * 4)
    with pytest.raises(QueueFileError, match="only 2 GPUs of the pool have"):
        load_queue(q, pool=[81920, 81920, 24576, 24576])
    assert load_queue(q, pool=[81920, None, 81920, None]).jobs  # unknown totals may fit
    assert load_queue(q, pool=[None] * 4).jobs


def test_pool_from_the_machine_respects_settings(tmp_path: Path) -> None:
    q = write_queue(
        tmp_path,
        """
        [settings]
        gpus = [0, 1, 2]
        exclude = [2]

        [[jobs]]
        cmd = "ddp"
        gpus = 2
        """,
    )
    machine: dict[int, int | None] = {0: 81920, 1: 81920, 2: 81920, 3: 81920}
    assert load_queue(q, machine=machine).jobs
    with pytest.raises(QueueFileError, match="GPU 1 does not exist") as e:
        load_queue(q, machine={0: 81920, 2: 81920})
    assert e.value.line == 2 and e.value.key == "gpus"


def test_reserve_rule_in_the_pool_check(tmp_path: Path) -> None:
    body = '[settings]\nreserve = {k}\nmode = "{mode}"\n[[jobs]]\ncmd = "x"\ngpus = {n}\n'
    pool = [81920] * 4
    assert load_queue(write_queue(tmp_path, body.format(k=1, mode="shared", n=3)), pool=pool)
    assert load_queue(write_queue(tmp_path, body.format(k=1, mode="pack", n=4)), pool=pool)
    # Strict (the default): reserve 4 of 4 keeps all four; the bash script's rule still gives one.
    with pytest.raises(QueueFileError, match="at most 0"):
        load_queue(write_queue(tmp_path, body.format(k=4, mode="shared", n=1)), pool=pool)
    seed = body.replace("reserve = {k}", 'reserve = {k}\nreserve_rule = "seed"')
    assert load_queue(write_queue(tmp_path, seed.format(k=4, mode="shared", n=1)), pool=pool)
    with pytest.raises(QueueFileError, match="at most 3"):
        load_queue(write_queue(tmp_path, body.format(k=1, mode="shared", n=4)), pool=pool)
    with pytest.raises(QueueFileError, match="at most 0"):
        load_queue(write_queue(tmp_path, body.format(k=5, mode="exclusive", n=1)), pool=pool)


# ---------------------------------------------------------------------------------------------
# job_from_fields (the add form, gtui add)


def test_job_from_fields_checks_like_the_file() -> None:
    s = Settings(retries=3)
    jobs = job_from_fields(
        {"cmd": "python t.py --lr {lr}", "mem": 20, "after": ["prep"], "matrix": {"lr": [1, 2]}},
        s,
        "q.toml",
        None,
        {"prep"},
    )
    assert [j.name.rsplit("-", 1)[-1] for j in jobs] == ["lr=1", "lr=2"]
    assert all(j.retries == 3 and j.mem_mib == 20480 and j.after == ("prep",) for j in jobs)
    with pytest.raises(QueueFileError, match="already exists"):
        job_from_fields({"name": "prep", "cmd": "x"}, s, "q.toml", None, {"prep"})
    with pytest.raises(QueueFileError, match="no job named `prepp`; did you mean `prep`"):
        job_from_fields({"cmd": "x", "after": ["prepp"]}, s, "q.toml", None, {"prep"})
    with pytest.raises(QueueFileError, match="did you mean `mem`"):
        job_from_fields({"cmd": "x", "meme": "1G"}, s, "q.toml", 7, set())
    with pytest.raises(QueueFileError, match="the pool has 1"):
        job_from_fields({"cmd": "x", "gpus": 2}, s, "q.toml", None, set(), pool=[81920])


# ---------------------------------------------------------------------------------------------
# gtui validate, for real


def test_validate_prints_the_expanded_jobs(tmp_path: Path) -> None:
    q = write_queue(
        tmp_path,
        """
        [settings]
        fake_gpus = "2x80G"

        [[jobs]]
        name = "lr{lr}"
        cmd = "python train.py --lr {lr}"
        matrix = { lr = [0.1, 0.01] }
        mem = "12G"
        """,
    )
    out = gtui("validate", str(q))
    assert out.returncode == 0, out.stderr
    assert "lr0.1" in out.stdout and "python train.py --lr 0.01" in out.stdout
    assert "12G" in out.stdout and "2 GPUs" in out.stdout


def test_validate_json_shape(tmp_path: Path) -> None:
    q = write_queue(
        tmp_path,
        """
        [[jobs]]
        name = "a"
        cmd = "echo a"
        gpus = 0

        [[jobs]]
        name = "b"
        cmd = "echo b"
        mem = "1G"
        after = ["a"]
        timeout = "1m"
        env = { X = "1" }
        """,
    )
    out = gtui("validate", str(q), "--json", "--fake-gpus", "1x24G")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert set(doc) == {"settings", "jobs"}
    keys = {
        "name",
        "cmd",
        "gpus",
        "mem_mib",
        "mem_auto",
        "priority",
        "after",
        "retries",
        "timeout_s",
        "cwd",
        "env",
        "isolate",
    }
    assert all(set(j) == keys for j in doc["jobs"])
    assert doc["jobs"][0]["mem_mib"] is None
    assert doc["jobs"][1] == {
        "name": "b",
        "cmd": "echo b",
        "gpus": 1,
        "mem_mib": 1024,
        "mem_auto": False,
        "priority": 0,
        "after": ["a"],
        "retries": 0,
        "timeout_s": 60.0,
        "cwd": ".",
        "env": {"X": "1"},
        "isolate": None,
    }
    assert doc["settings"]["mode"] == "shared" and doc["settings"]["poll_s"] == 2.0


def test_validate_without_gpus_skips_pool_checks(tmp_path: Path) -> None:
    q = write_queue(tmp_path, '[[jobs]]\ncmd = "x"\ngpus = 64\n')
    # no fake GPUs, and the test machine's NVML (if any) is hidden by a missing library path
    out = gtui("validate", str(q), env={"PATH": "/usr/bin:/bin", "LD_LIBRARY_PATH": "/nonexistent"})
    if "checked against" in out.stdout:
        pytest.skip("this machine has real GPUs")
    assert out.returncode == 0, out.stderr
    assert "pool checks skipped" in out.stderr and len(out.stderr.strip().splitlines()) == 1


def test_validate_cli_fake_gpus_override_the_file(tmp_path: Path) -> None:
    q = write_queue(tmp_path, '[settings]\nfake_gpus = "4x80G"\n[[jobs]]\ncmd = "x"\ngpus = 4\n')
    assert gtui("validate", str(q)).returncode == 0
    out = gtui("validate", str(q), "--fake-gpus", "2x80G")
    assert out.returncode == 2 and "the pool has 2" in out.stderr


def test_validate_missing_file(tmp_path: Path) -> None:
    out = gtui("validate", str(tmp_path / "nope.toml"))
    assert out.returncode == 2 and "no such file" in out.stderr
    assert "Traceback" not in out.stderr


def _corpus() -> list[Path]:
    return sorted(BROKEN.glob("*.toml"))


def test_the_corpus_covers_every_error_of_the_brief() -> None:
    names = {p.stem for p in _corpus()}
    for needed in (
        "syntax_missing_equals",
        "unknown_job_key",
        "wrong_type_gpus",
        "bad_size",
        "bad_duration",
        "gpus_above_pool",
        "mem_above_every_gpu",
        "duplicate_name",
        "after_unknown",
        "after_cycle",
        "negative_gpus",
        "retries_below_minus_one",
        "unknown_mode",
    ):
        assert needed in names


@pytest.mark.parametrize("path", _corpus(), ids=lambda p: p.stem)
def test_broken_file(path: Path) -> None:
    """Each broken file: exit 2, `file:line: key:` and the expected words, no traceback."""
    lines = path.read_text().split("\n")  # TOML's lines: splitlines() also breaks at U+2028
    expect = lines[0].removeprefix("# expect: ")
    key = lines[1].removeprefix("# key: ")
    marked = [i + 1 for i, line in enumerate(lines) if "# <- error" in line]
    out = gtui("validate", str(path))
    message = out.stderr
    assert out.returncode == 2, (out.stdout, out.stderr)
    assert "Traceback" not in out.stdout + out.stderr
    assert expect in message
    if marked:
        assert f"{path}:{marked[0]}:" in message
    else:
        assert re.search(rf"{re.escape(str(path))}:\d+:", message)
    if key != "-":
        assert f": {key}: " in message
    assert len(message.strip().splitlines()) <= 2


# ---------------------------------------------------------------------------------------------
# robustness: whatever a user writes, the answer is a queue or a QueueFileError


_scalars = st.one_of(
    st.booleans(),
    st.integers(-5, 5),
    st.floats(-2, 100, allow_nan=False),
    st.sampled_from(["", "x", "2", "35G", "4h", "all", "pack", "{gpu}", "a/b", "-1"]),
)
_values = st.recursive(
    _scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.sampled_from(["a", "lr", "X"]), inner)
    ),
    max_leaves=6,
)
_job_keys = st.sampled_from(["name", "cmd", "gpus", "mem", "after", "retries", "matrix", "env"])
_setting_keys = st.sampled_from(["gpus", "mode", "reserve", "poll", "env", "diagnose", "exclude"])


@settings(max_examples=300, deadline=None)
@given(
    st.dictionaries(_setting_keys, _values, max_size=3),
    st.lists(st.dictionaries(_job_keys, _values, max_size=5), max_size=3),
)
def test_any_document_gives_a_queue_or_a_queue_file_error(
    settings_table: dict[str, object], jobs: list[dict[str, object]]
) -> None:
    import tomli_w

    doc: dict[str, object] = {"settings": settings_table, "jobs": jobs}
    text = tomli_w.dumps(doc)
    try:
        load_queue(Path("q.toml"), text=text, pool=[81920, None])
    except QueueFileError as e:
        assert str(e).startswith("q.toml")


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="[]{}\"'=#.\n \\abjos,1", max_size=60))
def test_any_text_gives_a_queue_or_a_queue_file_error(text: str) -> None:
    try:
        load_queue(Path("q.toml"), text=text)
    except QueueFileError as e:
        assert str(e).startswith("q.toml")


def test_a_command_longer_than_linux_passes_is_refused_at_validate(tmp_path: Path) -> None:
    """A 200 KB command passed validate and failed at launch ("Argument list too long"):
    Linux caps one argument at 128 KiB. Validate says it, naming the job's line."""
    q = write_queue(tmp_path, f'[[jobs]]\nname = "big"\ngpus = 0\ncmd = "echo {"x" * 200_000}"\n')
    r = gtui("validate", str(q))
    assert r.returncode == 2, r.stdout[:200]
    assert f"{q}:4: cmd: the command is 200,005 bytes" in r.stderr, r.stderr[:400]
    assert "put it in a script" in r.stderr and "Traceback" not in r.stderr
