"""A loopback stand-in for the part of GitHub's REST API crucible talks to: issues, pulls, comments.

Only the GitHub service is faked: clients reach it over real HTTP on 127.0.0.1 through their own
code (urllib or whatever the plugin uses), with GitHub's paths, JSON shapes, status codes and
`Authorization` header. Every request is recorded (method, path, query, auth, body) so a test can
assert what reached the forge and how often. State lives in plain dicts a test may seed or read.

Shapes follow GitHub's REST v3 (2022-11-28): an issue has `number`, `title`, `body`, `html_url`,
`user.login`; a pull request adds `head.ref`, `head.sha`, `base.ref`, `draft`, `state`; comments
have `id`, `body`, `user.login`, `created_at`, `html_url`. Lists honour `per_page` and `page`
and send a `Link: <...>; rel="next"` header when more remain, as GitHub does.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

import attrs


@attrs.define
class Recorded:
    method: str
    path: str
    query: dict[str, list[str]]
    auth: str | None
    body: Any


@attrs.define
class FakeGitHub:
    """The forge's state; `url` is the API base (what GITHUB_API_URL or CRUCIBLE_GITHUB_API name)."""

    url: str = ""
    requests: list[Recorded] = attrs.field(factory=list)
    # (owner/repo, number) -> issue or pull request (GitHub numbers both from one sequence)
    issues: dict[tuple[str, int], dict[str, Any]] = attrs.field(factory=dict)
    pulls: dict[tuple[str, int], dict[str, Any]] = attrs.field(factory=dict)
    # (owner/repo, number) -> conversation comments (issue comments, also on a PR)
    issue_comments: dict[tuple[str, int], list[dict[str, Any]]] = attrs.field(factory=dict)
    # (owner/repo, number) -> review comments on a PR's diff
    review_comments: dict[tuple[str, int], list[dict[str, Any]]] = attrs.field(factory=dict)
    # a status code to answer every request with, for tests of a failing forge (None: behave)
    fail_with: int | None = None
    _next_number: int = 1
    _next_comment: int = 1000
    lock: threading.Lock = attrs.field(factory=threading.Lock)

    # -- seeding ------------------------------------------------------------------------------

    def add_issue(self, repo: str, title: str, body: str, *, user: str = "reporter") -> int:
        with self.lock:
            number = self._take_number()
            self.issues[(repo, number)] = {
                "number": number,
                "title": title,
                "body": body,
                "state": "open",
                "user": {"login": user},
                "html_url": f"https://github.test/{repo}/issues/{number}",
            }
            return number

    def add_comment(self, repo: str, number: int, body: str, *, user: str, review: bool = False) -> int:
        """A comment on an issue or PR conversation (or, with review=True, on a PR's diff)."""
        with self.lock:
            comment_id = self._next_comment
            self._next_comment += 1
            table = self.review_comments if review else self.issue_comments
            table.setdefault((repo, number), []).append(
                {
                    "id": comment_id,
                    "body": body,
                    "user": {"login": user},
                    "created_at": f"2026-12-01T00:{len(self.requests) % 60:02d}:00Z",
                    "html_url": f"https://github.test/{repo}/pull/{number}#comment-{comment_id}",
                }
            )
            return comment_id

    def _take_number(self) -> int:
        number = self._next_number
        self._next_number += 1
        return number

    def calls(self, method: str, path_prefix: str = "") -> list[Recorded]:
        return [r for r in self.requests if r.method == method and r.path.startswith(path_prefix)]

    # -- the REST surface -----------------------------------------------------------------------

    def answer(self, method: str, path: str, query: dict[str, list[str]], body: Any) -> tuple[int, Any]:
        parts = path.strip("/").split("/")
        if len(parts) < 3 or parts[0] != "repos":
            return 404, {"message": "Not Found"}
        repo = f"{parts[1]}/{parts[2]}"
        rest = parts[3:]
        with self.lock:
            if rest == ["pulls"] and method == "POST":
                return self._open_pull(repo, body)
            if rest == ["pulls"] and method == "GET":
                found = [p for (r, _), p in sorted(self.pulls.items()) if r == repo]
                head = query.get("head", [""])[0]
                if head:
                    found = [p for p in found if f"{repo.split('/')[0]}:{p['head']['ref']}" == head]
                state = query.get("state", ["open"])[0]
                if state != "all":
                    found = [p for p in found if p["state"] == state]
                return 200, found
            if len(rest) == 2 and rest[0] == "pulls" and rest[1].isdigit():
                key = (repo, int(rest[1]))
                if key not in self.pulls:
                    return 404, {"message": "Not Found"}
                if method == "PATCH":
                    for field in ("title", "body", "state", "base"):
                        if isinstance(body, dict) and field in body:
                            self.pulls[key][field] = body[field]
                return 200, self.pulls[key]
            if len(rest) == 2 and rest[0] == "issues" and rest[1].isdigit():
                key = (repo, int(rest[1]))
                found = self.issues.get(key) or self.pulls.get(key)
                return (200, found) if found else (404, {"message": "Not Found"})
            if len(rest) == 3 and rest[0] in ("issues", "pulls") and rest[2] == "comments":
                key = (repo, int(rest[1]))
                table = self.issue_comments if rest[0] == "issues" else self.review_comments
                if method == "POST":
                    comment_id = self._next_comment
                    self._next_comment += 1
                    text = body.get("body", "") if isinstance(body, dict) else ""
                    table.setdefault(key, []).append(
                        {"id": comment_id, "body": text, "user": {"login": "crucible-bot"}}
                    )
                    return 201, table[key][-1]
                return 200, list(table.get(key, []))
        return 404, {"message": "Not Found"}

    def _open_pull(self, repo: str, body: Any) -> tuple[int, Any]:
        if not isinstance(body, dict) or not body.get("head") or not body.get("base"):
            return 422, {"message": "Validation Failed"}
        for pull in self.pulls.values():
            if pull["head"]["ref"] == body["head"] and pull["state"] == "open" and pull["repo"] == repo:
                return 422, {
                    "message": "Validation Failed",
                    "errors": [{"message": "A pull request already exists"}],
                }
        number = self._take_number()
        pull = {
            "number": number,
            "repo": repo,
            "title": body.get("title", ""),
            "body": body.get("body", ""),
            "draft": bool(body.get("draft")),
            "state": "open",
            "head": {"ref": body["head"]},
            "base": {"ref": body["base"]},
            "html_url": f"https://github.test/{repo}/pull/{number}",
            "user": {"login": "crucible-bot"},
        }
        self.pulls[(repo, number)] = pull
        return 201, pull


def _page(items: list[Any], query: dict[str, list[str]]) -> tuple[list[Any], bool]:
    per_page = int(query.get("per_page", ["30"])[0])
    page = int(query.get("page", ["1"])[0])
    start = (page - 1) * per_page
    return items[start : start + per_page], start + per_page < len(items)


@contextmanager
def serve_github(forge: FakeGitHub | None = None) -> Iterator[FakeGitHub]:
    """Serve `forge` (a new one by default) on 127.0.0.1 for the duration of the block."""
    state = forge or FakeGitHub()

    class Handler(BaseHTTPRequestHandler):
        def _handle(self, method: str) -> None:
            split = urlsplit(self.path)
            query = parse_qs(split.query)
            length = int(self.headers.get("content-length") or 0)
            raw = self.rfile.read(length) if length else b""
            try:
                body: Any = json.loads(raw) if raw else None
            except ValueError:
                body = None
            state.requests.append(
                Recorded(method, split.path, query, self.headers.get("authorization"), body)
            )
            if state.fail_with is not None:
                status, answer = state.fail_with, {"message": "forge unavailable"}
            else:
                status, answer = state.answer(method, split.path, query, body)
            more = False
            if isinstance(answer, list):
                answer, more = _page(answer, query)
            data = json.dumps(answer).encode()
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            if more:
                page = int(query.get("page", ["1"])[0]) + 1
                per_page = query.get("per_page", ["30"])[0]
                self.send_header(
                    "link", f'<{state.url}{split.path}?per_page={per_page}&page={page}>; rel="next"'
                )
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            self._handle("GET")

        def do_POST(self) -> None:
            self._handle("POST")

        def do_PATCH(self) -> None:
            self._handle("PATCH")

        def log_message(self, *_args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    state.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
