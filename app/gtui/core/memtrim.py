"""Handing memory the process has freed back to the system once a big, short-lived build is
over (a long queue's parse, the first save of its records).

CPython's own allocator returns an arena only when it is wholly empty; everything larger
than 512 bytes (a dict's table, a list of 100,000 items, the file's text, a JSON document)
comes from the C library's malloc, which keeps what was freed at the top and in the middle
of its heap for the next malloc. After a 100,000-job start that is ~30 MB of resident memory
no object uses. glibc's ``malloc_trim(0)`` gives those pages back (``madvise``); elsewhere
(musl, macOS) there is nothing to call and nothing is done.
"""

from __future__ import annotations

import ctypes
import functools
from collections.abc import Callable


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    """glibc's ``malloc_trim``, or None where the C library has none."""
    try:
        # The process's own symbols, the C library's among them: no search for its file
        # (find_library runs ldconfig).
        trim = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return trim


def give_back_freed() -> bool:
    """Return the C heap's free pages to the system; True if the C library could (glibc).

    It walks the heap and gives back each free page (~30 ms after a 100,000-job start, which
    freed ~30 MB): call it after a build that freed much, not in a loop."""
    trim = _malloc_trim()
    if trim is None:
        return False
    trim(0)
    return True
