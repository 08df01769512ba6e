"""gtui.core is a headless core: it must import (and run) without textual."""

from __future__ import annotations

import ast
import subprocess
import sys

from tests.conftest import PACKAGE_DIR as APP

# Modules the walk must find: if it found none of them, the check below would pass vacuously.
SOME_CORE_MODULES = {
    "gtui.core.sched.engine",
    "gtui.core.gpus.nvml",
    "gtui.core.queue.importer",
    "gtui.core.control.offline",
    "gtui.core.tmux",
    "gtui.core.queue.writeback",
}

BLOCK_TEXTUAL = (
    "import sys\n"
    "class Block:\n"
    "    def find_spec(self, name, path=None, target=None):\n"
    "        if name == 'textual' or name.startswith('textual.') or name == 'rich':\n"
    "            raise ImportError('textual is blocked in this test')\n"
    "sys.meta_path.insert(0, Block())\n"
)


def test_core_imports_without_textual() -> None:
    """Every module of gtui.core, found by walking the package (so a new module is checked the
    day it is added), imports with `import textual` made to fail. The walk runs under the
    block too: it imports the subpackages it descends into."""
    code = BLOCK_TEXTUAL + (
        "import pkgutil\n"
        "import gtui.core\n"
        "names = [m.name for m in pkgutil.walk_packages(gtui.core.__path__, 'gtui.core.')]\n"
        "for m in names:\n"
        "    __import__(m)\n"
        "assert not any(k == 'textual' or k.startswith('textual.') for k in sys.modules)\n"
        "print('\\n'.join(names))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    checked = set(out.stdout.split())
    assert checked >= SOME_CORE_MODULES, sorted(SOME_CORE_MODULES - checked)


def test_blocking_textual_really_blocks() -> None:
    """The guard above would be worthless if the blocker did not work: check it does."""
    code = BLOCK_TEXTUAL + "import gtui.ui.app\n"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode != 0
    assert "textual is blocked in this test" in out.stderr


# The layers of gtui.core, lowest first: a module may import its own layer and those below, never
# one above (the folder layout shows the architecture; docs/architecture.md draws it).
LAYERS = [
    {
        "model", "errors", "units", "paths", "atomic", "termtext", "tmux", "progress",
        "procstat", "deadline", "flock", "joblog", "reserve",
    },
    {"exec", "gpus", "diagnosis", "queue", "api", "bus"},
    {"state"},
    {"sched"},
    {"control"},
]
# Upward imports with a reason. The engine serves its own control socket (serve and the
# refusal to run a queue another live gtui serves); the server knows the engine only by a
# Protocol, so this is no cycle.
ALLOWED_UP = {("gtui.core.sched.engine", "gtui.core.control.server")}


def _layer(module: str) -> int | None:
    parts = module.split(".")
    if parts[:2] != ["gtui", "core"] or len(parts) < 3:
        return None
    return next((i for i, names in enumerate(LAYERS) if parts[2] in names), None)


def test_core_imports_only_downward() -> None:
    from tests.project.test_import_cycles import import_graph

    graph, _lines, _files = import_graph()
    checked = 0
    wrong = []
    for src, dests in graph.items():
        low = _layer(src)
        if low is None:
            continue
        for dst in dests:
            high = _layer(dst)
            if high is None:
                continue
            checked += 1
            if high > low and (src, dst) not in ALLOWED_UP:
                wrong.append(f"{src} (layer {low}) imports {dst} (layer {high})")
    assert checked > 100, checked  # the graph really holds gtui.core's imports
    assert not wrong, "\n".join(wrong)
    every_core_dir = {
        p.name for p in (APP / "core").iterdir() if p.is_dir() and p.name != "__pycache__"
    }
    assert every_core_dir <= set().union(*LAYERS), every_core_dir - set().union(*LAYERS)


def test_the_queue_layer_knows_no_scheduler() -> None:
    """The queue file is read and checked below the scheduler: no module of gtui.core.queue
    imports gtui.core.sched (the placement policy included, whose reserve rule the pool check
    shares through gtui.core.reserve), at the top or lazily."""
    from tests.project.test_import_cycles import import_graph

    graph, _lines, _files = import_graph()
    queue = {m for m in graph if m.startswith("gtui.core.queue.")}
    assert {"gtui.core.queue.queuefile", "gtui.core.queue.checks"} <= queue
    wrong = [
        f"{src} imports {dst}"
        for src in sorted(queue)
        for dst in graph[src]
        if dst == "gtui.core.sched" or dst.startswith("gtui.core.sched.")
    ]
    assert not wrong, "\n".join(wrong)
    assert _layer("gtui.core.sched.policy") == 3  # no exception lifts the policy down


def test_the_executor_seam_is_the_only_way_to_processes() -> None:
    """Placement, retries and transitions never touch a pid: outside gtui.core.exec (and the GPU
    layer, which reads NVML's process lists) nothing in the core imports psutil or subprocess
    or sends a signal."""
    allowed = {
        "core/state/lock.py",  # the lock's holder pid: not a job's process
        "core/tmux.py",  # runs tmux itself
        "core/diagnosis/rulematch.py",  # the worker that runs users' patterns under a deadline
        "core/sched/faults.py",  # the crash tests' fault injection kills the scheduler itself
        "core/sched/handover.py",  # starts the scheduler a quitting dashboard hands over to
    }
    offenders = []
    for path in (APP / "core").rglob("*.py"):
        rel = str(path.relative_to(APP))
        if path.relative_to(APP / "core").parts[0] in {"exec", "gpus"} or rel in allowed:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            elif isinstance(node, ast.Attribute) and node.attr in {"kill", "killpg", "waitpid"}:
                if isinstance(node.value, ast.Name) and node.value.id == "os":
                    offenders.append(f"{rel}:{node.lineno}: os.{node.attr}")
                continue
            else:
                continue
            for name in names:
                if name.split(".")[0] in {"psutil", "subprocess"}:
                    offenders.append(f"{rel}:{node.lineno}: imports {name}")
    assert not offenders, "\n".join(offenders)


def test_big_modules_say_why() -> None:
    """No module above about 400 lines without a reason at its top (a "Size:" paragraph)."""
    too_big = []
    for path in APP.rglob("*.py"):
        text = path.read_text()
        if text.count("\n") > 400:
            head = text[:4000]
            if "Size:" not in head:
                too_big.append(f"{path.relative_to(APP)}: {text.count(chr(10))} lines")
    assert not too_big, "\n".join(too_big)


# The executor implementations: the interface (gtui.core.exec.base) must know none of them.
EXECUTOR_IMPLEMENTATIONS = {
    "gtui.core.exec.runner",
    "gtui.core.exec.local",
    "gtui.core.exec.memory",
    "gtui.core.exec.ray",
    "gtui.core.exec.ray.cluster",
    "gtui.core.exec.ray.agent",
}


def test_executor_interface_imports_no_implementation() -> None:
    """The executor interface owns its types (Handle, ExitStatus, LaunchRequest, ...): base.py
    imports no executor, directly or through another module, so a new executor plugs in
    without the interface being shaped by the local one."""
    from tests.project.test_import_cycles import import_graph

    graph, _lines, _files = import_graph()
    assert "gtui.core.exec.runner" in graph  # the graph holds the exec package
    seen: set[str] = set()
    todo = ["gtui.core.exec.base"]
    while todo:
        module = todo.pop()
        if module in seen:
            continue
        seen.add(module)
        todo.extend(graph.get(module, ()))
    assert not seen & EXECUTOR_IMPLEMENTATIONS, sorted(seen & EXECUTOR_IMPLEMENTATIONS)


def test_every_executor_implements_the_whole_interface() -> None:
    """Every executor has every method of the Protocol (host_memory_mib included: one that
    cannot measure returns {}), so the scheduler calls them directly, never by getattr."""
    from gtui.core.exec.base import Executor
    from gtui.core.exec.local import LocalExecutor
    from gtui.core.exec.memory import MemoryExecutor
    from gtui.core.exec.ray.cluster import RayExecutor

    wanted = {
        name
        for name, value in vars(Executor).items()
        if callable(value) and not name.startswith("_")
    }
    assert {"launch", "wait", "kill", "host_memory_mib"} <= wanted
    for cls in (LocalExecutor, MemoryExecutor, RayExecutor):
        assert not wanted - set(dir(cls)), (cls.__name__, wanted - set(dir(cls)))
    offenders = []
    for path in (APP / "core").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id in {"getattr", "hasattr"}
                and len(node.args) >= 2
                and isinstance(node.args[1], ast.Constant)
                and node.args[1].value in wanted
            ):
                offenders.append(f"{path.relative_to(APP)}:{node.lineno}")
    assert not offenders, offenders
