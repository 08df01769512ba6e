"""gtui.core is a headless core: it must import (and run) without textual."""

from __future__ import annotations

import subprocess
import sys

# Modules the walk must find: if it found none of them, the check below would pass vacuously.
SOME_CORE_MODULES = {
    "gtui.core.engine",
    "gtui.core.gpus.nvml",
    "gtui.core.importer",
    "gtui.core.offline",
    "gtui.core.tmux",
    "gtui.core.writeback",
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
