"""Screening of reports into mme / gcrde / other: the published TF-IDF keyword method, a learned mode, duplicates.

The package by concern: `sections` (a report apart from its template), `rules` (mme match, gcrde points),
`documents` (a report prepared for screening), `keywords` (the published method), `learned` (the learned
mode), `similar` (duplicate candidates), `stage` (screen one issue, many, or a store's targets).

Keyword mode (`KeywordScreener`), the published method:

    TF(t, d)  = n_td / sum_k n_kd                  (term count over the document's token count)
    IDF(t)    = log(|D| / (1 + |{d in D: t in d}|)) (fitted on the stored corpus; floored at 0)
    score_c(d) = sum_{t in K_c} w_t * TF(t, d) * IDF(t)

over unigrams to trigrams (counts equal to scikit-learn's CountVectorizer with the keyword vocabulary,
lowercase, token pattern `\\b\\w+\\b`, built without enumerating every n-gram; a test checks the
equality). A report is read in sections and each section's counts are weighted (`SECTION_WEIGHTS`):
title 2, description 1, output/error 1, code 0.5, template 0 -- so PyTorch's collect_env block
("Is CUDA available", "GPU models and configuration", "CUDA used to build") and
TensorFlow's template ("CUDA/cuDNN version", "GPU model and memory") do not push every report to gcrde.

A category fires when its score reaches its threshold (`THRESHOLDS`: mme 0.005, gcrde 0.005) AND its
rule agrees (the keyword score alone confuses CPU/GPU-mentioning reports that are not discrepancies).
A matched mme rule, or gcrde evidence of 4 points or more, decides even below the threshold: TF is
diluted by long tracebacks and IDF vanishes in a corpus where every report says "CUDA".

* mme: a Python `AttributeError ... has no attribute` / `module 'x' has no attribute` / `No module named`
  / `cannot import name` is stated, naming a framework module or raised in framework frames; vetoed by
  the hard negatives (DLL load failed, undefined symbol, WinError 126, `__main__` modules, TorchScript's
  `RuntimeError: Module 'X' has no attribute`, IPython's `_render_traceback_`, user modules).
* gcrde: device-comparison evidence (CPU and GPU/CUDA/MPS in one comparing sentence, code run on both
  devices, "works on GPU, fails on CPU"), minus the hard negatives (out of memory, speed comparisons,
  run-to-run nondeterminism, "on both CPU and GPU", XLA/jit_compile or NumPy or OS comparisons, cuDNN
  and driver set-up failures, "runs on CPU instead of GPU"). Points (`gcrde_evidence`): title comparing
  devices +2 (+3 with a difference word); one sentence "on the CPU ... but on the GPU" +3, else a
  comparing sentence +2, else adjacent contrasting sentences +1/+1.5; snippet on both devices +1.5
  (GPU snippet, CPU in the text +1); CPU, GPU and a difference word +1; device-labelled outputs +1;
  "works on one device" +1; results changing after `.to("cuda")` or with the GPU hidden +2 (title) / +1
  (sentence), at most +3; a title calling the result wrong (or different) on one device, not about training,
  set-up, the device's bookkeeping or another reference +1.5 on the GPU (+1 with the snippet or output on the GPU)
  / +1 on the CPU; a wrong-result title, or one saying what one device does, over a snippet on both devices +1;
  device-labelled results ("CPU result", "out_gpu =") that differ +1.5; one device raising while the other
  returns +3 (`one_device`); the reporter's sentences pasted among the output are read with the description;
  negatives: same on both (or "CPU and GPU agree") -4, speed -3, out of memory -3,
  placement -3, nondeterminism -2 (-4 when the title is about run-to-run variation, whose devices then do
  not count; "deterministic = True" is not nondeterminism), set-up failure -2, other comparison axis
  (XLA, compile, NumPy/SciPy reference) -1.5, build -1. A device named as untested ("CPU not tested") is
  no comparison. Fires at 2.5.

Learned mode (`LearnedScreener`): logistic regression over TF-IDF of the same sections plus the rule
features, calibrated (sigmoid), abstaining ("needs human triage") below the confidence that reached the
precision target in cross-validation. Saved as a versioned joblib artefact.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sftl.screen.documents import (
        Doc,
        prepare,
        prepare_many,
    )
    from sftl.screen.keywords import (
        KEYWORDS,
        SECTION_WEIGHTS,
        THRESHOLDS,
        KeywordScreener,
        default_screener,
    )
    from sftl.screen.learned import (
        ARTEFACT_FORMAT,
        ARTEFACT_VERSION,
        CLASSES,
        FEATURE_NAMES,
        LearnedScreener,
        load_labels,
        model_path,
    )
    from sftl.screen.rules import (
        FRAMEWORK_DEPS,
        FRAMEWORK_MODULES,
        GCRDE_RULE_MIN,
        STRONG_GCRDE_MARGIN,
        RuleEvidence,
        default_and_gpu_call,
        gcrde_evidence,
        mme_evidence,
        rule_evidence,
    )
    from sftl.screen.sections import (
        Sections,
        read_sections,
    )
    from sftl.screen.similar import (
        duplicate_text,
        similar,
    )
    from sftl.screen.stage import (
        MIN_CORPUS,
        rules_screening,
        screen,
        screen_corpus,
        screen_many,
    )

# Each name is loaded from its module on first use (PEP 562): importing one submodule, e.g. the
# localizer's `sftl.screen.one_device`, must not compile every screening regex (~80 ms of a locate).
_HOMES = {
    "Doc": "documents",
    "prepare": "documents",
    "prepare_many": "documents",
    "KEYWORDS": "keywords",
    "SECTION_WEIGHTS": "keywords",
    "THRESHOLDS": "keywords",
    "KeywordScreener": "keywords",
    "default_screener": "keywords",
    "ARTEFACT_FORMAT": "learned",
    "ARTEFACT_VERSION": "learned",
    "CLASSES": "learned",
    "FEATURE_NAMES": "learned",
    "LearnedScreener": "learned",
    "load_labels": "learned",
    "model_path": "learned",
    "FRAMEWORK_DEPS": "rules",
    "FRAMEWORK_MODULES": "rules",
    "GCRDE_RULE_MIN": "rules",
    "STRONG_GCRDE_MARGIN": "rules",
    "RuleEvidence": "rules",
    "default_and_gpu_call": "rules",
    "gcrde_evidence": "rules",
    "mme_evidence": "rules",
    "rule_evidence": "rules",
    "Sections": "sections",
    "read_sections": "sections",
    "duplicate_text": "similar",
    "similar": "similar",
    "MIN_CORPUS": "stage",
    "rules_screening": "stage",
    "screen": "stage",
    "screen_corpus": "stage",
    "screen_many": "stage",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'sftl.screen' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f"sftl.screen.{home}"), name)
    globals()[name] = value
    return value


__all__ = [
    "ARTEFACT_FORMAT",
    "ARTEFACT_VERSION",
    "CLASSES",
    "Doc",
    "FEATURE_NAMES",
    "FRAMEWORK_DEPS",
    "FRAMEWORK_MODULES",
    "GCRDE_RULE_MIN",
    "KEYWORDS",
    "KeywordScreener",
    "LearnedScreener",
    "MIN_CORPUS",
    "RuleEvidence",
    "SECTION_WEIGHTS",
    "STRONG_GCRDE_MARGIN",
    "Sections",
    "THRESHOLDS",
    "default_and_gpu_call",
    "default_screener",
    "duplicate_text",
    "gcrde_evidence",
    "load_labels",
    "mme_evidence",
    "model_path",
    "prepare",
    "prepare_many",
    "read_sections",
    "rule_evidence",
    "rules_screening",
    "screen",
    "screen_corpus",
    "screen_many",
    "similar",
]
