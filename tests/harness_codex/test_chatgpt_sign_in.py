"""The ChatGPT sign-in: the engine is the single refresher of the OAuth pair, against a loopback token endpoint.

The fake token endpoint behaves as OpenAI's: each grant rotates the refresh token and a spent
one is refused, so a second refresher (or a forgotten rotation) shows up as a refused grant.
"""

from __future__ import annotations

import json
import stat
import threading
from pathlib import Path

import pytest

from crucible_core.protocols import FailureClass
from crucible_harness_codex.auth import WITHHELD_REFRESH_TOKEN
from crucible_harness_codex.cli_harness import CodexHarness
from crucible_harness_codex.oauth import CLIENT_ID, MintFailed, Refresher
from tests.fakes.openai_responses import FakeResponses, Script, TokenEndpoint, say, shell
from tests.harness_claude.support import Recorder, make_turn
from tests.harness_codex.support import ACCOUNT, ID_TOKEN, TEST_MODEL, harness_context, login_file, turn_env

SEED = "rt-login-seed-3f9a"


@pytest.fixture
def engine_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fake: FakeResponses) -> Path:
    """The engine's own HOME (where the rotated token is kept) and the loopback token endpoint."""
    home = tmp_path / "engine-home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("CRUCIBLE_CODEX_TOKEN_URL", fake.token_url)
    fake.tokens = TokenEndpoint(live=SEED, id_token=ID_TOKEN)
    return home


def state_file(home: Path) -> Path:
    return home / ".config" / "crucible" / "codex-credentials.json"


def chatgpt_env(fake: FakeResponses, tmp_path: Path, codex_cli: Path) -> dict[str, str]:
    env = turn_env(fake, tmp_path / "agent-home", codex_cli, CODEX_CREDENTIALS=login_file(SEED))
    del env["OPENAI_API_KEY"]
    return env


@pytest.mark.codex_cli
def test_each_turn_mints_a_token_on_the_engine_and_the_cli_gets_only_that(
    fake: FakeResponses,
    codex_cli: Path,
    workspace: Path,
    private_dir: Path,
    tmp_path: Path,
    engine_home: Path,
) -> None:
    fake.script = Script([shell('cat "$CODEX_HOME/auth.json" > seen-auth.json'), say("Signed in.")])
    env = chatgpt_env(fake, tmp_path, codex_cli)
    codex = CodexHarness.from_context(harness_context(private_dir, model=TEST_MODEL, auth="chatgpt"))
    recorder = Recorder()
    assert codex.preflight(env) == []
    result = codex.run(make_turn(workspace, env, recorder))
    assert result.ok, result.note

    # One grant, made by the engine with the seed, as the Codex CLI's client.
    assert fake.tokens is not None
    [grant] = fake.tokens.grants
    assert grant["grant_type"] == "refresh_token" and grant["refresh_token"] == SEED
    assert grant["client_id"] == CLIENT_ID
    # The CLI called the model with the minted token, for the account the sign-in names.
    [first, *_] = fake.model_requests()
    assert first.headers["authorization"] == "Bearer fake-access-token-1"
    assert first.headers["chatgpt-account-id"] == ACCOUNT
    # Its auth file held the short-lived token and a placeholder, never the refresh token.
    seeded = json.loads((workspace / "seen-auth.json").read_text())
    assert seeded["auth_mode"] == "chatgpt"
    assert seeded["tokens"] == {
        "access_token": "fake-access-token-1",
        "account_id": ACCOUNT,
        "id_token": ID_TOKEN,
        "refresh_token": WITHHELD_REFRESH_TOKEN,
    }
    assert SEED not in (workspace / "seen-auth.json").read_text()
    assert "fake-access-token-1" not in json.dumps(recorder.events)

    # The rotation was persisted, 0600 in a 0700 directory, and it (not the spent seed) makes
    # the next grant: the seed would now be refused.
    saved = state_file(engine_home)
    assert stat.S_IMODE(saved.stat().st_mode) == 0o600
    assert stat.S_IMODE(saved.parent.stat().st_mode) == 0o700
    assert json.loads(saved.read_text())["tokens"]["refresh_token"] == f"{SEED}~1"
    assert codex.run(make_turn(workspace, env, Recorder())).ok
    assert [g["refresh_token"] for g in fake.tokens.grants] == [SEED, f"{SEED}~1"]
    assert fake.model_requests()[-1].headers["authorization"] == "Bearer fake-access-token-2"


def test_concurrent_turns_never_present_one_refresh_token_twice(
    fake: FakeResponses, tmp_path: Path, engine_home: Path
) -> None:
    env = {"CODEX_CREDENTIALS": login_file(SEED)}
    minted: list[str] = []
    failures: list[BaseException] = []
    start = threading.Barrier(6)

    def turn() -> None:
        refresher = Refresher.for_engine()  # each turn its own object: the lock is the file's
        start.wait()
        try:
            minted.append(refresher.mint(env).access_token)
        except BaseException as exc:
            failures.append(exc)

    threads = [threading.Thread(target=turn) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert failures == []
    assert sorted(minted) == sorted(f"fake-access-token-{n}" for n in range(1, 7))
    assert fake.tokens is not None
    assert [g["refresh_token"] for g in fake.tokens.grants] == [SEED] + [f"{SEED}~{n}" for n in range(1, 6)]


def test_a_dead_refresh_token_fails_the_turn_saying_to_log_in_again(
    fake: FakeResponses, workspace: Path, private_dir: Path, tmp_path: Path, engine_home: Path
) -> None:
    assert fake.tokens is not None
    fake.tokens.live = "rt-someone-else-rotated-it"  # the seed was spent elsewhere
    env = {"PATH": "/usr/bin:/bin", "CODEX_CREDENTIALS": login_file(SEED), "CRUCIBLE_CODEX_BIN": "/bin/true"}
    codex = CodexHarness.from_context(harness_context(private_dir, model=TEST_MODEL, auth="chatgpt"))
    result = codex.run(make_turn(workspace, env, Recorder()))
    assert not result.ok and result.failure is FailureClass.PROVIDER
    assert "refresh_token_reused" in result.note and "codex login" in result.note
    assert str(state_file(engine_home)) in result.note
    assert not state_file(engine_home).exists() and fake.model_requests() == []


def test_an_unreachable_token_endpoint_is_a_transport_failure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("CRUCIBLE_CODEX_TOKEN_URL", "http://127.0.0.1:9/oauth/token")  # discard port: refused
    with pytest.raises(MintFailed) as caught:
        Refresher.for_engine().mint({"CODEX_CREDENTIALS": login_file(SEED)})
    assert caught.value.transient and "could not reach" in str(caught.value)


def test_material_of_the_wrong_shape_is_refused_before_any_grant(
    fake: FakeResponses, private_dir: Path, engine_home: Path
) -> None:
    codex = CodexHarness.from_context(harness_context(private_dir, auth="chatgpt"))
    env = {"PATH": "/usr/bin:/bin", "CRUCIBLE_CODEX_BIN": "/bin/true"}
    for material, expected in [
        ("{not json", "is not JSON"),
        ('{"OPENAI_API_KEY": "sk-x"}', "holds no tokens.refresh_token"),
    ]:
        [problem] = codex.preflight({**env, "CODEX_CREDENTIALS": material})
        assert expected in problem and "codex login" in problem
    [problem] = codex.preflight(env)
    assert "CODEX_CREDENTIALS" in problem and "codex login" in problem
    assert fake.tokens is not None and fake.tokens.grants == []
