"""The queue file's encoding: UTF-8, a byte-order mark allowed; anything else named plainly.

The queue file and ``gtui import`` share these, so both say the same about a file saved in
another encoding.
"""

from __future__ import annotations

from pathlib import Path

from gtui.core.errors import QueueFileError


class EncodingProblem(ValueError):
    """Text in an encoding other than UTF-8; ``str()`` names it in one line."""


# UTF-32 first: its little-endian mark begins like UTF-16's.
_WIDE_BOMS = (
    (b"\xff\xfe\x00\x00", "UTF-32"),
    (b"\x00\x00\xfe\xff", "UTF-32"),
    (b"\xff\xfe", "UTF-16"),
    (b"\xfe\xff", "UTF-16"),
)


def wide_encoding(data: bytes) -> str | None:
    """ "UTF-16" or "UTF-32" where ``data`` starts with that encoding's byte-order mark."""
    return next((name for bom, name in _WIDE_BOMS if data.startswith(bom)), None)


def decode_utf8(data: bytes) -> str:
    """``data`` as text: UTF-8, a byte-order mark allowed and dropped (editors on Windows write
    one); else an EncodingProblem saying in one line which encoding it is instead. The queue
    file and ``gtui import`` share it, so both say the same."""
    wide = wide_encoding(data)
    if wide is not None:
        raise EncodingProblem(f"a {wide} text file; save it as UTF-8")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise EncodingProblem(
            f"not a UTF-8 text file (byte {e.start} is not UTF-8; Latin-1 or another legacy "
            "encoding?); save it as UTF-8"
        ) from None


def decode_queue(path: Path, data: bytes) -> str:
    """``data`` as text (:func:`decode_utf8`), or a QueueFileError saying why not."""
    try:
        return decode_utf8(data)
    except EncodingProblem as e:
        raise QueueFileError(str(path), f"{e} (TOML files are UTF-8)") from None
