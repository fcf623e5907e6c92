"""The session: the one shell every kind of run goes through (prepare, log, hooks, bridge, signals, shutdown)."""
