"""Terse GPU/CPU reports (a title, a snippet, its output, the environment; little or no prose) are screened by what they show.

Each family below is a way real reports carry a discrepancy without a sentence comparing the devices in
the description, next to the hard negatives that look like it. The reports are GitHub REST issue objects
written for these tests in the trackers' templates.
"""

from __future__ import annotations

from typing import Any

import pytest

from sftl import screen as scr
from sftl.extract import extract
from sftl.github import issue_from_json

FENCE = "```"
ENV = (f"### Versions\n\n{FENCE}\nCollecting environment information...\nPyTorch version: 2.5.1+cu124\n"
       f"Is CUDA available: True\nCUDA runtime version: 12.4.131\nGPU models and configuration: GPU 0: NVIDIA A100\n{FENCE}\n")


def report(title: str, code: str, output: str, number: int = 4242, prose: str = "") -> dict[str, Any]:
    """A PyTorch bug-template issue: the snippet, then what it printed, then collect_env."""
    body = (f"### 🐛 Describe the bug\n\n{prose}\n\n{FENCE}python\n{code.strip()}\n{FENCE}\n\nOutput:\n\n"
            f"{FENCE}\n{output.strip()}\n{FENCE}\n\n{ENV}")
    return {"url": f"https://api.github.com/repos/pytorch/pytorch/issues/{number}",
            "repository_url": "https://api.github.com/repos/pytorch/pytorch",
            "html_url": f"https://github.com/pytorch/pytorch/issues/{number}", "number": number, "title": title,
            "user": {"login": "someone"}, "labels": [], "state": "open", "comments": 0,
            "created_at": "2024-11-02T10:00:00Z", "updated_at": "2024-11-02T10:00:00Z", "body": body}


def rules(obj: dict[str, Any]) -> scr.RuleEvidence:
    issue = issue_from_json(obj)
    return scr.prepare(issue, extract(issue)).rules


def is_gcrde(obj: dict[str, Any]) -> bool:
    r = rules(obj)
    return not r.mme and r.gcrde >= scr.GCRDE_RULE_MIN


GPU_SNIPPET = """
import torch
x = torch.linspace(-3, 3, 9, device="cuda", dtype=torch.float16)
y = torch.erfinv(x.clamp(-0.99, 0.99))
print(y)
"""
GPU_OUT = "tensor([-1.8213, -0.0000,  0.0000,  0.0000,  0.0000,  0.0000,  0.0000,  0.0000,  1.8213], device='cuda:0', dtype=torch.float16)"


# -- family: the reporter's sentence sits among the pasted output ------------------------------------------


def test_a_sentence_among_the_output_counts_as_the_reporters() -> None:
    out = ("tensor([0.1000, 0.2000, 0.7000])\ntensor([0.3333, 0.3333, 0.3333], device='cuda:0')\n"
           "The CPU result is correct, the CUDA one is uniform.")
    code = "import torch\nx = torch.tensor([1.0, 2.0, 3.1])\nprint(torch.softmax(x, 0))\nprint(torch.softmax(x.cuda(), 0))"
    got = rules(report("softmax of a small vector", code, out))
    assert got.gcrde >= scr.GCRDE_RULE_MIN
    assert any("one device" in w or "compares" in w or "contrast" in w for w in got.gcrde_why)


def test_a_sentence_among_the_output_saying_both_devices_agree_is_no_discrepancy() -> None:
    out = ("tensor([nan, nan, nan])\ntensor([nan, nan, nan], device='cuda:0')\n"
           "Same result on both CPU and GPU, so this is not device specific.")
    code = "import torch\nx = torch.full((3,), float('-inf'))\nprint(torch.softmax(x, 0))\nprint(torch.softmax(x.cuda(), 0))"
    assert not is_gcrde(report("softmax of an all -inf row is nan", code, out))


def test_console_lines_are_not_read_as_sentences() -> None:
    from sftl.screen.rules import output_prose

    text = ("Traceback (most recent call last):\n  File \"t.py\", line 3, in <module>\n"
            "RuntimeError: Expected all tensors to be on the same device, but found cuda:0 and cpu!\n"
            "2024-01-01 10:00:00.1: I tensorflow/core/common_runtime/gpu/gpu_device.cc:1 Created device GPU:0\n"
            "x = torch.ones(3, device='cuda')\ntensor([1., 1., 1.])\n(On the CPU there is no such problem.)")
    assert output_prose(text) == ["On the CPU there is no such problem."]


def test_a_compound_sentence_that_goes_on_to_contrast_the_devices_is_no_agreement() -> None:
    out = ("For a 2x2 singular matrix both CPU and GPU raise an error; for a 3x3 one the CPU raises "
           "InvalidArgumentError while the GPU returns a numeric result.")
    code = ("import tensorflow as tf\nfor dev in ('/CPU:0', '/GPU:0'):\n    with tf.device(dev):\n"
            "        print(tf.linalg.solve(a, b))")
    obj = report("tf.linalg.solve: inconsistent CPU/GPU behaviour for singular matrices", code, out)
    assert is_gcrde(obj)
    agree = report("tf.linalg.solve raises for singular matrices",
                   code, "For a 2x2 singular matrix both CPU and GPU raise an error.")
    assert not is_gcrde(agree)


# -- family: the title calls the result wrong on one device ------------------------------------------------


@pytest.mark.parametrize("title", [
    "Wrong results for erfinv on CUDA with float16 inputs",
    "CUDA erfinv produces incorrect values near the ends of its range",
    "buggy cuda erfinv for half inputs",
    "Weird bug in erfinv on cuda tensors",
    "torch.erfinv ignores 'nan' in the cuda case",
])
def test_a_title_calling_the_gpu_result_wrong_with_a_gpu_snippet_is_a_discrepancy(title: str) -> None:
    got = rules(report(title, GPU_SNIPPET, GPU_OUT))
    assert got.gcrde >= scr.GCRDE_RULE_MIN, got.gcrde_why
    assert "the title calls the result wrong on the GPU" in got.gcrde_why


@pytest.mark.parametrize(("title", "code", "output"), [
    # a CUDA error named in the title is an error, not a wrong result; no word of the CPU
    ("Wrong CUDA error: illegal memory access in erfinv", GPU_SNIPPET,
     "RuntimeError: CUDA error: an illegal memory access was encountered"),
    # a crash, a training loss, mixed precision: not a result the CPU would give differently
    ("[Bug] erfinv crashes on GPU with a big batch", GPU_SNIPPET, "Segmentation fault (core dumped)"),
    ("Loss goes wrong after a few epochs with AMP on GPU", GPU_SNIPPET, "epoch 3 loss nan"),
    # another comparison axis, or run-to-run variation
    ("torch.compile gives wrong erfinv values on CUDA", GPU_SNIPPET, GPU_OUT),
    ("erfinv gives different wrong values on GPU every run", GPU_SNIPPET, GPU_OUT),
    # the wrong result named on the GPU, but nothing shown or said on any device
    ("Wrong results for erfinv on CUDA", "import torch\nprint(torch.erfinv(torch.tensor([0.5])))", "tensor([0.4769])"),
])
def test_hard_negatives_of_a_wrong_on_the_gpu_title(title: str, code: str, output: str) -> None:
    assert not is_gcrde(report(title, code, output))


def test_a_title_calling_the_cpu_result_wrong_needs_the_snippet_on_both_devices() -> None:
    both = ("import torch\nx = torch.tensor([[0, 1], [0, 1]])\nprint(torch.bincount(x[:, 1]))\n"
            "print(torch.bincount(x.cuda()[:, 1]))\nprint(torch.bincount(x[:, 1].cuda()))")
    assert is_gcrde(report("bincount counts incorrectly on a non-contiguous tensor on CPU", both,
                           "tensor([2, 0])\ntensor([0, 2], device='cuda:0')"))
    cpu_only = "import torch\nx = torch.tensor([[0, 1], [0, 1]])\nprint(torch.bincount(x[:, 1]))"
    # a plain CPU bug: nothing says another device does better
    assert not is_gcrde(report("bincount counts incorrectly on a non-contiguous tensor on CPU", cpu_only,
                               "tensor([2, 0])"))


# -- family: the output labels a CPU result and a GPU result ----------------------------------------------


def test_labelled_cpu_and_gpu_results_that_differ_are_a_discrepancy() -> None:
    code = "import torch\nx = torch.arange(8.).reshape(2, 1, 2, 2)\nprint(torch.nn.functional.interpolate(x, scale_factor=1, mode='bicubic'))"
    out = ("CPU result\ntensor([[[[0., 1.], [2., 3.]]], [[[0., 0.], [0., 0.]]]])\n"
           "GPU result\ntensor([[[[0., 1.], [2., 3.]]], [[[4., 5.], [6., 7.]]]], device='cuda:0')")
    got = rules(report("bicubic interpolate with scale_factor=1 loses the second batch element", code, out))
    assert "the CPU and GPU results it labels differ" in got.gcrde_why
    assert got.gcrde >= scr.GCRDE_RULE_MIN


def test_labelled_results_that_agree_or_are_timings_are_no_discrepancy() -> None:
    from sftl.screen.rules import labelled_results_differ

    assert not labelled_results_differ("cpu: tensor([1., 2.])\ngpu: tensor([1., 2.], device='cuda:0')")
    assert not labelled_results_differ("CPU time: 0.52 s\nGPU time: 0.01 s")
    assert not labelled_results_differ("Num GPUs: 1\nCPU count: 16")
    assert labelled_results_differ("out_cpu = tensor([1., 2.])\nout_gpu = tensor([1., 2.5000], device='cuda:0')")
    timing = report("interpolate bicubic timing", "import torch", "CPU time: 0.52\nGPU time: 0.01")
    assert not is_gcrde(timing)


# -- a device string is a device, not a CUDA version ------------------------------------------------------


def test_a_cuda_device_string_names_the_gpu() -> None:
    code = "import torch\na = torch.tensor([[float('inf') + 0j], [-1 - 1e-7j]])\nprint(torch.exp(a))"
    out = ("On x86_64 Linux (CPU):\ntensor([[inf+nanj], [0.3679-3.2e-08j]])\n"
           "With the tensor on torch.device('cuda:0') the result is correct:\n"
           "tensor([[inf+0.j], [0.3679-3.2e-08j]], device='cuda:0')")
    assert is_gcrde(report("torch.exp of complex infinity chokes in some cases", code, out))


# -- family: the title names one device and a difference ("a different shape on cuda", "NaN on GPU only") ----

BOTH_SNIPPET = """
import torch
x = torch.tensor([[1, 2], [1, 2], [3, 4]])
print(torch.unique(x, dim=0))
print(torch.unique(x.cuda(), dim=0))
"""
BOTH_OUT = "tensor([[1, 2],\n        [3, 4]])\ntensor([[1, 2],\n        [1, 2],\n        [3, 4]], device='cuda:0')"


@pytest.mark.parametrize("title", [
    "torch.unique(dim=0) returns a different shape on cuda",
    "unique(dim=0) result differs on GPU for repeated rows",
    "unique(dim=0) keeps duplicates on GPU only",
])
def test_a_title_naming_one_device_and_a_difference_is_a_discrepancy(title: str) -> None:
    assert is_gcrde(report(title, BOTH_SNIPPET, BOTH_OUT))


@pytest.mark.parametrize("title", [
    "torch.unique(dim=0) on cuda differs from numpy.unique",
    "torch.unique(dim=0) gives a different shape on cuda after upgrading to 2.5",
    "torch.unique(dim=0) output on GPU differs between eager and torch.compile",
    "torch.unique(dim=0) on GPU gives different results every run",
])
def test_a_difference_against_something_else_than_the_cpu_is_no_discrepancy(title: str) -> None:
    gpu_only = "import torch\nx = torch.tensor([[1, 2], [1, 2]], device='cuda')\nprint(torch.unique(x, dim=0))"
    assert not is_gcrde(report(title, gpu_only, "tensor([[1, 2]], device='cuda:0')"))


# -- family: a title calling the result wrong, over a snippet that runs it on both devices ------------------


def test_a_wrong_result_title_over_a_snippet_on_both_devices_is_a_discrepancy() -> None:
    got = rules(report("torch.unique(dim=0) produces incorrect results", BOTH_SNIPPET, BOTH_OUT))
    assert "the title calls the result wrong" in got.gcrde_why
    assert got.gcrde >= scr.GCRDE_RULE_MIN


@pytest.mark.parametrize("title", [
    "torch.unique(dim=0) produces incorrect results compared to numpy",
    "torch.unique(dim=0) produces incorrect results with torch.compile",
    "torch.unique(dim=0) produces different results every run",
    "torch.unique(dim=0) produces incorrect results during training",
])
def test_a_wrong_result_title_against_another_reference_is_no_discrepancy(title: str) -> None:
    # both devices in the snippet, but the title measures against something else
    assert not is_gcrde(report(title, BOTH_SNIPPET, "tensor([[1, 2],\n        [3, 4]])"))


# -- family: the title says what one device does, over a snippet that runs both -----------------------------

TF_BOTH = """
import tensorflow as tf
params = tf.constant([1.0, 2.0, 3.0])
for device in ("/CPU:0", "/GPU:0"):
    with tf.device(device):
        print(device, tf.gather(params, [0, 7]))
"""


@pytest.mark.parametrize("title", [
    "tf.gather produces zeros for out-of-range indices on GPU",
    "tf.math.floormod not throwing a division-by-zero error on GPU for int64",
])
def test_a_title_naming_what_one_device_does_over_a_snippet_on_both_is_a_discrepancy(title: str) -> None:
    out = "/CPU:0 InvalidArgumentError: indices[1] = 7 is not in [0, 3)\n/GPU:0 tf.Tensor([1. 0.], shape=(2,), dtype=float32)"
    assert is_gcrde(report(title, TF_BOTH, out))


@pytest.mark.parametrize("title", [
    "RuntimeError: Input type (torch.cuda.FloatTensor) and weight type (torch.FloatTensor) should be the same",
    "tf.gather raises an error on GPU",
    "tf.gather on GPU after updating to 2.16",
])
def test_a_title_naming_one_device_is_no_discrepancy_when_it_is_an_error_or_another_axis(title: str) -> None:
    assert not is_gcrde(report(title, TF_BOTH, "InvalidArgumentError: indices[1] = 7 is not in [0, 3)"))


@pytest.mark.parametrize("title", [
    "torch.cuda.current_device() returns the wrong device index",
    "wrong GPU memory reported for my tensor on cuda",
    "wrong results on GPU when two CUDA streams write the same tensor",
    "my custom CUDA kernel gives wrong results",
    "wrong results on GPU with DataParallel",
    "DataLoader returns wrong batches on GPU with pin_memory=True",
    "torch.randn on cuda gives different numbers with the same seed",
])
def test_a_wrong_title_about_the_devices_own_bookkeeping_or_the_reporters_kernel_is_no_discrepancy(title: str) -> None:
    assert not is_gcrde(report(title, GPU_SNIPPET, GPU_OUT))


def test_a_precision_comparison_is_another_axis() -> None:
    code = "model = model.half().cuda()\nprint(model(x.half().cuda()))"
    out = "tensor([nan, nan], device='cuda:0', dtype=torch.float16)\nIn float32 the outputs are fine."
    assert not is_gcrde(report("Inference is wrong when using half precision on GPU", code, out))
    got = rules(report("Outputs turn nan on GPU", code, out))
    assert got.flags["axis"] == 1.0


def test_log_lines_naming_cpu_instructions_and_a_gpu_device_are_no_comparison() -> None:
    out = ("This TensorFlow binary is optimized to use available CPU instructions in performance-critical operations.\n"
           "Created device /job:localhost/replica:0/task:0/device:GPU:0 with 14617 MB memory:  -> device: 0, name: T4\n"
           "tf.Tensor([[0.1+0.2j]], shape=(1, 1), dtype=complex64)")
    code = "import tensorflow as tf\nx = tf.random.normal([1, 1000])\nprint(tf.signal.stft(x, 255, 128))"
    assert not is_gcrde(report("tf.signal.stft gives wrong values for odd frame lengths", code, out))
