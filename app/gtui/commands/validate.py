"""``gtui validate QUEUE.toml [--json]``: check a queue file and print its expanded jobs.

The GPUs are read (fake ones from ``--fake-gpus`` / ``GTUI_FAKE_GPUS`` or the file's
``fake_gpus``, else NVML) so that jobs that can never fit are caught now rather than waiting
forever; when no GPU is known the pool checks are skipped, and stderr says so in one line.
Exit 0 when the file is good, 2 (with ``file:line: key: ...``) when it is not.
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
from pathlib import Path

from gtui.commands.options import GlobalOptions
from gtui.core.errors import GtuiError
from gtui.core.gcpause import paused_gc
from gtui.core.gpus.snapshot import GpuSnapshot
from gtui.core.model import JobSpec, Settings
from gtui.core.paths import queue_paths
from gtui.core.queue.queuefile import (
    QueueFile,
    QueueReader,
    isolated,
    job_to_json,
    read_queue_text,
    refuse_node_names,
    settings_to_json,
)
from gtui.core.state.usage import mem_notes, peaks_by_job
from gtui.core.units import format_duration, format_mib


def read_machine(
    fake_spec: str | None, base_dir: Path, wanted: object = None
) -> tuple[dict[int, int | None] | None, str]:
    """Every GPU of the machine (index -> total MiB) and where that came from, or None and why.

    ``wanted`` (``[settings] gpus``): a GPU split into MIG instances that it names by its own
    index stands for its instances, as large as the largest of them.

    A bad fake spec is the user's mistake (GtuiError, exit 2); any other failure to read the GPUs
    only means the pool checks cannot be made.
    """
    try:
        from gtui.core.gpus.backend import open_backend
    except ImportError as e:  # pragma: no cover - only while the GPU layer is missing
        return None, f"the GPU layer is not available ({e})"
    backend = open_backend(fake_spec, base_dir)
    try:
        snapshot: GpuSnapshot = backend.read()
    except GtuiError:
        raise
    except Exception as e:  # read() must never raise; if it does, validate still works
        return None, f"reading the GPUs failed ({e})"
    finally:
        try:
            backend.close()
        except Exception:
            pass
    gpus = [g for g in snapshot.gpus if not g.lost]
    if not gpus:
        return None, snapshot.error or "no GPU found"
    source = f"fake GPUs {fake_spec}" if snapshot.source == "fake" else snapshot.source.upper()
    machine = {g.index: g.mem_total_mib for g in gpus}
    if isinstance(wanted, (list, tuple)):
        for g in gpus:
            p = g.mig_parent
            if p is not None and p in wanted and p not in machine:
                machine[p] = max(h.mem_total_mib or 0 for h in gpus if h.mig_parent == p)
    return machine, source


def _settings_line(s: Settings) -> str:
    listed = [*(() if s.gpus == "all" else map(str, s.gpus)), *s.cluster_gpus]
    parts = [f"mode {s.mode.value}", f"gpus {','.join(listed) or 'all'}"]
    if s.exclude or s.cluster_exclude:
        parts.append("exclude " + ",".join([*map(str, s.exclude), *s.cluster_exclude]))
    parts.append(f"reserve {s.reserve}")
    if s.cluster_reserve:  # per node
        parts.append("reserve " + ",".join(f"{node}={k}" for node, k in s.cluster_reserve))
    parts.append(f"max_parallel {s.max_parallel or 'unlimited'}")
    parts.append(f"retries {s.retries}")
    parts.append(f"isolate {'on' if s.isolate else 'off'}")
    if s.fake_gpus:
        parts.append(f"fake_gpus {s.fake_gpus}")
    return " · ".join(parts)


def _job_lines(job: JobSpec, settings: Settings) -> list[str]:
    if job.gpus == 0:
        where = "cpu"
    else:
        mem = format_mib(job.mem_mib) if job.mem_mib is not None else "whole GPU"
        if job.mem_auto:
            mem = "mem auto (its runs' peak + 20 %; whole GPU until one is recorded)"
        where = f"{job.gpus} GPU{'s' if job.gpus > 1 else ''} · {mem}"
    facts = [where]
    if job.priority:
        facts.append(f"priority {job.priority}")
    if job.after:
        shown = ", ".join(job.after[:4]) + (f" +{len(job.after) - 4}" if len(job.after) > 4 else "")
        facts.append(f"after {shown}")
    if job.retries:
        facts.append("retries forever" if job.retries < 0 else f"retries {job.retries}")
    if job.timeout_s is not None:
        facts.append(f"timeout {format_duration(job.timeout_s)}")
    if job.cwd != ".":
        facts.append(f"cwd {job.cwd}")
    if job.env:
        facts.append("env " + " ".join(f"{k}={v}" for k, v in job.env.items()))
    if not isolated(job, settings):
        facts.append("UNISOLATED: sees every GPU (isolate = false)")
    return [f"  {job.name}  ({' · '.join(facts)})", f"      $ {job.cmd}"]


SHOWN_JOBS = 50  # a sweep of 100,000 jobs is checked whole, but listed only this far


def render(qf: QueueFile, pool_note: str, *, every: bool = False) -> str:
    """The human form: settings on one line, then each job and its command (the first
    SHOWN_JOBS of a long queue, unless ``every``)."""
    n = len(qf.jobs)
    out = [f"{qf.path}: ok, {n} job{'s' if n != 1 else ''}", f"  {_settings_line(qf.settings)}"]
    if pool_note:
        out.append(f"  {pool_note}")
    if qf.jobs:
        out.append("")
    shown = qf.jobs if every else qf.jobs[:SHOWN_JOBS]
    for job in shown:
        out.extend(_job_lines(job, qf.settings))
    if len(shown) < n:
        out.append(f"  ... and {n - len(shown)} more (`gtui validate --all` lists every job)")
    return "\n".join(out)


def main(ns: argparse.Namespace, opts: GlobalOptions) -> int:
    # A short-lived command that makes 100,000 jobs' objects, which hold no cycles: the
    # collector's passes over them after the load, and the interpreter's last one at exit, find
    # nothing and took 0.45 s of a 1.55 s validate of 100,000 jobs. Off for the command, and what
    # it made frozen (out of that last pass) once its answer is out.
    with paused_gc():
        try:
            return _main(ns, opts)
        finally:
            gc.freeze()


def _main(ns: argparse.Namespace, opts: GlobalOptions) -> int:
    path = Path(ns.queue)
    text = read_queue_text(path)
    reader = QueueReader()  # the second load, against the machine, reuses the first's parse
    qf = reader.load(path, text=text)
    if (opts.backend or qf.settings.cluster_backend) != "ray":
        refuse_node_names(path, qf.settings)  # as `gtui run` would refuse them at its start
    spec = opts.fake_gpus or qf.settings.fake_gpus
    machine, source = read_machine(spec, path.resolve().parent, qf.settings.gpus)
    pool_note = ""
    if machine is None:
        print(f"gtui: pool checks skipped, no GPU known: {source}", file=sys.stderr)
    else:
        qf = reader.load(path, machine=machine, text=text)
        pool_note = f"checked against the machine's {len(machine)} GPUs ({source})"
    for warning in qf.warnings:
        print(f"gtui: warning: {warning}", file=sys.stderr)
    # A mem far from what the job's last runs used (the queue's attempts history).
    for note in mem_notes(qf.jobs, peaks_by_job(queue_paths(path).db)):
        print(f"gtui: warning: {note}", file=sys.stderr)
    if getattr(ns, "json", False):
        doc = {
            "settings": settings_to_json(qf.settings),
            "jobs": [job_to_json(j) for j in qf.jobs],
        }
        print(json.dumps(doc, indent=2, ensure_ascii=False))
    else:
        print(render(qf, pool_note, every=bool(getattr(ns, "all", False))))
    return 0
