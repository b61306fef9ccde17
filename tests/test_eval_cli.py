"""`sftl eval` end to end on small label files written for these tests (fixtures/eval/)."""

from __future__ import annotations

import csv
import errno
import io
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sftl.cli import main
from sftl.evaluate import parse_labels

FIFO_LIMIT_S = 120  # the paced run's whole budget: a stuck run fails the test instead of hanging it


@pytest.fixture
def labels(fixtures_dir: Path, tmp_path: Path) -> Path:
    # a private copy of the labels and their tree: the baselines' in-process index is keyed by location
    shutil.copytree(fixtures_dir / "eval", tmp_path / "eval")
    return tmp_path / "eval" / "labels_small.jsonl"


def _eval(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(["eval", *argv], out=out, err=err)
    return code, out.getvalue(), err.getvalue()


def test_eval_writes_every_output_and_scores_vsm(labels: Path, tmp_path: Path, sftl_home: Path) -> None:
    out = tmp_path / "run"
    code, stdout, err = _eval(str(labels), "--methods", "vsm", "--out", str(out), "--offline",
                              "--screeners", "keywords,learned")
    assert code == 0, err
    for name in ("report.md", "summary.json", "rows.csv", "topk.png", "screening.png", "checkpoint.jsonl"):
        assert (out / name).stat().st_size > 0, name
    assert (out / "topk.png").read_bytes()[:4] == b"\x89PNG"
    summary = json.loads((out / "summary.json").read_text())
    assert summary["issues"] == 3 and summary["skipped"] == []
    vsm = summary["localization"]["vsm"]
    assert vsm["pytorch/mme"]["n"] == 1 and vsm["pytorch/gcrde"]["n"] == 1
    assert vsm["all/all"]["top"]["1"] == 1.0  # both fixture issues name their file's distinctive terms
    assert summary["screening"]["keywords"]["all"]["n"] == 3
    assert summary["screening"]["learned"] is None  # three rows: too few to cross-validate
    assert "Screener 'learned' not scored" in stdout
    assert "## Table 3" in stdout and "| pytorch | vsm | 1 | 100.0 |" in stdout
    with (out / "rows.csv").open() as fh:
        rows = list(csv.DictReader(fh))
    assert [r["category"] for r in rows] == ["mme", "gcrde", "other"]
    assert rows[0]["keywords_screened"] in ("mme", "gcrde", "other")
    assert rows[0]["vsm_rank"] == "1" and rows[0]["vsm_top1"] == "torch/distributions/bernoulli.py"
    assert rows[2]["vsm_outcome"] == ""  # 'other' rows are screened, not localized


def test_bad_lines_are_counted_and_listed_and_the_run_finishes(
    fixtures_dir: Path, tmp_path: Path, sftl_home: Path
) -> None:
    labels = tmp_path / "eval" / "labels_bad_lines.jsonl"
    shutil.copytree(fixtures_dir / "eval", tmp_path / "eval")
    code, stdout, err = _eval(str(labels), "--methods", "vsm", "--out", str(tmp_path / "run"), "--offline", "--json")
    assert code == 0, err
    summary = json.loads(stdout)
    reasons = {s["line"]: s["reason"] for s in summary["skipped"]}
    assert set(reasons) == {2, 3, 4, 5, 6, 7}
    assert "malformed JSON" in reasons[2]
    assert "unknown category 'crash'" in reasons[3]
    assert "issue not available" in reasons[4] and "offline" in reasons[4]
    assert reasons[5] == "duplicate of line 1"
    assert "truth_files" in reasons[6]
    assert "JSON object" in reasons[7]
    assert summary["issues"] == 1
    with (tmp_path / "run" / "rows.csv").open() as fh:
        statuses = [r["status"] for r in csv.DictReader(fh)]
    assert statuses[0] == "ok" and sum(s.startswith("skipped:") for s in statuses) == 6


def test_rerun_resumes_from_the_checkpoint(labels: Path, tmp_path: Path, sftl_home: Path) -> None:
    out = tmp_path / "run"
    assert _eval(str(labels), "--methods", "vsm", "--out", str(out), "--offline", "--no-plots")[0] == 0
    checkpoint = out / "checkpoint.jsonl"
    lines = checkpoint.read_text().splitlines()
    assert len(lines) == 2  # two localizable rows x one method
    first = json.loads((out / "summary.json").read_text())["localization"]
    # an interrupted run: one result kept, the next torn mid-write
    checkpoint.write_text(lines[0] + "\n" + lines[1][:20])
    code, _, err = _eval(str(labels), "--methods", "vsm", "--out", str(out), "--offline", "--no-plots")
    assert code == 0
    assert "resuming: 1 of 2" in err
    assert json.loads((out / "summary.json").read_text())["localization"] == first
    # adding a method reuses the finished ones
    code, _, err = _eval(str(labels), "--methods", "vsm,paper", "--out", str(out), "--offline", "--no-plots")
    assert code == 0 and "resuming: 2 of 4" in err
    code, _, err = _eval(str(labels), "--methods", "vsm", "--out", str(out), "--offline", "--no-plots", "--top", "3")
    assert code == 0 and "resuming" not in err  # results kept for another --top are not reused
    code, _, err = _eval(str(labels), "--methods", "vsm", "--out", str(out), "--offline", "--no-plots", "--restart")
    assert code == 0 and "resuming" not in err


def test_parallel_jobs_give_the_same_results(labels: Path, tmp_path: Path, sftl_home: Path) -> None:
    one = tmp_path / "one"
    two = tmp_path / "two"
    assert _eval(str(labels), "--methods", "vsm,sftl", "--out", str(one), "--offline", "--no-plots")[0] == 0
    code, _, err = _eval(str(labels), "--methods", "vsm,sftl", "--out", str(two), "--offline", "--no-plots", "--jobs", "2")
    assert code == 0, err
    a = json.loads((one / "summary.json").read_text())["localization"]
    b = json.loads((two / "summary.json").read_text())["localization"]
    assert a == b


def test_other_localizers_run_through_the_registry(labels: Path, tmp_path: Path, sftl_home: Path) -> None:
    out = tmp_path / "run"
    code, _, err = _eval(str(labels), "--methods", "sftl,paper", "--out", str(out), "--offline", "--no-plots")
    assert code == 0, err
    done = [json.loads(line) for line in (out / "checkpoint.jsonl").read_text().splitlines()]
    assert {(d["method"], d["outcome"] in ("located", "abstained", "skipped")) for d in done} == {
        ("sftl", True), ("paper", True)
    }
    assert all(d["reason"] for d in done) and not any(d.get("error") for d in done)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--methods", "vsm,nope"], "unknown method(s) nope"),
        (["--jobs", "0"], "must be at least 1"),
    ],
)
def test_bad_flags_are_usage_errors(labels: Path, argv: list[str], message: str, sftl_home: Path) -> None:
    code, _, err = _eval(str(labels), *argv)
    assert code == 2 and message in err


def test_missing_label_file_is_one_line_error(tmp_path: Path, sftl_home: Path) -> None:
    code, _, err = _eval(str(tmp_path / "nope.jsonl"))
    assert code == 2 and err.startswith("sftl: cannot read") and err.count("\n") == 1


def test_label_parsing_takes_framework_from_the_url_and_paths_normalised() -> None:
    rows, skipped = parse_labels([
        json.dumps({"url": "https://github.com/tensorflow/tensorflow/issues/1", "category": "GCRDE",
                    "truth_files": ["./tensorflow/core/kernels/x.cc"]}),
        "",
        json.dumps({"url": "https://github.com/pytorch/pytorch/issues/2", "category": "mme", "framework": "jax"}),
    ])
    assert rows[0].framework == "tensorflow" and rows[0].category == "gcrde"
    assert rows[0].truth_files == ("tensorflow/core/kernels/x.cc",) and rows[0].scored_for_localization
    assert skipped[0].line == 3 and "unknown framework 'jax'" in skipped[0].reason


def _fifo_wait(proc: subprocess.Popen[str], deadline: float, doing: str) -> None:
    """A short pause while the run is alive; a failure (not a hang) when it died or the test ran out of time."""
    if proc.poll() is not None:
        raise AssertionError(f"the run ended ({proc.returncode}) while the test was {doing}")
    if time.monotonic() > deadline:
        proc.kill()
        raise AssertionError(f"the run still had not finished {doing} after {FIFO_LIMIT_S} s")
    time.sleep(0.005)


def _fifo_hand_empty(fifo: Path, proc: subprocess.Popen[str], deadline: float) -> None:
    """Give the run's first read of its checkpoint an empty file: open the writing end once its reader is there."""
    while True:
        try:  # non-blocking: ENXIO until the run opens the pipe to read, instead of blocking if it never does
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
            return
        except OSError as exc:
            if exc.errno != errno.ENXIO:
                raise
        _fifo_wait(proc, deadline, "waiting for the run to read its checkpoint")


def _fifo_read_one_write(fd: int, proc: subprocess.Popen[str], deadline: float) -> str:
    """Whole lines the run writes to the pipe read by `fd`, once its writer has come and closed.

    The end is non-blocking, so a read answers at once: data; EAGAIN, a writer holds the pipe with nothing in it
    yet; b"", no writer (none yet, or the last one closed)."""
    data = b""
    while True:
        try:
            chunk: bytes | None = os.read(fd, 1 << 16)
        except BlockingIOError:
            chunk = None
        if chunk:
            data += chunk
        elif chunk == b"" and data.endswith(b"\n"):
            return data.decode()
        else:
            _fifo_wait(proc, deadline, "waiting for a result")


def _fifo_drain(fd: int, proc: subprocess.Popen[str], deadline: float) -> str:
    """Everything the run writes to the pipe read by `fd` until it exits."""
    data = b""
    while True:
        exited = proc.poll() is not None  # before the read: once it exited, a read returns all it wrote, then b""
        try:
            chunk: bytes | None = os.read(fd, 1 << 16)
        except BlockingIOError:
            chunk = None
        if chunk:
            data += chunk
        elif exited:
            return data.decode()
        elif time.monotonic() > deadline:
            proc.kill()
            raise AssertionError(f"the run did not exit {FIFO_LIMIT_S} s after the interrupt")
        else:
            time.sleep(0.005)


@pytest.mark.slow
def test_sigint_keeps_results_and_a_rerun_finishes_the_rest(labels: Path, tmp_path: Path, sftl_home: Path) -> None:
    """The run is paced by the test, not raced: its checkpoint is a named pipe, and each result is appended with its
    own open(), which waits until the test opens the reading end. After three results the test holds the pipe
    closed, so the run is stopped in its fourth localization or at that result's open(), and interrupts it; then it
    reads the pipe until the run exits, so a write the run makes before it sees the interrupt cannot block it."""
    base = [json.loads(x) for x in labels.read_text().splitlines()]
    many = labels.with_name("many.jsonl")
    with many.open("w") as fh:
        for copy in range(8):
            for line in base:
                line = json.loads(json.dumps(line))
                number = line["issue"]["number"] + 100 * copy
                line["issue"]["number"] = number
                line["url"] = line["issue"]["html_url"] = f"https://github.com/pytorch/pytorch/issues/{number}"
                fh.write(json.dumps(line) + "\n")
    out = tmp_path / "run"
    out.mkdir()
    checkpoint = out / "checkpoint.jsonl"
    os.mkfifo(checkpoint)
    cmd = [sys.executable, "-c", "from sftl.cli import entry; entry()", "eval", str(many), "--methods", "vsm,bm25", "--out", str(out),
           "--offline", "--no-plots"]
    env = dict(os.environ, SFTL_HOME=str(sftl_home))
    err_path = tmp_path / "stderr.txt"
    with err_path.open("w") as err_file:  # a file, not a pipe the test would have to drain meanwhile
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=err_file, text=True)
    deadline = time.monotonic() + FIFO_LIMIT_S
    try:
        _fifo_hand_empty(checkpoint, proc, deadline)  # the run first reads the checkpoint (to resume): an empty one
        text = ""
        while text.count("\n") < 3:  # one open of the reading end lets one result (or a few) through
            fd = os.open(checkpoint, os.O_RDONLY | os.O_NONBLOCK)
            try:
                text += _fifo_read_one_write(fd, proc, deadline)
            finally:
                os.close(fd)
        proc.send_signal(signal.SIGINT)
        fd = os.open(checkpoint, os.O_RDONLY | os.O_NONBLOCK)
        try:
            text += _fifo_drain(fd, proc, time.monotonic() + FIFO_LIMIT_S)
        finally:
            os.close(fd)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
    err = err_path.read_text()
    assert proc.returncode == 130, err
    assert "run the same command to resume" in err and "Traceback" not in err
    kept = [line for line in text[: text.rfind("\n") + 1].splitlines() if line]  # a torn last write is not kept
    assert 3 <= len(kept) < 32
    checkpoint.unlink()
    checkpoint.write_text("".join(line + "\n" for line in kept))
    code, _, err = _eval(str(many), "--methods", "vsm,bm25", "--out", str(out), "--offline", "--no-plots")
    assert code == 0 and f"resuming: {len(kept)} of 32" in err
    done = [json.loads(x) for x in checkpoint.read_text().splitlines()]
    assert len(done) == 32 and len({(d["key"], d["method"]) for d in done}) == 32
