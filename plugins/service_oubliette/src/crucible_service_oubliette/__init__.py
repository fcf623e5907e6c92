"""crucible-service-oubliette: a catalog service tool that gives one run one disposable Oubliette cluster."""
