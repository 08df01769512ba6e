"""The Textual dashboard. It talks to the engine only through ``gtui.core.sched.engine``'s API."""
