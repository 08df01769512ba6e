"""The reserve rule: how many free GPUs a job may take when ``reserve`` GPUs must stay free.

A pure function of numbers, below both of its users: the placement policy applies it to the
GPUs free now, and the queue file's pool check to the whole pool (can a job ever start?).
"""

from __future__ import annotations


def reserve_allows(n: int, k: int, rule: str = "strict") -> int:
    """How many of ``n`` eligible GPUs free of our jobs may be taken with ``reserve = k``.

    ``strict`` (what a colleague reads): at least k stay free, so n - k (none when n <= k).
    ``seed`` (the rule of the shell script gtui replaces, for imported queues): n < k none;
    n == k (n > 0) one; n > k, n - k.
    """
    if rule == "seed" and n == k:
        return 1 if n > 0 else 0
    return max(0, n - k)
