"""One module per ``gtui`` subcommand; each has ``main(ns, opts) -> exit code``."""
