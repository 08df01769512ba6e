"""A mock training run that keeps the resume contract, for the preemption sample and tests.

It counts steps; on SIGUSR1 (gtui's warning before a preemption or a time limit) it writes
its step to a checkpoint file and exits 3 (the sample's ``requeue_exit``); started again with
``GTUI_RESUME=1`` it reads the checkpoint and goes on from there.

    python mock_trainer.py CHECKPOINT [STEPS] [SECONDS_PER_STEP]
"""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path
from types import FrameType

SAVE_AND_EXIT = 3


def main() -> int:
    ckpt = Path(sys.argv[1] if len(sys.argv) > 1 else "trainer.ckpt")
    steps = int(sys.argv[2]) if len(sys.argv) > 2 else 600
    step_s = float(sys.argv[3]) if len(sys.argv) > 3 else 0.1
    if os.environ.get("MOCK_TRAIN_SPEED") == "0":  # the tests run every sample command fast
        step_s = 0.0
    step = 0
    if os.environ.get("GTUI_RESUME") == "1" and ckpt.exists():
        step = int(ckpt.read_text())
        preempted = os.environ.get("GTUI_PREEMPTED", "0")
        print(f"resumed at step {step} (preempted {preempted} times)", flush=True)
    stop = False

    def on_signal(signum: int, frame: FrameType | None) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGUSR1, on_signal)
    while step < steps:
        if stop:
            ckpt.write_text(str(step))
            print(f"checkpoint at step {step}: saved, exiting", flush=True)
            return SAVE_AND_EXIT
        time.sleep(step_s)
        step += 1
        if step % 10 == 0:
            print(f"step {step}/{steps}", flush=True)
    print(f"done at step {step}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
