"""A loopback S3 server (moto in server mode on 127.0.0.1) and the AWS environment that reaches it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from crucible_core.services.runtime import free_loopback_port

# Stand-in credentials: moto accepts any; the tests assert neither ever lands in a record.
ACCESS_KEY = "AKIARECORDTEST000001"
SECRET_KEY = "record-secret-9f3c2a7e-must-never-leak"


@pytest.fixture(scope="session")
def s3_endpoint() -> Iterator[str]:
    from moto.server import ThreadedMotoServer

    port = free_loopback_port()  # held in TIME_WAIT until moto binds it by number
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.stop()


@pytest.fixture
def aws_env(s3_endpoint: str, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """The standard AWS environment pointing at the loopback server, set for this test."""
    env = {
        "AWS_ACCESS_KEY_ID": ACCESS_KEY,
        "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ENDPOINT_URL": s3_endpoint,
    }
    for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_REGION", "CRUCIBLE_RESULTS_BUCKET"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return env


@pytest.fixture
def bucket(aws_env: dict[str, str], request: pytest.FixtureRequest) -> str:
    """A fresh bucket on the loopback server, created through boto3 as a user would."""
    import boto3

    name = "rec-" + request.node.name.lower().replace("_", "-")[:40].strip("-")
    client: Any = boto3.client("s3", endpoint_url=aws_env["AWS_ENDPOINT_URL"])
    client.create_bucket(Bucket=name)
    return name
