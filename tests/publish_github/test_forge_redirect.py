"""The publisher's REST calls keep the forge token on the forge's own origin, across redirects."""

from __future__ import annotations

import contextlib
import time
from pathlib import Path

from crucible_core.api import PublishRequest
from crucible_publish_github.github import API_ENV, PublishFailed, _Api
from tests.fakes.redirecting_api import recorder, serve

TOKEN = "ghp_redirectcanary0000000000000000000000"


def _request(api: str, tmp_path: Path) -> PublishRequest:
    return PublishRequest(
        repo="acme/widgets",
        base="main",
        branch="crucible/run-1",
        sha="0" * 40,
        workspace=tmp_path,
        title="t",
        body="b",
        env={API_ENV: api},
        timeout=10.0,
    )


def test_a_redirect_to_another_origin_does_not_carry_the_token(tmp_path: Path) -> None:
    elsewhere = recorder(None)
    with serve(elsewhere) as other:
        forge = recorder(other)
        with serve(forge) as url:
            api = _Api(_request(url, tmp_path), TOKEN, time.monotonic() + 10)
            with contextlib.suppress(PublishFailed):  # refusing the redirect would do as well
                api.open_pull()
    assert forge.seen == [f"Bearer {TOKEN}"]
    assert all(seen is None for seen in elsewhere.seen)


def test_the_forge_itself_gets_the_token(tmp_path: Path) -> None:
    forge = recorder(None)
    with serve(forge) as url:
        assert _Api(_request(url, tmp_path), TOKEN, time.monotonic() + 10).open_pull() is None
    assert forge.seen == [f"Bearer {TOKEN}"]
