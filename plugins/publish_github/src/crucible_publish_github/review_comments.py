"""A pull request's comments read from GitHub's REST API: the conversation and the review channels, every page.

`crucible watch-pr` reads them; the forge is whatever the engine's environment names
(`CRUCIBLE_GITHUB_API`, else `GITHUB_API_URL`, else https://api.github.com) and the token is
`GITHUB_TOKEN` (or `GH_TOKEN`), sent in an Authorization header only. What the forge answers is
hostile input: every page is bounded, every comment is checked for shape, and neither a page's
`Link` nor a redirect is followed off the API's own origin, so the token never travels elsewhere.
"""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping
from typing import Any
from urllib.parse import urlsplit

import attrs

from crucible_core.api import CrucibleError, ExitCode, UsageError, plain
from crucible_publish_github.credentials import TOKEN_ENVS
from crucible_publish_github.github import API_ENV, DEFAULT_API

# The publisher's own variable first (one forge for publishing and watching), then the one
# GitHub Actions and the gh CLI set.
API_ENVS = (API_ENV, "GITHUB_API_URL")
PER_PAGE = 100
MAX_PAGES = 50  # 5,000 comments per channel and pull request; beyond that the forge is not a review
MAX_PAGE_BYTES = 8 * 1024 * 1024  # 100 comments of GitHub's 65,536-character maximum fit
REQUEST_SECONDS = 30.0
_NAME = re.compile(r"(?!\.\.?$)[A-Za-z0-9._-]{1,100}")  # a path segment, never . or ..
_PULL_PATH = re.compile(r"/([^/]+)/([^/]+)/(?:pull|pulls|issues)/(\d{1,12})(?:[/#?].*)?")
_SHORT = re.compile(r"([^/\s]+)/([^#\s]+)#(\d{1,12})")
_NEXT = re.compile(r'<([^>]*)>\s*;\s*rel="?next"?')
# The review channel's comments are on the diff; the conversation channel's on the pull
# request as an issue. GitHub numbers the two kinds apart, so a key names the channel.
CHANNELS = {"conversation": "issues", "review": "pulls"}


class ForgeError(CrucibleError):
    """The forge could not be reached or refused a read; `lasting` when asking again cannot help."""

    exit_code = ExitCode.REMOTE

    def __init__(self, message: str, *, hint: str | None = None, lasting: bool = False) -> None:
        super().__init__(message, hint=hint)
        self.lasting = lasting


@attrs.frozen
class PullRef:
    owner: str
    repo: str
    number: int

    def __str__(self) -> str:
        return f"{self.owner}/{self.repo}#{self.number}"


def parse_pull_ref(text: str) -> PullRef:
    """`https://<host>/OWNER/REPO/pull/N` (anything after N ignored) or `OWNER/REPO#N`; UsageError otherwise."""
    text = text.strip()
    split = urlsplit(text)
    found = _PULL_PATH.fullmatch(split.path) if split.scheme in ("http", "https") else _SHORT.fullmatch(text)
    owner, repo, number = found.groups() if found is not None else ("", "", "0")
    repo = repo.removesuffix(".git")
    if not (_NAME.fullmatch(owner) and _NAME.fullmatch(repo)):
        raise UsageError(
            f"--pr {text[:200]!r} is not a pull request",
            hint="give its URL, https://github.com/OWNER/REPO/pull/N, or OWNER/REPO#N",
        )
    return PullRef(owner, repo, int(number))


@attrs.frozen
class Comment:
    id: int
    channel: str  # "conversation" or "review"
    login: str  # "" when the forge named no author (a deleted account)
    association: str  # GitHub's own word for the author's standing in the repository
    body: str


def comment_from(raw: Any, channel: str) -> Comment | None:
    """One comment as the forge sent it, or None when it has no usable id (never acted on)."""
    if not isinstance(raw, dict):
        return None
    id_ = raw.get("id")
    if isinstance(id_, bool) or not isinstance(id_, int) or not 0 < id_ < 2**63:
        return None
    user = raw.get("user")
    login = user.get("login") if isinstance(user, dict) else None
    association = raw.get("author_association")
    body = raw.get("body")
    return Comment(
        id=id_,
        channel=channel,
        login=login if isinstance(login, str) else "",
        association=association if isinstance(association, str) else "",
        body=body if isinstance(body, str) else "",
    )


def api_base(env: Mapping[str, str]) -> str:
    for name in API_ENVS:
        if env.get(name):
            return env[name].rstrip("/")
    return DEFAULT_API


def _origin(url: str) -> tuple[str, str]:
    split = urlsplit(url)
    return split.scheme.lower(), split.netloc.lower()


class _SameOriginRedirects(urllib.request.HTTPRedirectHandler):
    """Follows a redirect only within the API's origin: urllib would carry the token anywhere."""

    def __init__(self, origin: tuple[str, str]) -> None:
        self.origin = origin

    def redirect_request(self, req: Any, fp: Any, code: int, msg: str, headers: Any, newurl: str) -> Any:
        if _origin(newurl) != self.origin:
            raise ForgeError(
                f"the forge redirected to another site ({plain(newurl)[:200]}); not followed",
                hint=f"point {API_ENV} at the forge's API itself",
                lasting=True,
            )
        return super().redirect_request(req, fp, code, msg, headers, newurl)


class Forge:
    """The comments of pull requests, read with the engine's token from the engine's forge."""

    def __init__(self, env: Mapping[str, str]) -> None:
        self.base = api_base(env)
        self.token = next((env[name] for name in TOKEN_ENVS if env.get(name)), None)
        self._opener = urllib.request.build_opener(_SameOriginRedirects(_origin(self.base)))

    def comments(self, pull: PullRef) -> list[Comment]:
        """Every comment of both channels, oldest first within each; ForgeError when a read fails."""
        found: list[Comment] = []
        for channel, collection in CHANNELS.items():
            path = f"/repos/{pull.owner}/{pull.repo}/{collection}/{pull.number}/comments"
            for page in self._pages(f"{self.base}{path}?per_page={PER_PAGE}", pull):
                found.extend(c for raw in page if (c := comment_from(raw, channel)) is not None)
        return found

    def _pages(self, url: str, pull: PullRef) -> Iterator[list[Any]]:
        base = urlsplit(self.base)
        for _ in range(MAX_PAGES):
            answer, link = self._get(url, pull)
            if not isinstance(answer, list):
                raise ForgeError(f"the forge's answer for {pull} is not a list of comments", lasting=True)
            yield answer
            found = _NEXT.search(link or "")
            if found is None:
                return
            url = found.group(1)
            # a page link is the forge's word too: followed only within the API, or the token leaks
            if _origin(url) != _origin(self.base) or not urlsplit(url).path.startswith(base.path):
                raise ForgeError(
                    f"the forge's next page for {pull} points outside {self.base}; not followed",
                    lasting=True,
                )
        raise ForgeError(f"{pull} has more than {MAX_PAGES * PER_PAGE} comments in one channel", lasting=True)

    def _get(self, url: str, pull: PullRef) -> tuple[Any, str | None]:
        headers = {
            "Accept": "application/vnd.github+json",
            "X-GitHub-Api-Version": "2022-11-28",
            "User-Agent": "crucible",
        }
        if self.token is not None:
            headers["Authorization"] = f"Bearer {self.token}"
        request = urllib.request.Request(url, headers=headers, method="GET")
        try:
            with self._opener.open(request, timeout=REQUEST_SECONDS) as reply:
                data = reply.read(MAX_PAGE_BYTES + 1)
                link = reply.headers.get("link")
        except urllib.error.HTTPError as exc:
            detail = plain(exc.read(300).decode("utf-8", "replace"))
            # 429 and the 5xx pass; any other refusal (no access, no such pull request) stays
            lasting = exc.code < 500 and exc.code != 429
            raise ForgeError(
                f"the forge refused reading the comments of {pull} (HTTP {exc.code}): {detail}",
                hint="check the URL and that GITHUB_TOKEN (or GH_TOKEN) may read the repository"
                if lasting
                else None,
                lasting=lasting,
            ) from None
        except (urllib.error.URLError, OSError) as exc:
            raise ForgeError(f"could not reach the forge at {self.base} for {pull}: {exc}") from None
        if len(data) > MAX_PAGE_BYTES:
            raise ForgeError(
                f"a page of {pull}'s comments is larger than {MAX_PAGE_BYTES} bytes", lasting=True
            )
        try:
            return json.loads(data), link
        except ValueError:
            raise ForgeError(f"the forge's answer for {pull} is not JSON", lasting=True) from None
