"""Run services: long-lived tools from an attested catalog that tasks reach by `needs = "service.<name>"`."""
