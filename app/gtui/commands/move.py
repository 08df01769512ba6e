"""``gtui move QUEUE.toml JOB (--top | --bottom | --before OTHER | --after OTHER)``: reorder the
waiting jobs, as the dashboard's keys do: the job's ``[[jobs]]`` table moves (a matrix entry
moves whole), the file keeps its comments and layout, and a running scheduler takes the new
order at once."""

from __future__ import annotations

import argparse

from gtui.commands._edits import WAITING, Jobs, tell_scheduler
from gtui.commands.options import GlobalOptions, queue_file
from gtui.core.errors import GtuiError
from gtui.core.queue.writeback import Place, place_job


def main(ns: argparse.Namespace, opts: GlobalOptions) -> int:
    paths = queue_file(ns.queue)
    q = paths.queue.name
    jobs = Jobs(paths)
    name = jobs.names.one(ns.job, table=True)
    where: Place
    other: str | None = None
    if ns.top:
        where = "top"
    elif ns.bottom:
        where = "bottom"
    elif ns.before:
        where, other = "before", jobs.names.one(ns.before, table=True)
    else:
        where, other = "after", jobs.names.one(ns.after, table=True)
    state = jobs.state(name)
    if state not in WAITING:
        raise GtuiError(f"{name} is {state}: only waiting (queued or held) jobs can be moved")
    if other == name:
        raise GtuiError(f"cannot move {name} {where} itself")
    if not place_job(paths.queue, name, where, other, reader=jobs.names.reader):
        print(f"{name} is already {where}{' ' + other if other else ''} in {q}")
        return 0
    tell_scheduler(paths)
    place = {"top": "to the top", "bottom": "to the bottom"}.get(where, f"{where} {other}")
    entry = {s.name: s.entry for s in jobs.names.specs()}
    together = [n for n, e in entry.items() if n != name and e == entry.get(name)]
    what = f"{name} (and {len(together)} more of its matrix)" if together else name
    print(f"moved {what} {place} of {q}" if other is None else f"moved {what} {place} in {q}")
    return 0
