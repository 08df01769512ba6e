"""How the suite is shared between pytest-xdist workers (``-n N --dist loadgroup``), applied to
the collected items by ``pytest_collection_modifyitems`` in tests/conftest.py.

Two rules, both on the order pytest-randomly has already shuffled (a stable sort keeps it):

- A test module's own module-scoped fixture (a Ray cluster, a built wheel, a second Unix user)
  is set up once per worker that runs one of its tests; the tests that use it are put in one
  ``xdist_group``, so one worker sets it up once and runs them one after the other.
- Grouped and ``slow`` tests go first: loadgroup hands the workers the biggest groups first,
  then the single tests in order, so a long test dealt last cannot leave one worker running it
  alone at the end.
"""

from __future__ import annotations

import pytest

SHARED_SCOPES = ("module", "package")


def shared_fixture_group(item: pytest.Item) -> str | None:
    """The group name of ``item`` (its module's path) when it uses a fixture of a shared scope
    defined in its own module, else None. Fixtures from conftest.py or plugins (tmp_path_factory
    and the like) are cheap or per worker anyway, and do not count."""
    info = getattr(item, "_fixtureinfo", None)
    module = item.nodeid.split("::", 1)[0]
    if info is None:
        return None
    for name in info.names_closure:
        defs = info.name2fixturedefs.get(name, ())
        # The last definition is the one the test gets (a module's own overrides conftest's).
        if defs and defs[-1].scope in SHARED_SCOPES and defs[-1].baseid == module:
            return module
    return None


def group_shared_fixture_users(items: list[pytest.Item]) -> None:
    """Mark each test that uses its module's shared fixture with that module's xdist_group
    (a test already in a group keeps it)."""
    for item in items:
        group = shared_fixture_group(item)
        if group is not None and item.get_closest_marker("xdist_group") is None:
            item.add_marker(pytest.mark.xdist_group(group))


def _goes_first(item: pytest.Item) -> bool:
    return (
        item.get_closest_marker("xdist_group") is not None
        or item.get_closest_marker("slow") is not None
    )


def long_ones_first(items: list[pytest.Item]) -> None:
    """Grouped and slow tests first, each side in the order it had."""
    items.sort(key=lambda item: not _goes_first(item))
