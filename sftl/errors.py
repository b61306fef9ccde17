"""One exception tree for everything sftl raises on purpose.

    SftlError                 base; the CLI prints its message on one line
    ├── InputError            a bad target, file, flag or label line (exit 2)
    ├── GitHubError           transport / API failures (exit 3)
    │   ├── NotFoundError     404, or a pull request where an issue was asked for
    │   ├── AuthError         401 / 403 bad or missing token
    │   ├── RateLimitError    primary or secondary rate limit beyond the wait budget
    │   └── OfflineMissError  --offline and the answer is not in the store/cache
    ├── BrowserError          the Selenium crawler failed (exit 3)
    ├── StoreError            the SQLite store is unreadable or locked (exit 4)
    ├── SourceError           a framework source tree / wheel cannot be had (exit 5)
    ├── EnvError              no matching replay environment / backend (exit 6)
    └── SandboxError          the sandbox itself could not be set up (exit 7)
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


class RateLimitError(GitHubError):
    pass


class OfflineMissError(GitHubError):
    pass


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
