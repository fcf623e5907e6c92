"""workflow.star: the Starlark authoring surface that compiles to a `[workflow]` plan IR."""
