"""`gtui report`'s energy: kWh per attempt, per job and per queue (pure, from the attempts
history), and the command on a queue that really ran on simulated GPUs, text and --json, with
``co2_g_per_kwh`` and ``price_per_kwh`` turning it into grams of CO2 and money."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gtui.core.state.energyreport import energy_json, energy_lines, energy_report
from gtui.core.state.history import Attempt
from tests.conftest import gtui, write_queue


def _attempt(
    name: str, n: int, kwh: float | None, shared: bool = False, gpus: tuple[int, ...] = (0,)
) -> Attempt:
    return Attempt(
        name, n, "done", 0.0, 1.0, 0, None, None, None, None, gpus, None,
        energy_kwh=kwh, energy_shared=shared,
    )  # fmt: skip


def test_kwh_per_attempt_job_and_queue_with_co2_and_money() -> None:
    history = [
        _attempt("train", 1, 0.25),
        _attempt("train", 2, 0.5, shared=True),
        _attempt("eval", 1, None),  # its GPU said neither energy nor power
        _attempt("prep", 1, None, gpus=()),  # a CPU job: no GPU energy to speak of
    ]
    r = energy_report(history, co2_g_per_kwh=400.0, price_per_kwh=0.2)
    doc = energy_json(r)
    assert doc["kwh"] == 0.75 and doc["co2_g"] == 300.0 and doc["cost"] == 0.15
    assert (doc["attempts_measured"], doc["attempts_unmeasured"], doc["attempts_shared"]) == (
        2,
        1,
        1,
    )
    jobs = {j["name"]: j for j in doc["jobs"]}  # type: ignore[union-attr]
    assert set(jobs) == {"train", "eval"}
    assert jobs["train"]["kwh"] == 0.75 and jobs["train"]["shared"] is True
    assert jobs["train"]["attempts"] == [
        {"attempt": 1, "kwh": 0.25, "shared": False},
        {"attempt": 2, "kwh": 0.5, "shared": True},
    ]
    assert jobs["eval"]["kwh"] is None and jobs["eval"]["co2_g"] is None  # unmeasured, not 0
    text = "\n".join(energy_lines(r))
    assert "energy: 0.75 kWh over 2 measured GPU attempt(s) (1 not measured)" in text
    assert "300 g CO2 at 400 g/kWh" in text and "costs 0.15 at 0.2/kWh" in text
    assert "the GPU's energy over the job's time" in text
    assert "#1 0.2500, #2 0.5000*" in text


def test_without_rates_no_co2_or_money_is_made_up() -> None:
    doc = energy_json(energy_report([_attempt("a", 1, 0.1)]))
    assert doc["co2_g"] is None and doc["cost"] is None and doc["co2_g_per_kwh"] is None
    assert "CO2" not in "\n".join(energy_lines(energy_report([_attempt("a", 1, 0.1)])))


def test_the_report_of_a_queue_that_ran_on_simulated_gpus(tmp_path: Path) -> None:
    q = write_queue(
        tmp_path,
        """
        [settings]
        fake_gpus = "80G"
        poll = "0.1s"
        co2_g_per_kwh = 350
        price_per_kwh = 0.25

        [[jobs]]
        name = "train"
        cmd = "sleep 2"

        [[jobs]]
        name = "prep"
        gpus = 0
        cmd = "true"
        """,
    )
    ran = gtui("run", str(q), timeout=120)
    assert ran.returncode == 0, ran.stderr
    out = gtui("report", str(q), "--json")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    jobs = {j["name"]: j for j in doc["jobs"]}
    kwh = jobs["train"]["energy_kwh"]
    assert kwh is not None and kwh > 0 and jobs["prep"]["energy_kwh"] is None
    energy = doc["energy"]
    assert energy["kwh"] == pytest.approx(kwh)
    assert energy["co2_g"] == pytest.approx(kwh * 350, abs=1e-3)
    assert energy["cost"] == pytest.approx(kwh * 0.25, abs=1e-4)
    assert energy["jobs"][0]["attempts"][0]["shared"] is False
    text = gtui("report", str(q))
    assert text.returncode == 0, text.stderr
    assert "energy: " in text.stdout and "g CO2 at 350 g/kWh" in text.stdout
    assert "/kWh" in text.stdout and "train" in text.stdout.split("energy: ")[1]
