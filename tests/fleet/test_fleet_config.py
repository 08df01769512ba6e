"""fleet.toml and HOST:QUEUE: what is taken, what is refused and how the refusal reads; and
the ssh line each call runs (multiplexed, never prompting, the queue's ``~`` left to the host)."""

from __future__ import annotations

import pytest

from gtui.core.errors import GtuiError
from gtui.fleet.config import Host, parse_hosts, parse_target
from gtui.fleet.transport import judge, remote_line, ssh_argv


def test_a_fleet_file_with_every_key() -> None:
    hosts = parse_hosts(
        '[[host]]\nname = "gpu1"\nqueue = "~/q.toml"\n\n'
        '[[host]]\nname = "gpu2"\nqueue = "/d/q.toml"\nssh = "ssh -J jump"\n'
        'gtui = "/opt/gtui"\nlabel = "big"\n'
    )
    assert hosts[0] == Host("gpu1", "~/q.toml", ("ssh",), ("gtui",))
    assert hosts[1].ssh == ("ssh", "-J", "jump") and hosts[1].gtui == ("/opt/gtui",)
    assert hosts[1].short == "big" and hosts[0].short == "gpu1"


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("", "no [[host]] table"),
        ("[[host]]\nname = 'a'\n", 'queue = "..." is missing'),
        ("[[host]]\nname = 'a'\nqueue = 'q'\nport = 22\n", "unknown key 'port'"),
        ("[[host]]\nname = 'a'\nqueue = 'q'\nssh = 3\n", "ssh must be a command line"),
        ("[[host]]\nname='a'\nqueue='q'\n[[host]]\nname='a'\nqueue='q'\n", "listed twice"),
        ("[[hosts]]\nname='a'\n", "unknown key 'hosts'"),
        ("[[host]\n", "not valid TOML"),
    ],
)
def test_mistakes_are_refused_saying_which(text: str, says: str) -> None:
    with pytest.raises(GtuiError) as e:
        parse_hosts(text, "fleet.toml")
    assert says in str(e.value) and str(e.value).startswith("fleet.toml")


def test_host_queue_arguments() -> None:
    assert parse_target("gpu1:~/q.toml") == Host("gpu1", "~/q.toml")
    with pytest.raises(GtuiError, match="HOST:QUEUE"):
        parse_target("gpu1")


def test_the_ssh_line_multiplexes_never_prompts_and_leaves_tilde_to_the_host() -> None:
    h = Host("gpu1", "~/my q.toml", ("ssh", "-p", "2222"), ("/opt/bin/gtui",))
    argv = ssh_argv(h)
    assert argv[:3] == ["ssh", "-p", "2222"] and argv[-1] == "gpu1"
    for opt in ("ControlMaster=auto", "ControlPersist=60", "BatchMode=yes"):
        assert opt in argv
    assert remote_line(h, ["status", h.queue, "--json"]) == (
        "/opt/bin/gtui status \"$HOME\"/'my q.toml' --json"
    )


def test_failures_say_what_to_do() -> None:
    h = Host("gpu1", "q.toml")
    assert judge(h, 255, "", "ssh: connect to host gpu1 port 22: Connection refused\n").problem == (
        "unreachable"
    )
    missing = judge(h, 127, "", "bash: line 1: gtui: command not found\n")
    assert missing.problem == "missing" and "pip install gtui" in missing.text
    old = judge(h, 2, "", "gtui: error: unrecognized arguments: --json\n")
    assert old.problem == "old" and "pip install -U gtui" in old.text
    assert judge(h, 2, "", "gtui: q.toml: no such queue file\n").problem is None
