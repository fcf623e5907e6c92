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
import urllib.request
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from crucible_core.api import PublishRequest, RunFailed, run_process
from crucible_world_git.sealed_git import environment, make_git_dir

API_ENV = "CRUCIBLE_GITHUB_API"
GIT_ENV = "CRUCIBLE_GITHUB_GIT"
DEFAULT_API = "https://api.github.com"
DEFAULT_GIT = "https://github.com"
TOKEN_ENVS = ("GITHUB_TOKEN", "GH_TOKEN")
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
        return self._open_draft(request, token, max(deadline - time.monotonic(), 1.0))

    @staticmethod
    def _push(request: PublishRequest, token: str, deadline: float) -> None:
        base = (request.env.get(GIT_ENV) or DEFAULT_GIT).rstrip("/")
        remote = f"{base}/{request.repo}.git"
        refspec = f"{request.sha}:refs/heads/{request.branch}"
        objects = _objects_dir(request.workspace)
        with tempfile.TemporaryDirectory(prefix="crucible-push-") as tmp:
            git_dir = make_git_dir(Path(tmp) / "git", alternates=(objects,))
            done = run_process(
                ["git", "push", "--quiet", "--no-verify", remote, refspec],
                cwd=git_dir,
                env=_git_env(git_dir, request.env, token),
                timeout=max(deadline - time.monotonic(), 1.0),
            )
        if not done.ok:
            raise PublishFailed(
                f"git push of {request.sha[:12]} to {request.repo} ({request.branch}) failed: "
                f"{done.describe_failure()}"
            )

    @staticmethod
    def _open_draft(request: PublishRequest, token: str, timeout: float) -> str:
        api = (request.env.get(API_ENV) or DEFAULT_API).rstrip("/")
        body = {
            "title": request.title,
            "head": request.branch,
            "base": request.base,
            "body": request.body,
            "draft": True,
        }
        call = urllib.request.Request(
            f"{api}/repos/{request.repo}/pulls",
            data=json.dumps(body).encode(),
            method="POST",
            headers={
                "Authorization": f"Bearer {token}",
                "Accept": "application/vnd.github+json",
                "X-GitHub-Api-Version": "2022-11-28",
                "Content-Type": "application/json",
                "User-Agent": "crucible",
            },
        )
        try:
            with urllib.request.urlopen(call, timeout=timeout) as reply:
                answer: Any = json.loads(reply.read(MAX_REPLY_BYTES))
        except urllib.error.HTTPError as exc:
            detail = exc.read(2000).decode("utf-8", "replace")
            raise PublishFailed(
                f"the forge refused the draft pull request on {request.repo} (HTTP {exc.code}): {detail}"
            ) from None
        except (urllib.error.URLError, OSError, ValueError) as exc:
            raise PublishFailed(f"could not open the draft pull request on {request.repo}: {exc}") from None
        url = answer.get("html_url") if isinstance(answer, dict) else None
        if not isinstance(url, str):
            raise PublishFailed(f"the forge's answer for {request.repo} names no pull request URL")
        return url
