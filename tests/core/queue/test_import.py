"""`gtui import`: quick_start_serial.sh scripts and command lists become queue files that load and
mean the same thing (tests/import_cases/ holds the examples of the script's own guide)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gtui.core.model import Mode
from gtui.core.queue.importer import import_text, split_entry, to_gtui_cmd
from gtui.core.queue.placeholders import substitute
from gtui.core.queue.queuefile import QueueFile, load_queue
from tests.conftest import TESTS, gtui

CASES = TESTS / "import_cases"


def imported(tmp_path: Path, case: str) -> QueueFile:
    """Run the real `gtui import` on a case and load what it printed."""
    out = gtui("import", str(CASES / case))
    assert out.returncode == 0, out.stderr
    q = tmp_path / "q.toml"
    q.write_text(out.stdout)
    return load_queue(q)


@pytest.mark.parametrize(
    "case", sorted(p.name for p in CASES.iterdir() if not p.name.startswith("broken_"))
)
def test_every_case_imports_to_a_valid_queue(tmp_path: Path, case: str) -> None:
    qf = imported(tmp_path, case)
    assert qf.path.exists()
    assert gtui("validate", str(qf.path), "--fake-gpus", "10x80G").returncode == 0


def test_3_1_core_config(tmp_path: Path) -> None:
    s = imported(tmp_path, "s3_1_core_config.sh").settings
    assert s.gpus == tuple(range(10))
    assert s.log_dir == "/home/hdl/project/fgvr_test/logs/quick_start"
    assert (s.reserve, s.retries, s.mode, s.multi_gpu_first) == (1, -1, Mode.SHARED, True)


def test_6_1_basic_use(tmp_path: Path) -> None:
    qf = imported(tmp_path, "s6_1_basic.sh")
    assert (qf.settings.gpus, qf.settings.reserve, qf.settings.retries) == ((0, 1, 2, 3), 1, 3)
    assert qf.settings.reserve_rule == "seed"  # as the script did
    # The commands pass --gpu N themselves: those jobs, and only they, run unisolated.
    assert qf.settings.isolate is True
    assert [j.isolate for j in qf.jobs] == [False, False]
    a, b = qf.jobs
    assert a.cmd == "bash scripts/run_pipeline.sh aircraft --gpu {gpu}"
    assert (a.gpus, a.mem_mib, b.mem_mib) == (1, 35 * 1024, 20 * 1024)
    assert a.name == "run_pipeline-aircraft"
    assert b.cmd == "python train.py --gpu {gpu} --epochs 100"


def test_7_2_quoted_lines_with_escaped_placeholders(tmp_path: Path) -> None:
    jobs = imported(tmp_path, "s7_2_bash_commands.txt").jobs
    assert [(j.gpus, j.mem_mib) for j in jobs] == [(1, 35840), (1, 20480), (2, 40960)]
    assert jobs[2].cmd == "bash scripts/run_ddp.sh model1 --gpus {gpu0},{gpu1}"


def test_7_3_python_commands(tmp_path: Path) -> None:
    jobs = imported(tmp_path, "s7_3_python_commands.sh").jobs
    assert jobs[0].cmd == "CUDA_VISIBLE_DEVICES={gpu} python train.py --epochs 100"
    assert jobs[3].cmd == "python train_multi.py --gpus {gpu0} {gpu1} {gpu2}"
    assert jobs[3].gpus == 3 and jobs[3].mem_mib == 50 * 1024


def test_7_4_cpu_jobs(tmp_path: Path) -> None:
    qf = imported(tmp_path, "s7_4_cpu_commands.sh")
    assert [(j.gpus, j.mem_mib) for j in qf.jobs] == [(0, None)] * 3
    assert qf.jobs[2].cmd == "echo TEST"
    assert qf.settings.isolate is True  # no GPU numbers passed: isolation stays on
    assert [j.isolate for j in qf.jobs] == [None] * 3


@pytest.mark.parametrize(
    ("case", "mode", "reserve", "retries", "gpus"),
    [
        ("s10_1_shared_server.sh", Mode.SHARED, 2, 3, tuple(range(8))),
        ("s10_1_exclusive_server.sh", Mode.SHARED, 0, -1, (0, 1, 2, 3)),
        ("s10_1_test_env.sh", Mode.SHARED, 0, 0, (0, 1)),
        ("s13_4_scenarios.sh", Mode.EXCLUSIVE, 1, -1, (0, 1, 2, 3)),
        ("s14_5_extreme.sh", Mode.PACK, 0, -1, "all"),
        ("s14_5_conservative.sh", Mode.EXCLUSIVE, 1, 3, (0, 1, 2, 3)),
        ("s14_5_polite.sh", Mode.SHARED, 2, 3, "all"),
        ("s14_5_debug.sh", Mode.SHARED, 0, 1, (0, 1)),
    ],
)
def test_configuration_scenarios(
    tmp_path: Path, case: str, mode: Mode, reserve: int, retries: int, gpus: object
) -> None:
    s = imported(tmp_path, case).settings
    assert (s.mode, s.reserve, s.retries, s.gpus) == (mode, reserve, retries, gpus)


def test_14_5_conservative_keeps_isolation_for_cuda_visible_devices(tmp_path: Path) -> None:
    qf = imported(tmp_path, "s14_5_conservative.sh")
    assert qf.settings.isolate is True
    assert qf.jobs[0].isolate is None
    assert qf.jobs[0].cmd.startswith("CUDA_VISIBLE_DEVICES={gpu0},{gpu1} torchrun")
    assert (qf.jobs[0].gpus, qf.jobs[0].mem_mib) == (2, 70 * 1024)


def test_a_whole_script(tmp_path: Path) -> None:
    qf = imported(tmp_path, "full_script.sh")
    s = qf.settings
    # first assignment wins (the ones inside the function below are ignored)
    assert (s.gpus, s.reserve, s.retries, s.mode, s.poll_s) == ("all", 2, 3, Mode.PACK, 3.0)
    assert s.log_dir == "~/exp/logs/quick_start"
    names = [j.name for j in qf.jobs]
    assert len(names) == 9 and len(set(names)) == 9  # COMMANDS+=( appends; names deduplicated
    assert names[-2:] == ["run_pipeline-aircraft", "run_pipeline-aircraft-2"]
    by_cmd = {j.cmd: j for j in qf.jobs}
    assert "python train.py --gpu {gpu} 2>&1 | tee train.log" in by_cmd  # pipes in a command
    assert by_cmd["python train.py --gpu {gpu} 2>&1 | tee train.log"].mem_mib == 20 * 1024
    assert 'python eval.py --split "val set" --gpu {gpu}' in by_cmd  # single-quoted entry
    assert not any("old_experiment" in j.cmd for j in qf.jobs)  # a commented-out entry


def test_imported_commands_run_exactly_as_the_script_ran_them(tmp_path: Path) -> None:
    """The bash script's array, expanded by bash itself, against gtui's substitution."""
    script = CASES / "full_script.sh"
    expanded = subprocess.run(
        [
            "bash",
            "-c",
            f'source <(sed -n "/^COMMANDS=(/,/^)/p; /^COMMANDS+=(/,/^)/p" {script}); '
            "available_gpu=7; available_gpu_0=7; available_gpu_1=2; name=X; "
            'for c in "${COMMANDS[@]}"; do printf "%s\\0" "$c"; done',
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split("\0")[:-1]
    qf = imported(tmp_path, "full_script.sh")
    assert len(expanded) == len(qf.jobs)
    for bash_entry, job in zip(expanded, qf.jobs, strict=True):
        cmd, _, _, _ = split_entry(bash_entry)
        # bash left ${available_gpu...} for the script to fill in at launch, as gtui does
        ours = substitute(
            job.cmd, gpus=[7, 2][: job.gpus], name=job.name, attempt=1, port=None, matrix={}
        )
        theirs = cmd.replace("${available_gpu_0}", "7").replace("${available_gpu_1}", "2")
        theirs = theirs.replace("${available_gpu}", "7" if job.gpus == 1 else "7,2")
        assert ours == theirs


@given(st.text(alphabet="ab {}$\\_gpunme01", max_size=30))
def test_escaping_round_trips(text: str) -> None:
    """Any command without the bash script's placeholders comes back unchanged after gtui substitutes."""
    if "available_gpu" in text:
        return
    back = substitute(to_gtui_cmd(text), gpus=[1], name="n", attempt=1, port=1, matrix={})
    assert back == text


def test_split_entry() -> None:
    assert split_entry("python a.py | 35 | 1") == ("python a.py", "35G", 1, None)
    assert split_entry("a | tee x | 7.5 | 2") == ("a | tee x", "7.5G", 2, None)
    assert split_entry("python a.py | 20") == ("python a.py", "20G", 1, None)
    assert split_entry("python a.py | 20GB | 1")[1] == "20GB"
    cmd, mem, n, note = split_entry("cat a | sort")
    assert (cmd, mem, n) == ("cat a | sort", None, 1) and note


def test_plain_list(tmp_path: Path) -> None:
    qf = imported(tmp_path, "plain_commands.txt")
    assert [j.cmd for j in qf.jobs] == [
        "python train.py --lr 0.1 --gpu {gpu}",
        "python train.py --lr 0.01 --gpu {gpu}",
        "python eval.py --ckpt runs/best.pt     --split test",
        "cat log.txt | awk '{print $1}' | sort",
        "echo done",
    ]
    assert [j.mem_mib for j in qf.jobs] == [None, 12 * 1024, 8 * 1024, None, None]
    assert qf.jobs[-1].gpus == 0


def test_import_keeps_the_scripts_comments() -> None:
    text, _ = import_text('COMMANDS=(\n  # the big one\n  "python a.py | 10 | 1"\n)\n', "x.sh")
    assert "# the big one\n[[jobs]]" in text


@pytest.mark.parametrize(
    ("case", "words"),
    [
        ("broken_unterminated.sh", 'broken_unterminated.sh:3: COMMANDS: a " quote opened'),
        ("broken_unclosed_array.sh", "broken_unclosed_array.sh:1: COMMANDS=( is never closed"),
        ("broken_binary.bin", "not a text file"),
        ("broken_empty.txt", "found no commands"),
        ("no_such_file.sh", "no such file"),
    ],
)
def test_unreadable_input_exits_2(case: str, words: str) -> None:
    out = gtui("import", str(CASES / case))
    assert out.returncode == 2
    assert words in out.stderr and "Traceback" not in out.stderr
    assert out.stdout == ""


def test_import_a_directory(tmp_path: Path) -> None:
    out = gtui("import", str(tmp_path))
    assert out.returncode == 2 and "is a directory" in out.stderr


def test_import_isolates_every_job_that_passes_no_gpu_numbers(tmp_path: Path) -> None:
    """One command passing `--gpu N` must not switch isolation off for the whole queue. The
    `device_map="auto"` job beside it stays isolated; only the first runs without it, and
    `gtui validate` says so in its text."""
    src = tmp_path / "cmds.txt"
    src.write_text(
        "python train.py --gpu ${available_gpu} | 20 | 1\n"
        "python infer.py --device-map auto | 30 | 2\n"
    )
    out = gtui("import", str(src))
    assert out.returncode == 0, out.stderr
    q = tmp_path / "q.toml"
    q.write_text(out.stdout)
    qf = load_queue(q)
    assert qf.settings.isolate is True
    assert [j.isolate for j in qf.jobs] == [False, None]
    shown = gtui("validate", str(q), "--fake-gpus", "4x80G")
    assert shown.returncode == 0, shown.stderr
    flagged = [line for line in shown.stdout.splitlines() if "UNISOLATED" in line]
    assert len(flagged) == 1 and qf.jobs[0].name in flagged[0], shown.stdout


@pytest.mark.parametrize(
    "body",
    ["python a.py\npython b.py\n", 'COMMANDS=(\n  "python a.py | 10 | 1"\n  "python b.py | 10 | 1"\n)\n'],
)
def test_a_utf8_byte_order_mark_is_dropped(tmp_path: Path, body: str) -> None:
    """Notepad on Windows starts a UTF-8 file with a BOM: it is not part of the first command."""
    src = tmp_path / "cmds.txt"
    src.write_bytes(b"\xef\xbb\xbf" + body.encode())
    out = gtui("import", str(src))
    assert out.returncode == 0, out.stderr
    q = tmp_path / "q.toml"
    q.write_text(out.stdout)
    cmds = [j.cmd for j in load_queue(q).jobs]
    assert len(cmds) == 2 and cmds[0].startswith("python a.py"), cmds
    assert "\ufeff" not in out.stdout


@pytest.mark.parametrize(
    ("encoding", "said"),
    [
        ("utf-16", "a UTF-16 text file; save it as UTF-8"),
        ("utf-32", "a UTF-32 text file; save it as UTF-8"),
        ("latin-1", "not a UTF-8 text file (byte 10 is not UTF-8"),
    ],
)
def test_another_encoding_is_named_in_the_line_a_queue_file_gets(
    tmp_path: Path, encoding: str, said: str
) -> None:
    """`gtui import` says what `gtui validate` says of a queue file in that encoding."""
    src = tmp_path / "cmds.txt"
    src.write_bytes("python café.py\n".encode(encoding))
    out = gtui("import", str(src))
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr.count("\n") == 1 and said in out.stderr, out.stderr
    assert "NUL" not in out.stderr and "Traceback" not in out.stderr
    q = tmp_path / "q.toml"
    q.write_bytes('[[jobs]]\ncmd = "python café.py"\n'.encode(encoding))
    check = gtui("validate", str(q))
    assert check.returncode != 0 and said.split(" (byte")[0] in check.stderr + check.stdout
