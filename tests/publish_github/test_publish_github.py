"""Publish-on-keep through the github publisher: the run's kept commits as one draft PR, admitted by
the mediation point once, at the first keep; a refused write is recorded and the run goes on.

The forge is a loopback HTTP server speaking GitHub's REST shape for `/repos/{o}/{r}/pulls`,
reached through urllib (the publisher's real client), and a bare git repository reached through
the real git CLI; only the GitHub service itself is stood in for.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from crucible_core.errors import ExitCode
from crucible_core.plugins import load_plugins
from crucible_core.run.budget import Budget
from crucible_core.session.entry import execute
from crucible_core.session.request import SessionRequest
from crucible_core.session_log import read_events
from tests.cli_support import crucible_env, run_crucible

TOKEN = "ghp_publishTestToken0123456789abcdef"
# The broker plugin is the run's mediation point, which every draft-pr write asks first.
WITHOUT_PUBLISHER = ["core", "world_git", "judge_command", "backend_local", "broker_mcp"]
STANDARD = [*WITHOUT_PUBLISHER, "publish_github"]


class FakeForge:
    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.opened: list[tuple[int, str]] = []  # (number, url) of the pull requests opened
        forge = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                # the publisher asks for the run's open pull request first; the first time there is none
                forge.requests.append(
                    {"method": "GET", "path": self.path, "auth": self.headers.get("authorization")}
                )
                open_ = [{"number": n, "html_url": u} for n, u in forge.opened]
                self._reply(200, open_)

            def do_PATCH(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("content-length") or 0)))
                forge.requests.append(
                    {"method": "PATCH", "path": self.path, "auth": self.headers.get("authorization"), **body}
                )
                number, url = forge.opened[0]
                self._reply(200, {"number": number, "html_url": url})

            def _reply(self, status: int, answer: Any) -> None:
                reply = json.dumps(answer).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("content-length") or 0)))
                forge.requests.append(
                    {"method": "POST", "path": self.path, "auth": self.headers.get("authorization"), **body}
                )
                number = len(forge.opened) + 1
                repo = self.path.removeprefix("/repos/").removesuffix("/pulls")
                forge.opened.append((number, f"https://forge.test/{repo}/pull/{number}"))
                reply = json.dumps(
                    {
                        "number": number,
                        "draft": body.get("draft"),
                        "html_url": f"https://forge.test/{repo}/pull/{number}",
                    }
                ).encode()
                self.send_response(201)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, *_args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=5)


@pytest.fixture
def forge(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[FakeForge, Path]]:
    remotes = tmp_path / "forge-git"
    bare = remotes / "team" / "counter.git"
    bare.parent.mkdir(parents=True)
    subprocess.run(["git", "init", "--quiet", "--bare", str(bare)], check=True)
    fake = FakeForge()
    monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
    monkeypatch.setenv("CRUCIBLE_GITHUB_API", fake.url)
    monkeypatch.setenv("CRUCIBLE_GITHUB_GIT", remotes.as_uri())
    yield fake, bare
    fake.close()


def publishing(example: Any, outputs: str) -> Path:
    manifest = example("counter")
    manifest.write_text(manifest.read_text() + '\n[publish]\npr_repo = "team/counter"\n' + outputs)
    return manifest


def branches(bare: Path) -> dict[str, str]:
    listed = subprocess.run(
        ["git", "for-each-ref", "--format=%(refname:short) %(objectname)", "refs/heads"],
        cwd=bare,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    return dict(zip(listed[::2], listed[1::2], strict=True))


def test_the_run_is_one_admitted_draft_pr_write_however_many_commits_it_keeps(
    example: Any, forge: tuple[FakeForge, Path]
) -> None:
    fake, bare = forge
    manifest = publishing(example, '\n[outputs.draft-pr]\ncount = 1\ntarget = { fixed = "team/counter" }\n')
    result = execute(
        load_plugins(names=STANDARD),
        SessionRequest(manifest=manifest, budget=Budget(iterations=3), ui="headless"),
    )
    assert result.outcome == "finished", result.reason
    events = list(read_events(manifest.parent / "state" / "session.jsonl"))
    rows = [e["row"] for e in events if e["kind"] == "row" and e["row"]["iter"]]
    kept = {row["iter"]: row["sha"] for row in rows if row["decision"] == "keep"}
    assert sorted(kept) == [1, 2, 3]
    run_id = next(e["run_id"] for e in events if e["kind"] == "start")
    base = next(e["base_commit"] for e in events if e["kind"] == "identity")

    # one admitted write, at the first keep: the later keeps update the same pull request and are
    # not counted again, so a count of 1 is never exceeded
    admitted = [e for e in events if e["kind"] == "output_admitted"]
    assert [(e["output_kind"], e["target"], e["tool"], e["used"], e["iter"]) for e in admitted] == [
        ("draft-pr", "team/counter", "publish", 1, 1),
    ]
    assert not [e for e in events if e["kind"] == "output_refused"]
    opened = [r for r in fake.requests if r["method"] == "POST"]
    assert [(r["path"], r["head"], r["base"], r["draft"]) for r in opened] == [
        ("/repos/team/counter/pulls", f"crucible/{run_id}", f"crucible/{run_id}-base", True),
    ]
    assert all(r["auth"] == f"Bearer {TOKEN}" for r in fake.requests)
    assert branches(bare) == {f"crucible/{run_id}": kept[3], f"crucible/{run_id}-base": base}
    notes = [e["msg"] for e in events if e["kind"] == "note"]
    assert any("https://forge.test/team/counter/pull/1" in n for n in notes)
    assert TOKEN not in (manifest.parent / "state" / "session.jsonl").read_text()


def test_a_count_of_zero_refuses_the_run_s_pull_request_and_the_run_completes(
    example: Any, forge: tuple[FakeForge, Path]
) -> None:
    fake, bare = forge
    manifest = publishing(example, '\n[outputs.draft-pr]\ncount = 0\ntarget = { fixed = "team/counter" }\n')
    result = execute(
        load_plugins(names=STANDARD),
        SessionRequest(manifest=manifest, budget=Budget(iterations=2), ui="headless"),
    )
    assert result.outcome == "finished", result.reason
    events = list(read_events(manifest.parent / "state" / "session.jsonl"))
    refused = [e for e in events if e["kind"] == "output_refused"]
    # refused at the first keep, named by its bound; the second keep is not even asked for
    assert [(e["output_kind"], e["bound"], e["tool"], e["iter"]) for e in refused] == [
        ("draft-pr", "[outputs.draft-pr].count = 0", "publish", 1)
    ]
    assert fake.requests == [] and branches(bare) == {}
    notes = [e["msg"] for e in events if e["kind"] == "note"]
    assert any("publish refused for iteration 1" in n for n in notes)


def test_a_pr_repo_outside_the_declared_target_is_refused_and_the_run_completes(
    example: Any, forge: tuple[FakeForge, Path]
) -> None:
    fake, bare = forge
    manifest = publishing(example, '\n[outputs.draft-pr]\ncount = 5\ntarget = { fixed = "team/other" }\n')
    result = execute(
        load_plugins(names=STANDARD),
        SessionRequest(manifest=manifest, budget=Budget(iterations=2), ui="headless"),
    )
    assert result.outcome == "finished", result.reason
    events = list(read_events(manifest.parent / "state" / "session.jsonl"))
    refused = [e for e in events if e["kind"] == "output_refused"]
    # one refusal: publishing stops after it, so the second kept commit is not even asked for
    assert [(e["bound"], e["requested"], e["iter"]) for e in refused] == [
        ("[outputs.draft-pr].target = team/other", "team/counter", 1)
    ]
    assert fake.requests == [] and branches(bare) == {}
    assert not [e for e in events if e["kind"] == "output_admitted"]


def test_without_outputs_the_draft_pr_default_targets_the_publish_repo(example: Any) -> None:
    from crucible_core.broker.service import declaration_for
    from crucible_core.manifest.loader import load_manifest

    manifest = publishing(example, "")
    plugins = load_plugins(names=STANDARD)
    draft = declaration_for(plugins, load_manifest(manifest, plugins=plugins), environ={}).output("draft-pr")
    assert draft is not None and draft.count == 2 and draft.source == "engine-default"
    assert draft.describe_target() == "fixed team/counter"


def test_without_the_plugin_check_and_run_name_the_distribution_to_install(example: Any) -> None:
    manifest = publishing(example, "")
    env = crucible_env(CRUCIBLE_LOAD_PLUGINS=",".join(WITHOUT_PUBLISHER))
    check = run_crucible("check", "--manifest", manifest, env=env)
    assert check.returncode == ExitCode.CHECK_FAILED, check.stdout + check.stderr
    assert "'github' is not an installed publisher" in check.stdout
    assert "pip install crucible-plugin-publish-github" in check.stdout
    run = run_crucible("run", "--manifest", manifest, "--iterations", "1", env=env)
    assert run.returncode == ExitCode.MANIFEST, run.stdout + run.stderr
    assert "pip install crucible-plugin-publish-github" in run.stderr
    assert not (manifest.parent / "workspace").exists()  # refused before anything was made


def test_every_run_learns_the_token_variables_without_importing_the_forge_client() -> None:
    """The engine asks every plugin for its credentials at start-up; publish-github answers
    without loading `github.py` (and urllib's HTTP client), which only a publishing run needs."""
    probe = (
        "import sys\n"
        "import crucible_publish_github as plugin\n"
        "print(plugin.crucible_engine_credentials())\n"
        "print('crucible_publish_github.github' in sys.modules, 'urllib.request' in sys.modules)\n"
    )
    shown = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert shown.splitlines() == ["('GITHUB_TOKEN', 'GH_TOKEN')", "False False"]
