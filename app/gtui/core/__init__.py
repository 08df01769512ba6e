"""The headless core of gtui: queue file, GPU layer, placement policy, runner, engine.

Nothing under ``gtui.core`` may import textual: the engine must run (``gtui run``) and be tested
without any UI. ``tests/project/test_layering.py`` proves it.
"""
