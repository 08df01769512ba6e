"""The fleet dashboard (textual): gtui.fleet.ui.app; what it draws, as pure functions: view."""
