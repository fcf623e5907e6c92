"""A test kit for plugin authors: in-memory and scripted drivers, and a helper running the real loop with them.

The public names are re-exported by `crucible_core.api`; the pytest fixtures live in
`crucible_core.testing.pytest_plugin`, which pytest loads by itself (the `pytest11` entry point).
"""
