"""The dashboard's log reader: the log panel (gtui.ui.widgets.log_view) reads a job's log by byte
offset, follows its tail and searches it with gtui.core.joblog's :class:`LogTail`, through its
``*_async`` methods (aiofiles: a stalled disk stalls a thread, never the screen).

The reading itself lives in the core, shared with ``gtui log``, the progress reader and the
diagnosis: what a line is, how a tail is cut and how bytes are decoded is said once there.
``clean_line`` is the shown-line rule under the name the panel has always used.
"""

from __future__ import annotations

from gtui.core.joblog import (
    BLOCK,
    LINE_SCAN,
    MAX_LINE,
    SEARCH_CHUNK,
    LogLine,
    LogTail,
    SearchQuery,
    shown_line,
)

clean_line = shown_line

__all__ = [
    "BLOCK",
    "LINE_SCAN",
    "MAX_LINE",
    "SEARCH_CHUNK",
    "LogLine",
    "LogTail",
    "SearchQuery",
    "clean_line",
]
