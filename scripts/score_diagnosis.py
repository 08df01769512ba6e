#!/usr/bin/env python3
"""Score gtui's failure diagnosis on the corpus of real logs in tests/diagnosis_corpus/.

    python scripts/score_diagnosis.py                 # dev logs (the default)
    python scripts/score_diagnosis.py --split heldout # the held-out quarter
    python scripts/score_diagnosis.py --split all -v  # everything, listing each miss

A log is right when diagnose() gives its expected kind with a non-empty hint. Per kind the
table gives recall (its logs it gets right) and precision: how many logs of other kinds it
wrongly claims. tests/core/diagnosis/test_diagnosis_corpus.py asserts the scores with the same
functions.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from gtui.core.diagnosis.diagnose import diagnose
from gtui.core.model import Diagnosis

CORPUS = Path(__file__).resolve().parent.parent / "tests" / "diagnosis_corpus"
SPLITS = ("dev", "heldout", "all")


@dataclass(frozen=True)
class Sample:
    path: Path
    kind: str
    exit_code: int | None
    signal: int | None
    split: str
    source: str
    number: int  # the NN_ of its name: collection order within its kind

    @property
    def name(self) -> str:
        return f"{self.kind}/{self.path.stem}"

    def text(self) -> str:
        return self.path.read_bytes().decode("utf-8", errors="replace")


@dataclass(frozen=True)
class Result:
    sample: Sample
    got: Diagnosis | None

    @property
    def got_kind(self) -> str:
        return self.got.kind if self.got is not None else "(none)"

    @property
    def right(self) -> bool:
        return self.got is not None and self.got.kind == self.sample.kind and bool(self.got.hint)


def load_corpus(root: Path = CORPUS) -> list[Sample]:
    samples = []
    for meta_path in sorted(root.glob("*/*.json")):
        meta = json.loads(meta_path.read_text())
        log = meta_path.with_suffix(".log")
        samples.append(
            Sample(
                path=log,
                kind=meta["kind"],
                exit_code=meta["exit_code"],
                signal=meta["signal"],
                split=meta["split"],
                source=meta["source"],
                number=int(meta_path.stem.split("_", 1)[0]),
            )
        )
    return samples


def select(samples: Iterable[Sample], split: str) -> list[Sample]:
    return [s for s in samples if split == "all" or s.split == split]


def run(samples: Iterable[Sample]) -> list[Result]:
    return [Result(s, diagnose(s.exit_code, s.signal, s.text())) for s in samples]


@dataclass(frozen=True)
class KindScore:
    kind: str
    logs: int  # logs of this kind
    right: int  # of them, given this kind with a hint
    claimed: int  # logs this kind was given to (right or wrong)
    wrong_claims: int  # logs of other kinds given this kind

    @property
    def recall(self) -> float:
        return self.right / self.logs if self.logs else 1.0

    @property
    def precision(self) -> float:
        return (self.claimed - self.wrong_claims) / self.claimed if self.claimed else 1.0


def by_kind(results: Sequence[Result]) -> list[KindScore]:
    logs = Counter(r.sample.kind for r in results)
    right = Counter(r.sample.kind for r in results if r.right)
    claimed = Counter(r.got_kind for r in results)
    wrong = Counter(r.got_kind for r in results if r.got_kind != r.sample.kind)
    kinds = sorted(set(logs) | set(claimed))
    return [KindScore(k, logs[k], right[k], claimed[k], wrong[k]) for k in kinds]


def accuracy(results: Sequence[Result]) -> float:
    return sum(r.right for r in results) / len(results) if results else 1.0


def table(results: Sequence[Result]) -> str:
    rows = [
        "| kind | logs | right | recall | claimed | wrong claims | precision |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for k in by_kind(results):
        rows.append(
            f"| {k.kind} | {k.logs} | {k.right} | {k.recall:.0%} | {k.claimed} | "
            f"{k.wrong_claims} | {k.precision:.0%} |"
        )
    right = sum(r.right for r in results)
    rows.append(f"| **all** | {len(results)} | {right} | {accuracy(results):.1%} | | | |")
    return "\n".join(rows)


def misses(results: Sequence[Result]) -> list[str]:
    out = []
    for r in results:
        if not r.right:
            line = r.got.line[:100] if r.got is not None else ""
            out.append(f"{r.sample.name}: got {r.got_kind} ({line!r})")
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--split", choices=SPLITS, default="dev")
    parser.add_argument("-v", "--verbose", action="store_true", help="list each miss")
    args = parser.parse_args(argv)
    results = run(select(load_corpus(), args.split))
    print(f"split: {args.split}, {len(results)} logs\n")
    print(table(results))
    if args.verbose:
        print()
        print("\n".join(misses(results)) or "no misses")
    return 0


if __name__ == "__main__":
    sys.exit(main())
