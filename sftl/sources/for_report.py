"""The sources for one report: which release it needs (its version as written, else the one current when it was filed) and the provider of that release's files, with a note saying why.

`sources_for_report` is the one call: `sftl.pipeline.locate`, `sftl eval` and the benches ask it, and
nothing else decides which tree a report is read from. Its fallbacks, in order: a `--source-root`; the
version as written, read by `sftl.releases`; the cache, the release's archive, the installed package, the
release current on the filing date (`_open_release_source`); for a discrepancy, the nearest other
release's C++ (`with_nearest_kernels`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from sftl.errors import SftlError, SourceError
from sftl.model import Extraction
from sftl.releases import read_spelling, resolve
from sftl.sources import holds_kernel_sources, open_local_tree, open_source, release_at, with_nearest_kernels
from sftl.sources.providers import SitePackages, SourceProvider

if TYPE_CHECKING:
    from sftl.config import Settings


@dataclass(frozen=True)
class ReportSources:
    """The framework's sources at a report's release (`provider`), or None; `note` says which were read and
    why, or why none could be ("" when the report's own release was read as it names it)."""

    provider: SourceProvider | None
    note: str


def sources_for_report(
    extraction: Extraction,
    settings: Settings,
    *,
    source_root: str | Path | None = None,
    offline: bool = False,
    needs_cxx: bool = False,
    created_at: str | None = None,
) -> ReportSources:
    """The framework's sources at the report's release, with a note; no provider, and why not, when none.

    As `_open_release_source` picks them (after the version as written is read: `_read_version_text`; when
    that release's sources are not at hand, as if it were unread); for a discrepancy (`needs_cxx`) whose pick
    holds no C++ kernels (a wheel, the installed release), the C++ of the nearest registered tree or cached
    archive of another release is layered under the pick's own Python files, and the note names that
    release; when none exists the note names the one command that fetches the right one. `offline`, or
    `settings.offline`: nothing is downloaded. `created_at`: when the report was filed.
    """
    offline = offline or settings.offline
    read_as = ""
    as_written = extraction
    if source_root is None:
        extraction, created_at, read_as = _read_version_text(extraction, created_at)
    source, why = _open_release_source(extraction, settings, source_root, offline, needs_cxx, created_at)
    if source is None and extraction is not as_written:  # that release's sources are not at hand: as if unread
        source, fallback = _open_release_source(as_written, settings, source_root, offline, needs_cxx, created_at)
        why = fallback if source is not None else why
    why = "; ".join(x for x in (read_as, why) if x)
    if source is None or not needs_cxx or source_root is not None:
        return ReportSources(source, why)
    version = extraction.environment.version
    release = _base_version(version) if version and re.match(r"\d+\.\d+", version) else None
    release = release or _base_version(getattr(source, "installed_version", None) or source.version)
    # what `sftl sources fetch` reads online: the report's version, else the default branch when it was filed
    fetch = version or (f"main ({created_at[:10]})" if created_at else release)
    try:
        source, note = with_nearest_kernels(source, settings, release, fetch)
    except SftlError as exc:  # an unreadable stand-in only loses the fallback
        note = f"no other release's C++ sources could be read: {exc}"
    why = "; ".join(x for x in (why, note) if x)
    if source.framework == "pytorch" and not holds_kernel_sources(source):
        # nothing to rank a PyTorch kernel from: skip, saying what fetches the right sources
        # (TensorFlow's localizer still reads names and headers)
        return ReportSources(None, why)
    return ReportSources(source, why)


def _base_version(version: str | None) -> str | None:
    """'2.13.0+cpu' -> '2.13.0'; '2.21' -> '2.21.0' (a release named without its patch level)."""
    if not version:
        return None
    base = version.split("+", 1)[0].strip().lstrip("vV")
    parts = base.split(".")
    if len(parts) == 2 and all(p.isdigit() for p in parts):
        base += ".0"
    return base


def _read_version_text(extraction: Extraction, created_at: str | None) -> tuple[Extraction, str | None, str]:
    """The template's version as written (`Environment.version_text`) read by `sftl.releases`: a line
    ('1.4/1.5 era' -> the line it resolves to), a major line with a date ('TF 1.x (2018)' -> the release
    out then), a development branch's date ('master (Dec 2018)', earlier than the filing date); returns
    the extraction with that version, the date to read a versionless report at, and a note."""
    env = extraction.environment
    text, framework = env.version_text, env.framework or _framework_from_frames(extraction)
    if not text or framework is None:
        return extraction, created_at, ""
    try:
        spelling = read_spelling(framework, text)
    except SourceError:
        return extraction, created_at, ""
    if spelling.until and (created_at is None or spelling.until < created_at):
        created_at = spelling.until  # the date the version names, when earlier than the filing
    if spelling.kind == "development" and env.version is None and spelling.until:
        return extraction, created_at, f"version {text!r}: the development branch on {spelling.until[:10]}"
    if spelling.kind not in ("minor", "major") or (env.version is not None and spelling.earlier is None):
        return extraction, created_at, ""  # a number read already stands, unless the text names two lines
    try:
        res = resolve(framework, text, None, created_at=created_at, offline=True)
    except SourceError:
        return extraction, created_at, ""
    version = res.series if spelling.kind == "minor" else res.version
    if not version or version == env.version:
        return extraction, created_at, ""
    new_env = replace(env, version=version)
    return replace(extraction, environment=new_env), created_at, f"version read as {version}: {res.reason}"


def _open_release_source(
    extraction: Extraction,
    settings: Settings,
    source_root: str | Path | None,
    offline: bool,
    needs_cxx: bool = False,
    created_at: str | None = None,
) -> tuple[SourceProvider | None, str]:
    """The framework's sources at the report's release: (provider, a note) or (None, why not).

    Order: an explicit `--source-root`; the installed framework when it is that very release (no
    download) -- after the cache and, online, the release's archive when C++ kernels are needed,
    which wheels lack; else `sftl.sources.open_source` (registered tree, cached archive, cached
    wheel for Python files, the archive downloaded; never a wheel). A report naming no version is read at the
    commit current when it was filed (online: the commits API, then that commit's archive), else
    the release current then (`created_at`), when sftl knows that release and its sources are
    available; else at the installed release, and the note says which.
    """
    env = extraction.environment
    framework = env.framework or _framework_from_frames(extraction)
    if framework is None:
        return None, "the report does not say which framework it is about"
    version = env.version
    if version is None and created_at and source_root is None:
        try:  # the commit current on the default branch when the report was filed (offline: if looked up before)
            found: SourceProvider | None = open_source(
                framework, None, settings, created_at=created_at, needs_cxx=needs_cxx, offline=offline)
        except SftlError:
            found = None  # no lookup or no archive: the release current then, as below
        if found is not None and (not offline or getattr(found, "ref", None)):
            return found, _read_note(found)
    if version is None and created_at and source_root is None:
        dated = _release_when_filed(framework, created_at)
        installed = _installed(framework)
        if dated is not None and installed is not None and _base_version(
            getattr(installed, "installed_version", None)
        ) == _base_version(dated) and not needs_cxx:
            return installed, f"the report names no {framework} version; read the installed {dated}, current when it was filed"
        if dated is not None:
            try:
                provider = open_source(framework, dated, settings, offline=offline)
            except SftlError as exc:
                note = f"the report names no {framework} version; {dated} was current when it was filed, but {exc}"
            else:
                return provider, f"the report names no {framework} version; read {dated}, the release current when it was filed"
            if installed is None:
                return None, note
            return installed, f"{note}; read the installed {_base_version(getattr(installed, 'installed_version', None))}"
    if source_root is not None:
        try:
            return open_local_tree(source_root, framework, version, cache_dir=settings.cache_dir), ""
        except SftlError as exc:
            return None, str(exc)
    fetch_problem = ""
    if needs_cxx and version:
        try:  # the cache only: a C++ tree fetched earlier beats the installed wheel's headers
            provider = open_source(framework, version, settings, offline=True, needs_cxx=True)
            return provider, _read_note(provider)
        except SftlError:
            pass
        if not offline:  # online: the release's archive (its kernels), before the installed wheel's headers
            try:
                provider = open_source(framework, version, settings, offline=False, needs_cxx=True)
                return provider, _read_note(provider)
            except SftlError as exc:
                fetch_problem = str(exc)
    installed = _installed(framework)
    if installed is not None:
        have = _base_version(getattr(installed, "installed_version", None))
        if version is None and have:
            note = f"the report names no {framework} version; read the installed {have}"
            return installed, note
        if have and _base_version(version) == have:
            return installed, fetch_problem
    if version is None:
        return None, f"the report names no {framework} version and none is installed"
    if fetch_problem:
        return None, fetch_problem
    try:
        provider = open_source(framework, version, settings, offline=offline, needs_cxx=needs_cxx)
        return provider, _read_note(provider)
    except SftlError as exc:
        return None, str(exc)


def _read_note(provider: SourceProvider) -> str:
    """For the report: which release archive was read and why (a version spelling read as a ref)."""
    return f"read {provider.description}" if getattr(provider, "ref", None) else ""


def _release_when_filed(framework: str, created_at: str) -> str | None:
    """The release current on the report's date (None past sftl's release table: no guess)."""
    try:
        return release_at(framework, created_at)
    except (KeyError, ValueError):
        return None


def _framework_from_frames(extraction: Extraction) -> str | None:
    """The framework whose files the traceback runs through, when the text never names it."""
    tb = extraction.traceback
    for frame in tb.frames if tb else ():
        top = (frame.repo_path or "").split("/", 1)[0]
        if top in ("torch", "torchgen", "functorch"):
            return "pytorch"
        if top in ("tensorflow", "tensorflow_core"):
            return "tensorflow"
    return None


def _installed(framework: str) -> SourceProvider | None:
    """The framework installed beside sftl, as a provider; None when it is not installed."""
    try:
        provider: SourceProvider = SitePackages(framework)
    except SftlError:
        return None
    return provider
