"""One exception tree for everything sftl raises on purpose, and the exit code each one means.

    SftlError                 base; the CLI prints its message on one line
    ├── InputError            a bad target, file, flag, setting or label line (exit 2)
    ├── GitHubError           transport / API failures (exit 3)
    │   ├── NotFoundError     404, or a pull request where an issue was asked for
    │   │   └── IssueGoneError      the issue to comment on was deleted (410) or is not there (404) (exit 11)
    │   ├── AuthError         401 / 403 bad or missing token
    │   │   └── WriteAccessError    no token, or one that cannot write issues (401 / 403) (exit 9)
    │   ├── RateLimitError    primary or secondary rate limit beyond the wait budget
    │   ├── OfflineMissError  --offline and the answer is not in the store/cache
    │   ├── LockedIssueError  the issue is locked: GitHub takes no comment on it (exit 10)
    │   └── RejectedWriteError  GitHub refused the comment or label as invalid (422) (exit 12)
    ├── BrowserError          the Selenium crawler failed (exit 3)
    ├── StoreError            the SQLite store is unreadable or locked (exit 4)
    ├── SourceError           a framework source tree / wheel cannot be had (exit 5)
    ├── EnvError              no matching replay environment / backend (exit 6)
    ├── SandboxError          the sandbox itself could not be set up (exit 7)
    │   └── ConfinementError  this machine cannot confine report code, and --unconfined was not given
    └── NoResultError         the command ran but had nothing to give (exit 8)

Exit codes, the same for every command (the CLI's epilog and the README repeat this table):

    0    done: an answer was given (located, abstained with its reason, replayed, imported, ...)
    1    internal error: a bug in sftl (one line; --debug shows the traceback)
    2    bad input: a target, file, option, setting or label line refused before any work
         (argparse's usage errors too); an unknown framework or a missing directory is bad input
         wherever it is named
    3    GitHub (or the issue-page browser) could not answer: network down, 404, auth, rate limit
    4    the store cannot be opened, read or written
    5    framework sources cannot be had (no wheel, no archive, an unreadable tree)
    6    no replay environment matches, or its backend is missing
    7    no sandbox: report code never runs unconfined. The line names what this machine cannot give
         (no network, read-only filesystem, hidden environment, process or memory cap) and the one
         command that provides it; --unconfined runs it anyway, recorded in the replay and report
    8    nothing to give: the command ran and found nothing to do or say (an issue skipped as neither
         MME nor GCRDE, no snippet to replay or bisect, no stored issues to screen or triage)
    9    sftl comment --post / --apply-labels: no GITHUB_TOKEN, or a token that cannot write issues
         (401 / 403; a workflow needs `permissions: issues: write`); nothing was written
    10   sftl comment --post: the issue is locked; nothing was written
    11   sftl comment: the issue was deleted (410) or is not there (404); nothing was written
    12   sftl comment: GitHub refused the comment or a label as invalid (422); nothing else was written
         (a rate limit or a 5xx answer that outlasts the retries is exit 3, nothing written either)
    130  interrupted (Ctrl-C); what was stored so far is kept
"""

from __future__ import annotations


class SftlError(Exception):
    """Base of every error sftl raises deliberately."""

    exit_code = 1


class InputError(SftlError):
    exit_code = 2


class GitHubError(SftlError):
    exit_code = 3


class NotFoundError(GitHubError):
    pass


class AuthError(GitHubError):
    pass


class WriteAccessError(AuthError):
    """A write (a comment, a label) needs a token with write access to the repository's issues."""

    exit_code = 9


class IssueGoneError(NotFoundError):
    """The issue a comment was meant for was deleted (410) or does not exist (404)."""

    exit_code = 11


class RateLimitError(GitHubError):
    pass


class OfflineMissError(GitHubError):
    pass


class LockedIssueError(GitHubError):
    """The issue is locked: GitHub takes comments on it from collaborators only, and sftl posts none."""

    exit_code = 10


class RejectedWriteError(GitHubError):
    """GitHub answered 422: the comment or label was refused as invalid (too long, a bad label name)."""

    exit_code = 12


class BrowserError(SftlError):
    exit_code = 3


class StoreError(SftlError):
    exit_code = 4


class SourceError(SftlError):
    exit_code = 5


class EnvError(SftlError):
    exit_code = 6


class SandboxError(SftlError):
    exit_code = 7


class ConfinementError(SandboxError):
    """Report code would run without a guard this machine cannot give (`sftl doctor` lists them)."""


class NoResultError(SftlError):
    exit_code = 8


EXIT_CODES: dict[int, str] = {
    0: "done",
    1: "internal error (a bug; --debug shows the traceback)",
    2: "bad input (target, file, option, setting, label line)",
    3: "GitHub or the browser could not answer",
    4: "the store cannot be used",
    5: "framework sources cannot be had",
    6: "no replay environment",
    7: "no sandbox (report code is never run unconfined)",
    8: "nothing to give (skipped, no snippet, nothing stored)",
    9: "no token, or one that cannot write issues (sftl comment --post)",
    10: "the issue is locked (sftl comment --post)",
    11: "the issue was deleted or is not there (sftl comment)",
    12: "GitHub refused the comment or a label as invalid (422)",
    130: "interrupted; what was stored is kept",
}
