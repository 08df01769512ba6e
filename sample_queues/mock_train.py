#!/usr/bin/env python3
"""A stand-in for a training / evaluation script, so the sample queues run on any machine.

It prints what real jobs print (tqdm-style progress with carriage returns, per-epoch metrics,
a CUDA out-of-memory traceback on stderr) and sleeps instead of computing. Only the standard
library is used. MOCK_TRAIN_SPEED=0 skips the sleeping (the tests run every sample command).

    python3 mock_train.py --epochs 3 --steps 40 --step-time 0.05
    python3 mock_train.py --oom-at 2            # CUDA OOM on stderr, exit 1
    python3 mock_train.py --fail-until 2        # fails on attempt 1 (GTUI_ATTEMPT), then works
    python3 mock_train.py --port 29500          # holds the port, like a DDP rendezvous
    python3 mock_train.py --stage prep          # CPU preprocessing output
"""

from __future__ import annotations

import argparse
import math
import os
import random
import socket
import sys
import time

SPEED = float(os.environ.get("MOCK_TRAIN_SPEED", "1"))

OOM = """Traceback (most recent call last):
  File "/home/user/exp/train.py", line 212, in <module>
    main()
  File "/home/user/exp/train.py", line 188, in main
    loss = model(**batch).loss
           ^^^^^^^^^^^^^^^
  File "/home/user/.venv/lib/python3.11/site-packages/torch/nn/modules/module.py", line 1736, \
in _wrapped_call_impl
    return self._call_impl(*args, **kwargs)
  File "/home/user/exp/model.py", line 97, in forward
    attn = torch.softmax(q @ k.transpose(-2, -1) * self.scale, dim=-1)
torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total \
capacity of 79.15 GiB of which 1.50 GiB is free. Including non-PyTorch memory, this process has \
77.60 GiB memory in use. Of the allocated memory 65.50 GiB is allocated by PyTorch, and 10.52 GiB \
is reserved by PyTorch but unallocated. If reserved but unallocated memory is large try setting \
PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See documentation for \
Memory Management  (https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)
"""

FLAKY = """Traceback (most recent call last):
  File "/home/user/exp/fetch.py", line 41, in <module>
    download(url, dest)
  File "/home/user/exp/fetch.py", line 23, in download
    chunk = resp.read(1 << 20)
ConnectionResetError: [Errno 104] Connection reset by peer
"""


def pause(seconds: float) -> None:
    if SPEED > 0:
        time.sleep(seconds * SPEED)


def clock(seconds: float) -> str:
    m, s = divmod(int(seconds), 60)
    return f"{m:02d}:{s:02d}"


def bar(desc: str, steps: int, step_time: float) -> None:
    """One tqdm-like progress bar, redrawn in place with carriage returns."""
    start = time.monotonic()
    for i in range(steps + 1):
        frac = i / steps
        filled = int(frac * 10)
        done = time.monotonic() - start
        rate = i / done if done > 0 else 0.0
        left = (steps - i) / rate if rate > 0 else 0.0
        line = (
            f"\r{desc}: {frac * 100:3.0f}%|{'█' * filled}{' ' * (10 - filled)}| {i}/{steps} "
            f"[{clock(done)}<{clock(left)}, {rate:5.2f}it/s]"
        )
        sys.stdout.write(line)
        sys.stdout.flush()
        if i < steps:
            pause(step_time)
    sys.stdout.write("\n")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--stage", choices=["train", "eval", "prep"], default="train")
    p.add_argument("--name", default=os.environ.get("GTUI_JOB", "job"))
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--step-time", type=float, default=0.05)
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--oom-at", type=int, default=0, help="CUDA OOM in this epoch (1-based)")
    p.add_argument("--fail-until", type=int, default=0, help="fail while attempt < this")
    p.add_argument("--port", type=int, default=0, help="hold this TCP port while running")
    p.add_argument("--world-size", type=int, default=1)
    p.add_argument("--seed", type=int, default=0)
    args, extra = p.parse_known_args()

    visible = os.environ.get("CUDA_VISIBLE_DEVICES", "(not set)")
    attempt = int(os.environ.get("GTUI_ATTEMPT", "1") or 1)
    print(f"[{args.name}] stage={args.stage} attempt={attempt} CUDA_VISIBLE_DEVICES={visible}")
    if extra:
        print(f"[{args.name}] extra arguments: {' '.join(extra)}")
    sys.stdout.flush()

    if args.fail_until and attempt < args.fail_until:
        pause(1.0)
        sys.stderr.write(FLAKY)
        return 1

    listener = None
    if args.port:
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            listener.bind(("127.0.0.1", args.port))
        except OSError as e:
            sys.stderr.write(
                f"torch.distributed.DistNetworkError: The server socket has failed to listen on "
                f"any local network address. port: {args.port}, useIpv6: 0, code: -98, name: "
                f"EADDRINUSE, message: address already in use ({e})\n"
            )
            return 1
        listener.listen(1)
        for rank in range(args.world_size):
            print(f"rank {rank}/{args.world_size}: MASTER_ADDR=127.0.0.1 MASTER_PORT={args.port}")

    if args.stage == "prep":
        for shard in range(1, args.epochs + 1):
            bar(f"tokenize shard {shard}/{args.epochs}", args.steps, args.step_time)
        print(f"[{args.name}] wrote {args.epochs * args.steps * 1000} examples")
        return 0

    rng = random.Random(args.seed or len(args.name))
    loss = 2.3
    for epoch in range(1, args.epochs + 1):
        desc = "eval" if args.stage == "eval" else f"Epoch {epoch}/{args.epochs}"
        if args.oom_at == epoch:
            bar(desc, max(1, args.steps // 3), args.step_time)
            sys.stdout.flush()
            sys.stderr.write(OOM)
            return 1
        bar(desc, args.steps, args.step_time)
        loss *= 0.6 + 0.2 * rng.random()
        acc = 1 - math.exp(-epoch * (0.5 + rng.random() * 0.3))
        print(f"epoch {epoch} | lr {args.lr:g} | loss {loss:.3f} | acc {acc:.3f}")
        sys.stdout.flush()
    if listener is not None:
        listener.close()
    print(f"[{args.name}] done")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
