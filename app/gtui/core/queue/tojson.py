"""The JSON shapes of settings and jobs (``gtui validate --json``)."""

from __future__ import annotations

from typing import Any

from gtui.core.model import JobSpec, Mode, Notify, Placement, Resume, Settings


def settings_to_json(settings: Settings) -> dict[str, Any]:
    """``settings`` with plain JSON types, keyed by :class:`Settings` field names."""
    out: dict[str, Any] = {}
    for key, value in settings.__dict__.items():
        if key == "diagnose":
            out[key] = [
                {
                    "kind": r.kind,
                    "pattern": r.pattern,
                    "hint": r.hint,
                    "exit_codes": list(r.exit_codes),
                    "signals": list(r.signals),
                }
                for r in value
            ]
        elif key == "groups":
            out[key] = [
                {"name": g.name, "max_parallel": g.max_parallel, "priority": g.priority}
                for g in value
            ]
        elif isinstance(value, tuple):
            out[key] = list(value)
        elif isinstance(value, dict):
            out[key] = dict(value)
        elif isinstance(value, (Mode, Placement)):
            out[key] = value.value
        elif isinstance(value, Resume):
            out[key] = dict(vars(value))
        elif isinstance(value, Notify):
            out[key] = {k: list(v) if isinstance(v, tuple) else v for k, v in vars(value).items()}
        else:
            out[key] = value
    return out


def job_to_json(job: JobSpec) -> dict[str, Any]:
    """The ``gtui validate --json`` shape of one job."""
    return {
        "name": job.name,
        "cmd": job.cmd,
        "gpus": job.gpus,
        "mem_mib": job.mem_mib,
        "mem_auto": job.mem_auto,
        "priority": job.priority,
        "after": list(job.after),
        "retries": job.retries,
        "timeout_s": job.timeout_s,
        "cwd": job.cwd,
        "env": dict(job.env),
        "isolate": job.isolate,
        # (only when the job has them: the shape of a job without stays as it was)
        **{k: v for k, v in (("group", job.group), ("setup", job.setup),
                             ("env_file", job.env_file)) if v is not None},
        **({"resume": dict(vars(job.resume))} if job.resume is not None else {}),
    }  # fmt: skip
