"""Placeholders in commands: only gtui's names are replaced; shell braces are left alone."""

from __future__ import annotations

import subprocess

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gtui.core.queue.placeholders import (
    gpu_indices_used,
    is_reserved,
    placeholders_used,
    substitute,
    substitute_matrix,
)


def sub(cmd: str, gpus: tuple[int, ...] = (3, 5), **kw: object) -> str:
    args: dict[str, object] = {
        "gpus": gpus,
        "name": "train",
        "attempt": 2,
        "port": 29501,
        "matrix": {},
    }
    args.update(kw)
    return substitute(cmd, **args)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("cmd", "expected"),
    [
        ("python t.py --gpu {gpu}", "python t.py --gpu 3,5"),
        ("--a {gpu0} --b {gpu1}", "--a 3 --b 5"),
        ("--world {n_gpus} --port {port}", "--world 2 --port 29501"),
        ("--run {name}-{attempt}", "--run train-2"),
        ("--gpu ${available_gpu}", "--gpu 3,5"),
        ("--gpus ${available_gpu_0},${available_gpu_1}", "--gpus 3,5"),
        ("--gpus \\${available_gpu_0},\\${available_gpu_1}", "--gpus 3,5"),
        (
            "CUDA_VISIBLE_DEVICES=\\${available_gpu} python t.py",
            "CUDA_VISIBLE_DEVICES=3,5 python t.py",
        ),
        ("awk '{print $1}' f.txt", "awk '{print $1}' f.txt"),
        ("echo ${HOME} $HOME ${port}", "echo ${HOME} $HOME ${port}"),
        ("find . -name '*.pt' -exec ls {} +", "find . -name '*.pt' -exec ls {} +"),
        ("echo {{gpu}} {{ and }}", "echo {gpu} { and }"),
        ("echo {{{gpu}}}", "echo {3,5}"),
        ("echo {unknown} {gpu7}", "echo {unknown} {gpu7}"),
        ("python -c \"print(f'{x}')\"", "python -c \"print(f'{x}')\""),
    ],
)
def test_substitute(cmd: str, expected: str) -> None:
    assert sub(cmd) == expected


def test_cpu_job_and_missing_port() -> None:
    assert sub("echo [{gpu}] {n_gpus} {port}", gpus=(), port=None) == "echo [] 0 {port}"


def test_matrix_values_are_substituted_at_start_too() -> None:
    assert sub("--lr {lr} --gpu {gpu}", matrix={"lr": "0.1"}) == "--lr 0.1 --gpu 3,5"


def test_substitute_matrix_keeps_everything_else() -> None:
    text = "--lr {lr} --gpu {gpu} {{lr}} awk '{print}' ${lr}"
    out = substitute_matrix(text, {"lr": "0.1"})
    assert out == "--lr 0.1 --gpu {gpu} {{lr}} awk '{print}' ${lr}"
    # a brace in a value survives the later substitution unchanged
    later = substitute_matrix("x={v}", {"v": "{gpu}"})
    assert sub(later) == "x={gpu}"


def test_placeholders_used() -> None:
    cmd = "MASTER_PORT={port} torchrun --gpus ${available_gpu_1} {lr} {{name}} ${HOME} '{print $1}'"
    assert placeholders_used(cmd) == {"port", "gpu1", "lr"}
    assert "port" not in placeholders_used("echo ${port} {{port}}")
    assert gpu_indices_used("{gpu0} {gpu2} \\${available_gpu_5}") == {0, 2, 5}


def test_the_empty_answer_is_shared_and_refuses_changes() -> None:
    """A command without a brace gets one shared empty set: what is made from it is
    a set of its own, and a change in place cannot reach the next command's answer."""
    a, b = placeholders_used("sleep 1"), placeholders_used("echo done")
    assert a is b and a == set() and not a and "port" not in a
    mine = a | {"lr"}
    mine.add("gpu")
    assert mine == {"lr", "gpu"} and type(a - {"x"}) is set and type(a.union({"y"})) is set
    for change in (lambda: a.add("x"), lambda: a.update({"x"}), lambda: a.discard("x")):
        with pytest.raises(TypeError):
            change()
    with pytest.raises(TypeError):
        b |= {"x"}
    assert placeholders_used("sleep 2") == set()


def test_reserved_names() -> None:
    for name in ("gpu", "gpu0", "gpu12", "n_gpus", "port", "name", "attempt"):
        assert is_reserved(name)
    for name in ("lr", "gpus", "gpu_a", "seed"):
        assert not is_reserved(name)


def test_the_substituted_awk_command_runs_in_bash() -> None:
    cmd = sub("printf 'a b\\nc d\\n' | awk '{print $2}' | tr -d '\\n'; echo -n {gpu0}")
    out = subprocess.run(["bash", "-c", cmd], capture_output=True, text=True, check=True)
    assert out.stdout == "bd3"


@given(st.text(alphabet="ab ${}\\_0gpunm", max_size=40))
def test_text_without_our_names_is_unchanged(text: str) -> None:
    """Whatever the braces, text with no placeholder and no doubled brace comes out as is."""
    if "{{" in text or "}}" in text or placeholders_used(text):
        return
    assert sub(text) == text
