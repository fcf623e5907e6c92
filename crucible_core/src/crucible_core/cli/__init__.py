"""The `crucible` command line (click): one module per command."""
