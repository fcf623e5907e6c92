"""The run shell around each iteration: drivers, loop, gates, parks, budgets, recovery and resume."""
