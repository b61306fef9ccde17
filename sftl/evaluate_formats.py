"""Labelled rows from the formats peer benchmarks publish: sftl's JSONL, Denchmark's per-issue JSON folders,
SWE-bench-style JSONL, and report rows (title, body, truth files) — each turned into sftl's label line.

A label line is sftl's own format (`sftl.evaluate.parse_label_line`): url, category (null: unlabelled, screened
by sftl), truth_files, an inline GitHub issue object (so no network is needed), framework and version. Reading
is pure apart from listing and reading the files named; a row that cannot be read is a skipped line with the
reason, never an exception.
"""

from __future__ import annotations

import json
import re
import zlib
from pathlib import Path
from typing import Any

from sftl.errors import InputError

FORMATS = ("sftl", "denchmark", "swebench", "rows")
ISSUE_URL = re.compile(r"https?://github\.com/([\w.-]+)/([\w.-]+)/issues/(\d+)")
REPO_URL = re.compile(r"https?://github\.com/([\w.-]+)/([\w.-]+)/\S+")
DENCHMARK_TAG = re.compile(r"</?denchmark-(?:h:h\d|h|link:[^>]*|link)>")
NON_SOURCE = re.compile(r"(^|/)(tests?|testing|testdata|docs?|g3doc)/|_test\.\w+$|(^|/)test_[^/]*$|(^|/)BUILD(\.bazel)?$|\.(md|rst|txt|bzl)$")


def sniff(path: Path) -> str:
    """The format of a label file or folder: a folder of per-issue JSON is Denchmark's; a JSONL by its first row."""
    if path.is_dir():
        return "denchmark"
    try:
        with path.open(encoding="utf-8", errors="replace") as fh:
            first = next((line for line in fh if line.strip()), "")
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc.strerror or exc}") from None
    try:
        obj = json.loads(first)
    except (ValueError, RecursionError):
        return "sftl"  # its reader says what is wrong, line by line
    if isinstance(obj, dict):
        if "problem_statement" in obj and "instance_id" in obj:
            return "swebench"
        if "BR" in obj and "commit" in obj:
            return "denchmark"
        if "title" in obj and "body" in obj and "issue" not in obj:
            return "rows"
    return "sftl"


def label_lines(path: Path, fmt: str = "auto") -> list[str]:
    """The label file or folder as sftl label lines (JSON text), in a stable order."""
    fmt = sniff(path) if fmt == "auto" else fmt
    if fmt not in FORMATS:
        raise InputError(f"unknown label format {fmt!r}; choose from auto, {', '.join(FORMATS)}")
    if fmt == "denchmark":
        files = sorted(path.rglob("*.json"), key=lambda p: (p.parent.name, _number(p.stem))) if path.is_dir() else [path]
        if not files:
            raise InputError(f"no Denchmark issue JSON under {path}")
        rows = [_from_denchmark(f) for f in files]
        if not path.is_dir() and "truth_files" not in json.loads(_line(rows[0])):
            raise InputError(f"{path} is not a Denchmark issue JSON (an object with 'BR' and 'commit')")
        return [_line(r) for r in rows]
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc.strerror or exc}") from None
    if fmt == "sftl":
        return text.splitlines()
    convert = _from_swebench if fmt == "swebench" else _from_row
    return [_line(_converted(convert, line)) if line.strip() else line for line in text.splitlines()]


def _number(stem: str) -> int:
    return int(stem) if stem.isdigit() else 0


def _line(obj: dict[str, Any] | str) -> str:
    return obj if isinstance(obj, str) else json.dumps(obj, ensure_ascii=False)


def _converted(convert: Any, line: str) -> dict[str, Any] | str:
    """A converted row, or the line as is when it is not JSON (the label reader then skips it with the reason)."""
    try:
        obj = json.loads(line)
    except (ValueError, RecursionError):
        return line
    if not isinstance(obj, dict):
        return line
    result: dict[str, Any] | str = convert(obj)
    return result


def _issue_object(url: str, title: str, body: str, created_at: str) -> dict[str, Any] | None:
    m = ISSUE_URL.match(url or "")
    html_url = url
    if m is not None:
        owner, repo, number = m.group(1), m.group(2), int(m.group(3))
        html_url = f"https://github.com/{owner}/{repo}/issues/{number}"
    else:
        # a report that is no issue (a security advisory's page in the repository): a number no issue of the
        # tracker has (above 10^9), stable for the URL, so the store keeps it apart from every issue
        other = REPO_URL.match(url or "")
        if other is None or not (title or body):
            return None
        owner, repo, number = other.group(1), other.group(2), 10**9 + zlib.crc32(url.encode()) % 10**9
    return {
        "number": number, "title": title, "body": body, "state": "closed", "created_at": created_at,
        "updated_at": created_at, "html_url": html_url,
        "repository_url": f"https://api.github.com/repos/{owner}/{repo}", "user": {"login": ""}, "labels": [],
        "comments": 0,
    }


def source_files(paths: list[str]) -> list[str]:
    """The fix's source files: tests, docs and build files left out, as the peer rows give them."""
    return [p for p in dict.fromkeys(p.replace("\\", "/").lstrip("./") for p in paths if p) if not NON_SOURCE.search(p)]


def _label(url: str, title: str, body: str, created_at: str, truth: list[str], framework: str | None,
           version: str | None, category: str | None = None, source: str = "",
           functions: dict[str, list[str]] | None = None) -> dict[str, Any]:
    issue = _issue_object(url, title, body, created_at)
    row: dict[str, Any] = {"url": url, "category": category, "truth_files": source_files(truth),
                           "framework": framework, "version": version, "created_at": created_at, "source": source}
    kept = {p: names for p, names in (functions or {}).items() if names and p in row["truth_files"]}
    if kept:  # the functions the fix changed, per source file (names as the benchmark gives them)
        row["truth_functions"] = kept
    if issue is not None:
        row["issue"] = issue
    return row


def _from_row(obj: dict[str, Any]) -> dict[str, Any] | str:
    """A report row (`peer_given.jsonl`): url, framework, category, title, body, created_at, version, truth_files."""
    if "issue" in obj:
        return json.dumps(obj)
    return _label(str(obj.get("url") or ""), str(obj.get("title") or ""), str(obj.get("body") or ""),
                  str(obj.get("created_at") or ""), list(obj.get("truth_files") or []), obj.get("framework"),
                  obj.get("version") if isinstance(obj.get("version"), str) else None, obj.get("category"),
                  str(obj.get("source") or ""))


def _from_swebench(obj: dict[str, Any]) -> dict[str, Any] | str:
    """A SWE-bench-style instance: problem_statement (title, then body), issue_url, fix_files or the patch's files."""
    statement = str(obj.get("problem_statement") or "")
    title, _, body = statement.strip().partition("\n")
    files = obj.get("fix_files")
    if not isinstance(files, list):
        files = re.findall(r"^diff --git a/(\S+) b/", str(obj.get("patch") or ""), re.M)
    repo = str(obj.get("repo") or "")
    framework = "pytorch" if "pytorch" in repo else "tensorflow" if "tensorflow" in repo else None
    version = obj.get("version")
    # 'era-<sha>': a main-branch commit, no release: read at the release current when the issue was filed
    if not isinstance(version, str) or not re.match(r"\d+\.\d+", version):
        version = None
    return _label(str(obj.get("issue_url") or ""), title.strip(), body.strip(), str(obj.get("issue_created_at") or ""),
                  list(files), framework, version, source="swe-bench",
                  functions=patch_functions(str(obj.get("patch") or "")))


PATCH_FILE = re.compile(r"^diff --git a/(\S+) b/(\S+)$")
HUNK = re.compile(r"^@@ -\d+(?:,\d+)? \+\d+(?:,\d+)? @@ ?(.*)$")
DEF_LINE = re.compile(r"^\s*(?:async\s+)?def\s+(\w+)|^\s*class\s+(\w+)")
CXX_HEADER = re.compile(r"([A-Za-z_][\w:~]*)\s*\(")


def patch_functions(patch: str) -> dict[str, list[str]]:
    """The functions a unified diff changes, per file, as far as the diff itself shows them (the base commit's
    file is not at hand): each changed line is in the innermost def the hunk shows above it at a smaller indent,
    else (indented, with no def or class above it in the hunk) in the function its header names; a changed def
    line is its own function; a line at the margin is in none."""
    out: dict[str, list[str]] = {}
    path, header = "", ""
    scopes: list[tuple[int, str]] = []  # the defs and classes the hunk has shown, outermost first ('' for a class)
    for line in patch.splitlines():
        m = PATCH_FILE.match(line)
        if m:
            path, header, scopes = m.group(2), "", []
            continue
        h = HUNK.match(line) if path else None
        if h:
            header, scopes = header_function(h.group(1)), []
            continue
        if not path or line.startswith(("+++", "---", "\\")) or line[:1] not in "+- " or not line[1:].strip():
            continue
        body = line[1:]
        indent = len(body) - len(body.lstrip())
        if not body.lstrip().startswith(("#", ")", "]", "}")):  # a comment or a closing bracket ends no scope
            scopes = [s for s in scopes if s[0] < indent]
        d = DEF_LINE.match(body)
        own = (d.group(1) or "") if d else None
        if line[0] in "+-":
            name = own or (scopes[-1][1] if scopes else header if indent else "")
            if name:
                out.setdefault(path, []).append(name)
        if d:
            scopes.append((indent, own or ""))
    return {p: list(dict.fromkeys(names)) for p, names in out.items()}


def header_function(context: str) -> str:
    """The function a hunk header names (`def meta_take(self, index):` -> meta_take); '' for none or a class."""
    d = DEF_LINE.match(context)
    if d:
        return d.group(1) or ""
    if context.startswith(("class ", "struct ", "namespace ", "#")):
        return ""
    c = CXX_HEADER.search(context)
    return c.group(1) if c and not context.rstrip().endswith(";") else ""


def _from_denchmark(path: Path) -> dict[str, Any] | str:
    """Denchmark's per-issue JSON: {"BR": {BR_id, BRopenT, BR_text: {BRsummary, BRdescription}}, "commit": {...}}."""
    try:
        obj = json.loads(path.read_text(encoding="utf-8", errors="replace"))
    except (OSError, ValueError) as exc:
        return json.dumps({"url": str(path), "category": None, "error": f"unreadable Denchmark file: {exc}"})
    br = obj.get("BR") if isinstance(obj, dict) else None
    commit = obj.get("commit") if isinstance(obj, dict) else None
    if not isinstance(br, dict) or not isinstance(commit, dict):
        return json.dumps({"url": str(path), "category": None})
    owner_repo = path.parent.name.replace("+", "/")
    url = f"https://github.com/{owner_repo}/issues/{br.get('BR_id') or path.stem}"
    raw_text = br.get("BR_text")
    text: dict[str, Any] = raw_text if isinstance(raw_text, dict) else {}
    title = denchmark_text(str(text.get("BRsummary") or "")).strip()
    body = denchmark_text(str(text.get("BRdescription") or ""))
    raw_changed = commit.get("changed_files")
    changed: dict[str, Any] = raw_changed if isinstance(raw_changed, dict) else {}
    files = [str(f.get("file_new_name") or f.get("file_old_name") or "") for f in changed.values() if isinstance(f, dict)]
    framework = "tensorflow" if "tensorflow" in owner_repo else "pytorch" if "pytorch" in owner_repo else None
    return _label(url, title, body, str(br.get("BRopenT") or ""), files, framework, None, source="denchmark",
                  functions=denchmark_functions(changed))


def denchmark_functions(changed: dict[str, Any]) -> dict[str, list[str]]:
    """The methods each changed file's hunks lie in (Denchmark's `method_info`, `Ismethod` 1), per file."""
    out: dict[str, list[str]] = {}
    for f in changed.values():
        if not isinstance(f, dict):
            continue
        path = str(f.get("file_new_name") or f.get("file_old_name") or "").replace("\\", "/").lstrip("./")
        hunks = f.get("hunks")
        for h in (hunks.values() if isinstance(hunks, dict) else ()):
            info = h.get("method_info") if isinstance(h, dict) else None
            if not isinstance(info, dict) or str(h.get("Ismethod", 1)) in ("0", "False"):
                continue
            name = info.get("method_name")
            if isinstance(name, str) and name.strip():
                out.setdefault(path, []).append(name.strip())
    return {p: list(dict.fromkeys(names)) for p, names in out.items()}


def denchmark_text(text: str) -> str:
    """Denchmark's markup back to markdown: code tags to fences, heading and link tags dropped, the indent undone."""
    lines = [ln[1:] if ln.startswith(" ") else ln for ln in text.replace("\r\n", "\n").split("\n")]
    out = "\n".join(lines)
    out = re.sub(r"\n?<denchmark-code>\n?", "\n```\n", out)
    out = re.sub(r"\n?</denchmark-code>\n?", "\n```\n", out)
    return DENCHMARK_TAG.sub("", out).strip("\n")
