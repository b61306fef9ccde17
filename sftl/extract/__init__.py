"""Pure text parsing of a bug report: code snippet, traceback, error line, environment and API calls.

The package by what it reads: `text` (readable text, prose and code segments), `tracebacks` (frames, chains,
the error line), `snippets` (code blocks classified, the snippet to run), `environment` (framework, version,
Python, CUDA/cuDNN, OS, GPU), `apis` (the framework calls of the snippet); the stage itself (`extract`,
`extract_text`) composes them here and never raises.
"""

from __future__ import annotations

import re

from sftl.extract.apis import apis_regex, extract_apis
from sftl.extract.environment import framework_from, parse_environment
from sftl.extract.snippets import choose_snippet, classify_block, code_blocks, doctest_to_script
from sftl.extract.text import MAX_CHARS, Segment, clean_text, non_english, segments
from sftl.extract.tracebacks import find_error_line, map_frame_path, parse_tracebacks, stops_at_import
from sftl.model import Environment, Extraction, Issue

__all__ = [
    "MAX_CHARS", "Segment", "choose_snippet", "classify_block", "code_blocks", "doctest_to_script", "extract",
    "extract_apis", "extract_text", "find_error_line", "framework_from", "map_frame_path", "parse_environment",
    "parse_tracebacks", "segments", "stops_at_import",
]

# --------------------------------------------------------------------------------------------
# the stage
# --------------------------------------------------------------------------------------------


def extract_text(title: str, body: str, repo: str = "") -> Extraction:
    """Read a report given as title and body; never raises, `problems` says what could not be read."""
    problems: list[str] = []
    try:
        return _extract(title, body, repo, problems)
    except Exception as exc:  # a parser bug must not take a batch down; say so instead
        problems.append(f"extraction failed: {type(exc).__name__}: {exc}")
        return Extraction(None, None, Environment(missing=("framework", "version", "python", "cuda", "cudnn", "os", "gpu")),
                          problems=tuple(problems))


def extract(issue: Issue) -> Extraction:
    """Read one issue (title, body and the reporter's follow-up comments)."""
    body = issue.body if isinstance(issue.body, str) else ""
    author_comments = [c.body for c in issue.comments if issue.author and c.author == issue.author and c.body]
    if author_comments:
        body = body + "\n\n" + "\n\n".join(author_comments)
    return extract_text(issue.title, body, issue.repo)


def _extract(title: object, body: object, repo: str, problems: list[str]) -> Extraction:
    title_s = clean_text(title, "title", problems).replace("\n", " ")
    body_s = clean_text(body, "body", problems)
    if not body_s.strip():
        problems.append("the body is empty")
    elif non_english(title_s + " " + " ".join(g.text for g in segments(body_s) if g.source == "prose")):
        problems.append("most of the text is not English; only code, errors and versions were read")
    blocks = code_blocks(body_s) if body_s else []
    snippet = choose_snippet(blocks)
    if snippet is None or not snippet.code:
        problems.append("no runnable Python snippet")
    tbs = parse_tracebacks(body_s) if body_s else []
    traceback = tbs[-1] if tbs else None
    error_line = find_error_line(body_s, tbs) or find_error_line(title_s, [])
    code = snippet.code if snippet else ""
    framework = framework_from(repo, code, f"{title_s}\n{body_s}")
    env = parse_environment(f"{title_s}\n{body_s}", framework)
    if len(code) > 200_000:  # a pasted dump, not a repro: read its calls by pattern
        problems.append(f"the snippet is {len(code)} characters; its API calls were read by pattern")
        apis = apis_regex(code[:200_000])
    else:
        apis = extract_apis(code, env.framework) if code else ()
    if not apis:
        inline = " ".join(re.findall(r"`([^`\n]+)`", body_s))
        apis = apis_regex(f"{title_s} {inline} {body_s}", env.framework)
    return Extraction(snippet, traceback, env, error_line, apis, tuple(problems))

