"""Writes the sample logs in this folder with the real tqdm, as the tools print them.

Run with tqdm installed: ``python tests/progress_logs/make.py``. The arguments are those the
tools pass to tqdm (sources: lightning/pytorch/callbacks/progress/tqdm_progress.py, whose
training bar's description is ``Epoch {current_epoch}/{max_epochs - 1}`` since Lightning 2.1,
and transformers/trainer_callback.py's ProgressCallback: one bar over ``max_steps``, the
evaluation bar with ``leave=False``, the logs printed as a dict of floats).
"""

from __future__ import annotations

import io
from pathlib import Path

from tqdm import tqdm

HERE = Path(__file__).resolve().parent


def plain() -> str:
    """A script's own loop: ``for batch in tqdm(loader)``, cut off at 450 of 1000."""
    out = io.StringIO()
    bar = tqdm(total=1000, file=out, mininterval=0, ncols=80)
    for _ in range(450):
        bar.update(1)
    return out.getvalue()


def lightning() -> str:
    """Lightning 2.x, max_epochs=10, in epoch index 3 at 176/391, one validation bar before."""
    out = io.StringIO()
    bar = tqdm(total=391, file=out, mininterval=0, ncols=100, position=0)
    for epoch in range(4):
        bar.reset(391)  # Lightning resets one bar each epoch, then names it
        bar.set_description(f"Epoch {epoch}/9")
        for _ in range(391 if epoch < 3 else 176):
            bar.update(1)
            bar.set_postfix(v_num=0, train_loss=0.412, refresh=False)
        if epoch < 3:
            val = tqdm(
                total=79,
                file=out,
                mininterval=0,
                ncols=100,
                leave=False,
                position=1,
                desc="Validation DataLoader 0",
            )
            for _ in range(79):
                val.update(1)
            val.close()
    return out.getvalue()


def huggingface() -> str:
    """The Trainer: one bar over max_steps=1000, a log dict, an evaluation bar mid-run."""
    out = io.StringIO()
    bar = tqdm(total=1000, file=out, mininterval=0, dynamic_ncols=True)
    for step in range(1, 451):
        bar.update(1)
        if step == 400:
            out.write(
                "{'loss': 0.4123, 'grad_norm': 1.234, 'learning_rate': 3e-05, 'epoch': 1.2}\n"
            )
            ev = tqdm(total=63, file=out, mininterval=0, leave=False, dynamic_ncols=True)
            for _ in range(63):
                ev.update(1)
            ev.close()
    return out.getvalue()


def epochs() -> str:
    """A script printing ``epoch 3/10`` then a per-epoch tqdm bar, at 100/200."""
    out = io.StringIO()
    for epoch in range(1, 4):
        out.write(f"epoch {epoch}/10\n")
        bar = tqdm(total=200, file=out, mininterval=0, ncols=80)
        for _ in range(200 if epoch < 3 else 100):
            bar.update(1)
        if epoch < 3:
            bar.close()
    return out.getvalue()


def keras3(epochs: int = 10, at_epoch: int = 3, steps: int = 500, at: int = 120) -> str:
    """Keras 3's Progbar on a terminal (keras/src/utils/progbar.py): the count in bold, done
    cells green and the rest white, all ``━``; each redraw backspaces over the last, then
    ``\\r``. Written here by hand (no Keras install), as that source writes it."""
    out = io.StringIO()
    width, n = 20, len(str(steps))
    for e in range(1, at_epoch + 1):
        out.write(f"Epoch {e}/{epochs}\n")
        prev = 0
        for cur in range(20, (steps if e < at_epoch else at) + 1, 20):
            pw = int(width * cur / steps)
            bar = f"\x1b[1m{cur:{n}d}/{steps}\x1b[0m "
            bar += ("\x1b[32m" + "━" * pw + "\x1b[0m") if pw else ""
            bar += "\x1b[37m" + "━" * (width - pw) + "\x1b[0m"
            line = bar + f" \x1b[1m{(steps - cur) * 0.024:.0f}s\x1b[0m 24ms/step - loss: 0.4123"
            out.write("\b" * prev + "\r" + line)
            prev = len(line)
        if e < at_epoch:
            out.write("\n")
    return out.getvalue()


def keras2(epochs: int = 10, at_epoch: int = 3, steps: int = 500, at: int = 120) -> str:
    """Keras 2's Progbar into a file (tf_keras/src/utils/generic_utils.py, not a terminal: a
    newline before each update, no backspaces): ``120/500 [======>.....] - ETA: 9s``."""
    out = io.StringIO()
    width, n = 30, len(str(steps))
    for e in range(1, at_epoch + 1):
        out.write(f"Epoch {e}/{epochs}\n")
        for cur in range(20, (steps if e < at_epoch else at) + 1, 20):
            pw = int(width * cur / steps)
            done = ("=" * (pw - 1) + (">" if cur < steps else "=")) if pw else ""
            bar = f"{cur:{n}d}/{steps} [" + done + "." * (width - pw) + "]"
            out.write("\n" + bar + f" - ETA: {(steps - cur) * 0.024:.0f}s - loss: 0.4123")
        out.write("\n")
    return out.getvalue()


if __name__ == "__main__":
    for name, make in (
        ("plain", plain),
        ("lightning", lightning),
        ("huggingface", huggingface),
        ("epochs", epochs),
        ("keras3", keras3),
        ("keras2", keras2),
    ):
        (HERE / f"{name}.log").write_text(make())
