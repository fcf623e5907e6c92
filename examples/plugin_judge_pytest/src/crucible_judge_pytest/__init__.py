"""crucible-plugin-judge-pytest: a judge whose score is the number of passing tests."""

from crucible_core.api import hookimpl


@hookimpl
def crucible_register_judges(register):
    from crucible_judge_pytest.judge import PytestJudge, PytestSettings  # deferred: cheap start-up

    register("pytest", PytestJudge.from_context, settings=PytestSettings)
