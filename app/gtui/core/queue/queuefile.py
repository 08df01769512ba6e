"""The queue file (``[settings]``, ``[[jobs]]``, ``[[diagnose]]``, ``[notify]``, ``[cluster]``):
the names other modules import, gathered from the modules that each do one part.

- :mod:`~gtui.core.queue.schema`: the keys of each table, and :class:`QueueFile`;
- :mod:`~gtui.core.queue.where`: file, line and key in messages;
- :mod:`~gtui.core.queue.values`: typed values (integers, sizes, durations, environments);
- :mod:`~gtui.core.queue.settings`: ``[settings]``, ``[notify]``, ``[cluster]``, the pool;
- :mod:`~gtui.core.queue.names`: a job's name, derived or written;
- :mod:`~gtui.core.queue.entries`: one ``[[jobs]]`` entry and its ``matrix`` expanded;
- :mod:`~gtui.core.queue.checks`: ``after``, cycles, the pool check, warnings, a new entry;
- :mod:`~gtui.core.queue.ondisk` and :mod:`~gtui.core.queue.encodings`: the file's bytes
  and text;
- :mod:`~gtui.core.queue.parse`: the one reader of the text (document and positions);
- :mod:`~gtui.core.queue.document` and :mod:`~gtui.core.queue.reader`: a whole load, and the
  :class:`QueueReader` whose owner keeps the last parse for a second load of the same text;
- :mod:`~gtui.core.queue.tojson`: ``gtui validate --json``.

Choices the file format leaves open (also in docs/queue-file.md): ``after`` may be a single
string, or name a matrix entry by its ``name`` as written (``"sweep-lr{lr}"``: all its jobs);
``settings.gpus`` may also be a string of indices (``"0 1 2"``, as the shell script's
TARGET_GPUS was).
"""

from __future__ import annotations

from gtui.core.queue.checks import (
    check_new_entry,
    isolated,
    job_from_fields,
    passes_gpu_numbers,
)
from gtui.core.queue.encodings import EncodingProblem, decode_queue, decode_utf8, wide_encoding
from gtui.core.queue.names import cmd_slug, derive_name, name_problem, name_safe
from gtui.core.queue.ondisk import MAX_QUEUE_BYTES, check_trusted, read_queue_bytes, read_queue_text
from gtui.core.queue.parse import MAX_NESTING, Document, TomlSyntaxError, read_document
from gtui.core.queue.reader import QueueReader, load_queue
from gtui.core.queue.schema import (
    CLUSTER_KEYS,
    JOB_KEYS,
    MAX_JOBS_PER_ENTRY,
    NOTIFY_KEYS,
    RULE_KEYS,
    SETTINGS_KEYS,
    TOP_KEYS,
    QueueFile,
)
from gtui.core.queue.settings import (
    parse_notify,
    parse_settings,
    pool_from_machine,
    refuse_node_names,
)
from gtui.core.queue.tojson import job_to_json, settings_to_json
from gtui.core.queue.values import scalar_text
from gtui.core.queue.where import printable

_name_safe = name_safe  # the name the command line's matrix suffixes import

__all__ = [
    "CLUSTER_KEYS",
    "JOB_KEYS",
    "MAX_JOBS_PER_ENTRY",
    "MAX_NESTING",
    "MAX_QUEUE_BYTES",
    "NOTIFY_KEYS",
    "RULE_KEYS",
    "SETTINGS_KEYS",
    "TOP_KEYS",
    "Document",
    "EncodingProblem",
    "QueueFile",
    "QueueReader",
    "TomlSyntaxError",
    "check_new_entry",
    "check_trusted",
    "cmd_slug",
    "decode_queue",
    "decode_utf8",
    "derive_name",
    "isolated",
    "job_from_fields",
    "job_to_json",
    "load_queue",
    "name_problem",
    "name_safe",
    "parse_notify",
    "parse_settings",
    "passes_gpu_numbers",
    "pool_from_machine",
    "printable",
    "read_document",
    "read_queue_bytes",
    "read_queue_text",
    "refuse_node_names",
    "scalar_text",
    "settings_to_json",
    "wide_encoding",
]
