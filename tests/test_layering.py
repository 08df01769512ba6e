"""gtui.core is a headless core: it must import (and run) without textual."""

from __future__ import annotations

import subprocess
import sys

CORE_MODULES = [
    "gtui.core.model",
    "gtui.core.units",
    "gtui.core.queuefile",
    "gtui.core.placeholders",
    "gtui.core.policy",
    "gtui.core.runner",
    "gtui.core.store",
    "gtui.core.diagnose",
    "gtui.core.engine",
    "gtui.core.gpus.backend",
    "gtui.core.gpus.fake",
    "gtui.core.gpus.nvml",
    "gtui.core.control",
    "gtui.core.lock",
]


def test_core_imports_without_textual() -> None:
    # Make `import textual` fail outright, then import every core module.
    code = (
        "import sys\n"
        "class Block:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'textual' or name.startswith('textual.') or name == 'rich':\n"
        "            raise ImportError('textual is blocked in this test')\n"
        "sys.meta_path.insert(0, Block())\n"
        f"for m in {CORE_MODULES!r}:\n"
        "    __import__(m)\n"
        "assert not any(k == 'textual' or k.startswith('textual.') for k in sys.modules)\n"
        "print('ok')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"


def test_blocking_textual_really_blocks() -> None:
    """The guard above would be worthless if the blocker did not work: check it does."""
    code = (
        "import sys\n"
        "class Block:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'textual':\n"
        "            raise ImportError('blocked')\n"
        "sys.meta_path.insert(0, Block())\n"
        "import gtui.ui.app\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode != 0
