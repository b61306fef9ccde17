"""Settings from flags, then SFTL_* environment variables, then defaults; the only reader of the environment."""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

DEFAULT_API_URL = "https://api.github.com"


def _default_home(env: Mapping[str, str]) -> Path:
    data = env.get("XDG_DATA_HOME") or str(Path(env.get("HOME", "~")).expanduser() / ".local" / "share")
    return Path(data) / "sftl"


def _float(env: Mapping[str, str], name: str, default: float, *, positive: bool = False) -> float:
    """A numeric setting; negative, nan and inf values (and 0 where `positive`) are refused (exit 2)."""
    raw = env.get(name)
    if raw is None or raw == "":
        return default
    from sftl.errors import InputError

    try:
        value = float(raw)
    except ValueError:
        raise InputError(f"{name}={raw!r} is not a number") from None
    if not math.isfinite(value) or value < 0 or (positive and value == 0):
        raise InputError(f"{name}={raw!r} must be a {'positive' if positive else 'non-negative'} number")
    return value


@dataclass(frozen=True)
class Settings:
    """Everything configurable. The token is kept out of repr so it never lands in a log."""

    home: Path
    api_url: str = DEFAULT_API_URL
    token: str | None = field(default=None, repr=False)
    offline: bool = False
    http_timeout: float = 30.0  # seconds per request
    max_retries: int = 5
    net_wait: float = 10.0  # seconds spent waiting for a network that refuses connections, per request
    backoff_base: float = 1.0  # seconds; doubled per retry, with jitter
    rate_limit_wait: float = 60.0  # longest we sleep for a primary rate-limit reset
    chromedriver: str | None = None
    chromium: str | None = None
    page_timeout: float = 30.0
    ranker_model: Path | None = None  # a ranker trained with `sftl model fit` (else the bundled one)
    function_model: Path | None = None  # a function ranker trained with `sftl model fit --functions` (else bundled)
    # the parent environment, scrubbed copies of which are handed to child processes
    base_env: Mapping[str, str] = field(default_factory=dict, repr=False)

    @property
    def db_path(self) -> Path:
        return self.home / "sftl.db"

    @property
    def cache_dir(self) -> Path:
        return self.home / "cache"

    def with_overrides(self, **changes: Any) -> Settings:
        return replace(self, **{k: v for k, v in changes.items() if v is not None})

    def child_env(self, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        """An environment for child processes: PATH/locale only, never tokens or secrets."""
        keep = ("PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "PYENV_ROOT", "SYSTEMROOT", "TMPDIR")
        env = {k: v for k, v in self.base_env.items() if k in keep}
        if extra:
            env.update(extra)
        return env


def load_settings(
    env: Mapping[str, str] | None = None,
    *,
    home: str | Path | None = None,
    api_url: str | None = None,
    offline: bool | None = None,
    **overrides: Any,
) -> Settings:
    """Build settings: explicit arguments win over SFTL_* variables, which win over defaults."""
    source: Mapping[str, str] = os.environ if env is None else env
    home_path = Path(home) if home else Path(source["SFTL_HOME"]) if source.get("SFTL_HOME") else _default_home(source)
    home_path = home_path.expanduser()
    if home_path.exists() and not home_path.is_dir():
        from sftl.errors import InputError

        flag = "--home" if home else "SFTL_HOME" if source.get("SFTL_HOME") else "the state directory"
        raise InputError(f"{flag} {home_path} is a file, not a directory (sftl keeps its store and cache there)")
    api_root = (api_url or source.get("SFTL_GITHUB_API_URL") or DEFAULT_API_URL).rstrip("/")
    if not api_root.startswith(("http://", "https://")):
        from sftl.errors import InputError

        raise InputError(f"the GitHub API root {api_root!r} is not an http(s) URL (SFTL_GITHUB_API_URL / --api-url)")
    settings = Settings(
        home=home_path.expanduser(),
        api_url=api_root,
        token=source.get("GITHUB_TOKEN") or source.get("SFTL_GITHUB_TOKEN") or None,
        offline=bool(offline) if offline is not None else source.get("SFTL_OFFLINE", "") in ("1", "true", "yes"),
        http_timeout=_float(source, "SFTL_HTTP_TIMEOUT", 30.0, positive=True),
        max_retries=int(_float(source, "SFTL_MAX_RETRIES", 5)),
        net_wait=_float(source, "SFTL_NET_WAIT", 10.0),
        backoff_base=_float(source, "SFTL_BACKOFF", 1.0),
        rate_limit_wait=_float(source, "SFTL_RATE_LIMIT_WAIT", 60.0),
        chromedriver=source.get("SFTL_CHROMEDRIVER") or None,
        chromium=source.get("SFTL_CHROMIUM") or None,
        page_timeout=_float(source, "SFTL_PAGE_TIMEOUT", 30.0, positive=True),
        ranker_model=Path(source["SFTL_RANKER_MODEL"]) if source.get("SFTL_RANKER_MODEL") else None,
        function_model=Path(source["SFTL_FUNCTION_MODEL"]) if source.get("SFTL_FUNCTION_MODEL") else None,
        base_env=dict(source),
    )
    return settings.with_overrides(**overrides)
