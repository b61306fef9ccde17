"""What sources know of each framework: package and import names, the C++ folders localizers read, wheel paths mapped to the repository's."""

from __future__ import annotations

import re

from sftl.errors import InputError
from sftl.releases import normalize_framework

FRAMEWORKS = ("pytorch", "tensorflow")
PACKAGES = {"pytorch": ("torch",), "tensorflow": ("tensorflow-cpu", "tensorflow")}
IMPORT_NAMES = {"pytorch": "torch", "tensorflow": "tensorflow"}


def wheel_packages(framework: str, version: str) -> tuple[str, ...]:
    """The packages whose wheel of `version` is the release's sources, most wanted first.

    A user who reports a GPU/CPU discrepancy runs the GPU-enabled build, and only its compiled libraries
    name the GPU kernel files (.cu.cc, the headers whose CHECKs they inline): `tensorflow-gpu` up to 2.0,
    the plain `tensorflow` wheel from 2.1 on (GPU-enabled on Linux x86_64). The CPU-only wheel
    (`tensorflow-cpu`) is the fallback; the Python files are the same in all of them.
    """
    if framework != "tensorflow":
        return PACKAGES[framework]
    m = re.match(r"(\d+)\.(\d+)", version)
    if m is not None and (int(m.group(1)), int(m.group(2))) <= (2, 0):
        return ("tensorflow-gpu", "tensorflow", "tensorflow-cpu")
    return ("tensorflow", "tensorflow-cpu")


# the C++/CUDA parts a localizer reads; `sftl sources fetch --cxx` downloads these
CXX_PREFIXES = {
    "pytorch": (
        "aten/src/ATen/native/",
        "aten/src/THC/",
        "aten/src/TH/",
        "aten/src/THCUNN/",
        "aten/src/THNN/",
        "aten/src/ATen/Declarations.cwrap",  # old releases' TH bindings (op -> THTensor_ name)
        "aten/src/ATen/nn.yaml",
    ),
    "tensorflow": ("tensorflow/core/kernels/",),
}
_YAML_IN_WHEEL = "torchgen/packaged/ATen/native/native_functions.yaml"
NATIVE_FUNCTIONS = "aten/src/ATen/native/native_functions.yaml"


def parse_spec(spec: str) -> tuple[str, str]:
    """'pytorch==1.12.1' -> ('pytorch', '1.12.1')."""
    name, sep, version = spec.partition("==")
    if not sep or not version.strip():
        raise InputError(f"expected FRAMEWORK==VERSION (e.g. pytorch==1.12.1), got {spec!r}")
    return normalize_framework(name), version.strip()


_WHEEL_DATA = re.compile(r"[^/]+\.data/(?:purelib|platlib)/")


def repo_path(framework: str, installed: str) -> str | None:
    """Map a path inside an installed package / wheel to the framework repository's path.

    Wheels mirror the repository for Python files (torch/..., tensorflow/python/...); the few
    exceptions are mapped here. Returns None for files that have no repository counterpart
    (metadata, compiled libraries).
    """
    if ".dist-info/" in installed or installed.endswith((".so", ".pyc", ".dll", ".dylib")) or ".so." in installed:
        return None
    # older wheels (TensorFlow 1.x) keep the package under '<name>-<version>.data/purelib/'
    data = _WHEEL_DATA.match(installed)
    if data:
        installed = installed[data.end():]
    if framework == "pytorch":
        if installed == _YAML_IN_WHEEL:
            return NATIVE_FUNCTIONS
        if installed.startswith("torchgen/packaged/ATen/"):
            return "aten/src/ATen/" + installed[len("torchgen/packaged/ATen/") :]
        if installed.startswith("torch/lib/include/"):  # 0.4-1.0 wheels kept the headers under torch/lib/
            installed = "torch/include/" + installed[len("torch/lib/include/") :]
        elif installed in ("torch/lib/THNN.h", "torch/lib/THCUNN.h"):  # 1.0: THNN/THCUNN's generic API headers
            lib = installed[len("torch/lib/") : -len(".h")]
            return f"aten/src/{lib}/generic/{lib}.h"
        if installed.startswith("torch/include/"):
            # headers shipped for extensions: torch/include/ATen/... -> aten/src/ATen/...
            rest = installed[len("torch/include/") :]
            if rest.startswith(("ATen/", "TH/", "THC/", "THNN/", "THCUNN/")):
                return "aten/src/" + rest
            if rest.startswith("c10/"):
                return rest
            if rest.startswith("torch/csrc/"):
                return rest
            return None
        if installed.startswith(("torch/", "torchgen/", "functorch/")):
            return installed
        return None
    if framework == "tensorflow":
        if installed.startswith("tensorflow_core/"):
            # TF 2.0/2.1 wheels: the real package is tensorflow_core/, tensorflow/ only a shim over it
            installed = "tensorflow/" + installed[len("tensorflow_core/") :]
        if installed.startswith("tensorflow/include/"):
            rest = installed[len("tensorflow/include/") :]
            return rest if rest.startswith("tensorflow/") else None
        if installed.startswith("tensorflow/"):
            return installed
        return None
    return None
