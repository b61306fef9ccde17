"""gcrde screening of device-comparison phrasings (first exposed by the blind set bench/heldout/screen3.jsonl): determinism on, run-to-run variation, agreeing devices, untested devices, GPU moves."""

from __future__ import annotations

from sftl.screen import GCRDE_RULE_MIN, default_and_gpu_call, prepare, rules_screening

_OUT = "```\n{}\n```"


def _rules(title: str, body: str):
    return prepare((title, body)).rules


def test_determinism_switched_on_is_not_nondeterminism() -> None:
    on = _rules("LSTM outputs differ on CUDA", "With cudnn.deterministic = True the LSTM output on the GPU differs from "
                "the CPU output by 0.4.")
    assert on.flags["nondet"] == 0.0 and on.gcrde >= GCRDE_RULE_MIN
    # a report about nondeterminism itself still pays for it
    noisy = _rules("LSTM outputs vary", "The LSTM output on the GPU is nondeterministic; the CPU output differs from it.")
    assert noisy.flags["nondet"] == 1.0


def test_run_to_run_variation_in_the_title_is_not_a_device_comparison() -> None:
    r = _rules("scatter_add results vary between runs on CUDA, CPU is always the same",
               "Calling scatter_add twice on the GPU gives different sums. On the CPU repeated runs are bit-identical.")
    assert r.flags["title_both"] == 0.0 and r.gcrde < GCRDE_RULE_MIN
    # naming determinism in the title ("add a nondeterministic alert") is not run-to-run variation
    alert = _rules("Add a nondeterministic alert to index_put_",
                   "index_put_ with duplicate indices gives different results on CPU and on CUDA: 3 on the CPU but 5 on "
                   "CUDA, even with torch.use_deterministic_algorithms(True).\n```python\nprint(x.index_put_(idx, v))\n"
                   "print(x.cuda().index_put_(idx.cuda(), v.cuda()))\n```")
    assert any(w.startswith("-2: run-to-run") for w in alert.gcrde_why) and alert.gcrde >= GCRDE_RULE_MIN


def test_devices_that_agree_with_each_other_against_a_reference() -> None:
    r = _rules("torch.special.zeta disagrees with mpmath (same on CPU and GPU)",
               "The CPU and GPU results agree with each other, both are off from mpmath by 1e-3.")
    assert r.flags["both"] == 1.0 and r.flags["title_both"] == 0.0 and r.gcrde < GCRDE_RULE_MIN
    # agreement only under a condition means a discrepancy otherwise
    cond = _rules("reduce_std differs on GPU with XLA",
                  "With jit_compile the GPU result is different from the CPU result. Without XLA, CPU and GPU agree.")
    assert cond.flags["both"] == 0.0


def test_an_untested_device_is_not_a_comparison() -> None:
    r = _rules("bf16 training diverges on GPU, CPU not tried", "Loss goes to nan on my GPU after 200 steps. "
               "I haven't tried the CPU because it is too slow.")
    assert r.flags["title_both"] == 0.0 and r.gcrde < GCRDE_RULE_MIN
    tested = _rules("bf16 training diverges on GPU, fine on CPU", "Loss goes to nan on my GPU after 200 steps but on "
                    "the CPU it trains fine.")
    assert tested.gcrde >= GCRDE_RULE_MIN


def test_results_change_after_moving_to_the_gpu_or_hiding_it() -> None:
    moved = _rules("GRU outputs no longer match after model.to('cuda')",
                   "After moving the model to the GPU the outputs are different from the ones I got before.")
    assert moved.flags["implicit"] >= 2.0 and moved.gcrde >= GCRDE_RULE_MIN
    hidden = _rules("Predictions change when I hide the GPU",
                    "Running with `CUDA_VISIBLE_DEVICES=-1` gives different classes for 5% of the images.")
    assert hidden.flags["implicit"] >= 2.0 and hidden.gcrde >= GCRDE_RULE_MIN
    # a device-mismatch error after a move is a user error, not a changed result
    mismatch = _rules("Error after model.to('cuda')", "After model.to('cuda') I get a device mismatch: Expected all "
                      "tensors to be on the same device.")
    assert mismatch.flags["implicit"] == 0.0 and mismatch.gcrde < GCRDE_RULE_MIN
    oom = _rules("Memory usage changes after model.cuda()", "After model.cuda() I run out of memory at a different batch.")
    assert oom.flags["implicit"] == 0.0


def test_same_call_side_by_side_on_one_line() -> None:
    assert default_and_gpu_call("x = torch.tensor([1., 3., 3.])\nx.argmax(), x.cuda().argmax()")
    assert default_and_gpu_call("print(torch.cumsum(x, 0), torch.cumsum(x.cuda(), 0))")
    assert not default_and_gpu_call("a, b = torch.randn(3), torch.ones(3).cuda()")
    r = _rules("argmin returns a different index on CUDA",
               "```python\nx = torch.tensor([2., 1., 1.])\nx.argmin(), x.cuda().argmin()\n```\n\n"
               + _OUT.format("(tensor(1), tensor(2, device='cuda:0'))"))
    assert r.flags["code_both"] == 1.0 and r.gcrde >= GCRDE_RULE_MIN


def test_results_differ_between_devices_in_the_title() -> None:
    r = _rules("torch.linalg.svd singular values differ between devices",
               "```python\nA = torch.randn(3, 3)\nprint(torch.linalg.svdvals(A))\nprint(torch.linalg.svdvals(A.cuda()))\n```")
    assert r.flags["title_both"] == 1.0 and r.gcrde >= GCRDE_RULE_MIN
    other = _rules("Checkpoint cannot be moved between devices", "torch.load fails with map_location.")
    assert other.flags["title_both"] == 0.0


def test_families_screen_end_to_end() -> None:
    reports = [
        ("GRU outputs no longer match after model.to('cuda')",
         "After moving the model to the GPU the outputs are different from the ones I got before (max diff 0.7)."),
        ("scatter_add results vary between runs on CUDA, CPU is always the same",
         "Calling scatter_add twice on the GPU gives different sums. On the CPU repeated runs are bit-identical."),
    ]
    # two reports are too few for the keyword IDF: the rules decide, as `sftl screen` does on a small store
    cats = [rules_screening(prepare(r), len(reports)).category.value for r in reports]
    assert cats == ["gcrde", "other"]
