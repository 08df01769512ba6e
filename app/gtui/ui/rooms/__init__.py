"""The main screen's rooms: each part of what ``MainScreen`` does, one job per module.

The screen composes the widgets; it keeps one ``action_*`` per key (Textual finds them there)
and hands each to the room that does it: the engine state coming in (feed), the panes fitted to
the terminal (panes), the queue box's title and filter (queue_box), the selected job's log and
diagnosis (log_pane), the keys that act on jobs (job_keys), the queue file's edits
(queue_edits) and the quit dialog (quit). What the keys act on is read by selection; how a
command runs, by commands.
"""
