"""Work graphs: the plan IR, its validation, the task kinds, and the executor that runs them."""
