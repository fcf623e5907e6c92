"""The `github` publisher: a kept commit pushed to a branch of the forge repository, opened as a draft PR.

Publish-on-keep calls it only after the mediation point admitted the write (on_keep.py). The
credential is the engine's own `GITHUB_TOKEN` (or `GH_TOKEN`); it reaches git through
`GIT_CONFIG_*` variables (never the command line, which other local users can read) and the
REST API through an Authorization header, and never the agent. Where the forge is comes from the
engine's environment, never from the manifest, so a pack cannot send the token elsewhere:
`CRUCIBLE_GITHUB_API` (default https://api.github.com) and `CRUCIBLE_GITHUB_GIT` (default
https://github.com; the remote is `<that>/<owner>/<name>.git`).

git pushes from a git directory the engine made for the push (crucible_world_git.sealed_git), reading
the kept commit from the workspace's objects through alternates: nothing of the workspace's
`.git/config` (an `insteadOf` that would send the token elsewhere, a proxy, a credential helper,
an ssh command, a hook) nor of the user's or the system's configuration takes part.
"""

from __future__ import annotations

import base64
import json
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from crucible_core.api import PublishRequest, RunFailed, run_process
from crucible_publish_github.credentials import TOKEN_ENVS
from crucible_world_git.sealed_git import environment, make_git_dir

API_ENV = "CRUCIBLE_GITHUB_API"
GIT_ENV = "CRUCIBLE_GITHUB_GIT"
DEFAULT_API = "https://api.github.com"
DEFAULT_GIT = "https://github.com"
MAX_REPLY_BYTES = 1024 * 1024
_PASSED_THROUGH = ("SSL_CERT_FILE", "SSL_CERT_DIR")


class PublishFailed(RunFailed):
    """The forge refused or could not be reached; the engine notes it and the run goes on."""


def _token(env: Mapping[str, str]) -> str:
    for name in TOKEN_ENVS:
        if env.get(name):
            return env[name]
    raise PublishFailed(
        "no forge credential: set GITHUB_TOKEN (or GH_TOKEN) in the engine's environment",
        hint="it stays with the engine; [agent].env is not the place for it",
    )


def _git_env(git_dir: Path, env: Mapping[str, str], token: str) -> dict[str, str]:
    basic = base64.b64encode(f"x-access-token:{token}".encode()).decode()
    git_env = environment(git_dir)
    git_env.update({k: env[k] for k in _PASSED_THROUGH if k in env})
    git_env.update(
        {
            "GIT_CONFIG_COUNT": "1",
            "GIT_CONFIG_KEY_0": "http.extraHeader",
            "GIT_CONFIG_VALUE_0": f"Authorization: Basic {basic}",
        }
    )
    return git_env


def _objects_dir(workspace: Path) -> Path:
    from dulwich.errors import NotGitRepository

    from crucible_world_git.engine_repo import open_repo

    try:
        with open_repo(workspace) as repo:
            return Path(repo.object_store.path)
    except (NotGitRepository, OSError) as exc:
        raise PublishFailed(f"cannot read the workspace repository {workspace}: {exc}") from None


class GitHubPublisher:
    def publish(self, request: PublishRequest) -> str:
        token = _token(request.env)
        deadline = time.monotonic() + request.timeout
        self._push(request, token, deadline)
        api = _Api(request, token, deadline)
        found = api.open_pull()
        if found is not None:
            return api.update(found)
        return api.open_draft()

    @staticmethod
    def _push(request: PublishRequest, token: str, deadline: float) -> None:
        """Move the run's branch to the kept commit, leased on the head found there.

        Asks the remote first: a branch already at the commit (a push a kill interrupted after it
        landed) is not pushed again; a branch at a head that is not in the request's lease is
        someone else's and is refused; otherwise one atomic push pins the base and moves the branch
        with --force-with-lease on exactly the head found.
        """
        base = (request.env.get(GIT_ENV) or DEFAULT_GIT).rstrip("/")
        remote = f"{base}/{request.repo}.git"
        head_ref = f"refs/heads/{request.branch}"
        objects = _objects_dir(request.workspace)
        with tempfile.TemporaryDirectory(prefix="crucible-push-") as tmp:
            git_dir = make_git_dir(Path(tmp) / "git", alternates=(objects,))
            env = _git_env(git_dir, request.env, token)
            listed = run_process(
                ["git", "ls-remote", "--heads", remote, head_ref],
                cwd=git_dir,
                env=env,
                timeout=max(deadline - time.monotonic(), 1.0),
            )
            if not listed.ok:
                raise PublishFailed(
                    f"could not read {request.branch} on {request.repo}: {listed.describe_failure()}"
                )
            current = _listed_head(listed.stdout, head_ref)
            if current == request.sha:
                return  # already there: nothing is pushed twice
            if current is not None and current not in request.lease:
                raise PublishFailed(
                    f"{request.branch} on {request.repo} is at {current[:12]}, which this run did not push; "
                    "not overwriting it",
                    hint="delete or rename that branch on the forge, then resume the run",
                )
            refspecs = [f"{request.sha}:{head_ref}"]
            if request.base_sha:
                refspecs.insert(0, f"{request.base_sha}:refs/heads/{request.branch}-base")
            done = run_process(
                [
                    "git",
                    "push",
                    "--quiet",
                    "--no-verify",
                    "--atomic",
                    f"--force-with-lease={head_ref}:{current or ''}",
                    remote,
                    *refspecs,
                ],
                cwd=git_dir,
                env=env,
                timeout=max(deadline - time.monotonic(), 1.0),
            )
        if not done.ok:
            raise PublishFailed(
                f"git push of {request.sha[:12]} to {request.repo} ({request.branch}) failed: "
                f"{done.describe_failure()}"
            )


def _listed_head(listing: str, ref: str) -> str | None:
    for line in listing.splitlines():
        sha, _, name = line.partition("\t")
        if name.strip() == ref:
            return sha.strip()
    return None


class _Api:
    """The REST calls of one publish, sharing its credential and deadline."""

    def __init__(self, request: PublishRequest, token: str, deadline: float) -> None:
        self.request = request
        self.token = token
        self.deadline = deadline
        self.api = (request.env.get(API_ENV) or DEFAULT_API).rstrip("/")

    def open_pull(self) -> int | None:
        """The number of the open pull request from the run's branch, if there is one."""
        owner = self.request.repo.split("/")[0]
        query = urllib.parse.urlencode({"head": f"{owner}:{self.request.branch}", "state": "open"})
        answer = self._call("GET", f"/repos/{self.request.repo}/pulls?{query}", None, "look up")
        if isinstance(answer, list):
            for pull in answer:
                if isinstance(pull, dict) and isinstance(pull.get("number"), int):
                    return int(pull["number"])
        return None

    def update(self, number: int) -> str:
        change = {"title": self.request.title, "body": self.request.body}
        return _url(
            self._call("PATCH", f"/repos/{self.request.repo}/pulls/{number}", change, "update"), self.request
        )

    def open_draft(self) -> str:
        request = self.request
        base = f"{request.branch}-base" if request.base_sha else request.base
        body = {
            "title": request.title,
            "head": request.branch,
            "base": base,
            "body": request.body,
            "draft": True,
        }
        return _url(self._call("POST", f"/repos/{request.repo}/pulls", body, "open"), request)

    def _call(self, method: str, path: str, body: Any, what: str) -> Any:
        call = urllib.request.Request(
            f"{self.api}{path}",
            data=json.dumps(body).encode() if body is not None else None,
            method=method,
            headers={
                "Accept": "application/vnd.github+json",
                "X-GitHub-Api-Version": "2022-11-28",
                "Content-Type": "application/json",
                "User-Agent": "crucible",
            },
        )
        # Unredirected: urllib copies ordinary headers onto a redirect to any origin.
        call.add_unredirected_header("Authorization", f"Bearer {self.token}")
        repo = self.request.repo
        try:
            timeout = max(self.deadline - time.monotonic(), 1.0)
            with urllib.request.urlopen(call, timeout=timeout) as reply:
                return json.loads(reply.read(MAX_REPLY_BYTES))
        except urllib.error.HTTPError as exc:
            detail = exc.read(2000).decode("utf-8", "replace")
            raise PublishFailed(
                f"the forge refused to {what} the draft pull request on {repo} (HTTP {exc.code}): {detail}"
            ) from None
        except (urllib.error.URLError, OSError, ValueError) as exc:
            raise PublishFailed(f"could not {what} the draft pull request on {repo}: {exc}") from None


def _url(answer: Any, request: PublishRequest) -> str:
    url = answer.get("html_url") if isinstance(answer, dict) else None
    if not isinstance(url, str):
        raise PublishFailed(f"the forge's answer for {request.repo} names no pull request URL")
    return url
