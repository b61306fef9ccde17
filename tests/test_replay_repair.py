"""Snippets as reporters paste them: each repair is minimal, listed, and leaves what the code computes alone."""

from __future__ import annotations

import subprocess
import sys

from sftl.extract.repair import (
    add_missing_imports,
    fix_print_statements,
    free_names,
    imported_modules,
    join_blocks,
    repair_snippet,
    strip_notebook,
    strip_prompts,
)


def _run(code: str) -> str:
    """What the code prints, run by a real interpreter (numpy is not needed by these snippets)."""
    return subprocess.run([sys.executable, "-I", "-c", code], capture_output=True, text=True, timeout=60, check=True).stdout


def test_a_repl_transcript_becomes_its_statements_and_its_output_is_dropped() -> None:
    pasted = (">>> x = [1, 2, 3]\n>>> for v in x:\n...     print(v * 2)\n...\n2\n4\n6\n"
              ">>> sum(x)\n6\n")
    code, repair = strip_prompts(pasted)
    assert code == "x = [1, 2, 3]\nfor v in x:\n    print(v * 2)\n\nsum(x)\n"
    assert repair is not None and repair.kind == "prompts" and "dropped 4 output line(s)" in repair.detail
    assert _run(code) == "2\n4\n6\n"
    assert strip_prompts("x = 1\n") == ("x = 1\n", None)


def test_notebook_cells_lose_prompts_output_magics_and_shell_lines() -> None:
    pasted = ("In [1]: %matplotlib inline\n\nIn [2]: !pip install foo\n\n"
              "In [3]: x = 3\n   ...: y = x * 2\n\nIn [4]: y\nOut[4]: 6\n\n"
              "In [5]: %time z = y + 1\n\nIn [6]: print(z)\n")
    code, repairs = strip_notebook(pasted)
    kinds = [r.kind for r in repairs]
    assert kinds[0] == "notebook" and "magic" in kinds and "shell" in kinds
    assert "dropped 1 'Out[n]:' line(s)" in repairs[0].detail
    assert any("ran '%time z = y + 1' once" in r.detail for r in repairs)
    assert "%" not in code and "!" not in code and "In [" not in code and "Out[" not in code
    assert _run(code) == "7\n"


def test_python2_print_statements_become_calls_only_when_the_code_is_python2() -> None:
    code, repair = fix_print_statements('x = 2\nprint "x is", x\nprint x * 3,\nprint\nprint(x)\n')
    assert code == "x = 2\nprint(\"x is\", x)\nprint(x * 3, end=' ')\nprint()\nprint(x)\n"
    assert repair is not None and repair.kind == "print-statement" and "3 Python 2 print" in repair.detail
    # Python 3 code is left alone, even where `print` stands alone
    assert fix_print_statements("print\nprint(1)\n") == ("print\nprint(1)\n", None)
    # code broken for another reason is not touched
    assert fix_print_statements("print 'a'\ndef f(:\n") == ("print 'a'\ndef f(:\n", None)


def test_missing_framework_imports_are_inferred_from_the_names_used() -> None:
    code, repair = add_missing_imports("x = torch.ones(2)\ny = F.relu(x)\nm = nn.Linear(2, 2)\n", "pytorch")
    assert code.splitlines()[:3] == ["import torch", "import torch.nn.functional as F", "import torch.nn as nn"]
    assert repair is not None and repair.kind == "import"
    code, repair = add_missing_imports("a = tf.constant(np.zeros(3))\n", "tensorflow")
    assert code.startswith("import tensorflow as tf\nimport numpy as np\n")
    # a name the fragment binds itself, or imports, is not touched; nor is `F` in a TensorFlow report
    assert add_missing_imports("import torch\nnp = 3\nprint(torch, np)\n", "pytorch")[1] is None
    assert add_missing_imports("y = F(2)\n", "tensorflow")[1] is None
    # `from __future__` stays first
    code, _ = add_missing_imports("from __future__ import print_function\nprint(np.pi)\n", "tensorflow")
    assert code.splitlines()[:2] == ["from __future__ import print_function", "import numpy as np"]


def test_free_names_ignore_builtins_parameters_comprehensions_and_star_imports() -> None:
    assert free_names("def f(a):\n    return [b for b in a] + list(c)\n") == ["c"]
    assert free_names("from torch import *\nx = tensor([1])\n") == []
    assert free_names("try:\n    pass\nexcept ValueError as e:\n    print(e)\n") == []


def test_code_split_across_blocks_is_joined_with_what_defines_its_names() -> None:
    model = "import torch\nclass Net(torch.nn.Module):\n    def forward(self, x):\n        return x * 2\n"
    unrelated = "data = [1, 2]\n"
    snippet = "net = Net()\nprint(net(torch.ones(1)))\n"
    code, repair = join_blocks(snippet, [model, unrelated, snippet])
    assert code == model.rstrip("\n") + "\n\n" + snippet
    assert repair is not None and repair.kind == "joined-blocks" and "define Net" in repair.detail
    assert join_blocks("print(1)\n", [model]) == ("print(1)\n", None)


def test_repair_snippet_lists_every_repair_and_a_clean_snippet_needs_none() -> None:
    clean = "import torch\nprint(torch.ones(2))\n"
    assert repair_snippet(clean, "pytorch").repairs == ()
    assert repair_snippet(clean, "pytorch").code == clean
    fixed = repair_snippet(">>> x = torch.zeros(2)\n>>> print x\n", "pytorch")
    assert [r.kind for r in fixed.repairs] == ["prompts", "print-statement", "import"]
    assert fixed.code == "import torch\nx = torch.zeros(2)\nprint(x)\n"
    assert fixed.original.startswith(">>>")


def test_repaired_code_computes_what_the_original_meant() -> None:
    py2 = "total = 0\nfor i in range(4):\n    total += i\nprint 'total', total\n"
    assert _run(repair_snippet(py2).code) == "total 6\n"


def test_imported_modules_keep_torch_utils_tensorboard_whole() -> None:
    code = "import torch\nfrom torch.utils.tensorboard import SummaryWriter\nimport scipy.sparse\nfrom . import x\n"
    assert imported_modules(code) == ["torch", "torch.utils.tensorboard", "scipy"]


def test_an_ipython_session_with_a_traceback_yields_its_cells_as_the_snippet() -> None:
    from sftl.extract import extract_text

    body = ("Ran in ipython:\n\n```\nIn [1]: import math\n/lib/python3.5/importlib/_bootstrap.py:222: RuntimeWarning: x\n"
            "  return f(*args, **kwds)\n\nIn [2]: def f(x):\n   ...:     return math.sqrt(x)\n   ...:\n\n"
            "In [3]: f(-1)\n---------------------------------------------------------------------------\n"
            "ValueError                                Traceback (most recent call last)\n<ipython-input-3> in <module>\n"
            "----> 1 f(-1)\n\nValueError: math domain error\n```\n")
    ex = extract_text("f fails", body)
    assert ex.snippet is not None and ex.snippet.code == "import math\ndef f(x):\n    return math.sqrt(x)\n\nf(-1)"
    assert "IPython session" in ex.snippet.reason or "ipython" in ex.snippet.reason
    assert ex.traceback is not None and ex.traceback.exception == "ValueError"


def test_print_statements_keep_their_comments_outside_the_call() -> None:
    code, repair = fix_print_statements("x = [1]\nprint x[0]     # 1\nprint '#', x  # a '#' inside a string\n")
    assert code == "x = [1]\nprint(x[0])  # 1\nprint('#', x)  # a '#' inside a string\n"
    assert repair is not None and _run(code) == "1\n# [1]\n"


def test_typographic_quotes_become_straight_only_when_that_makes_the_code_parse() -> None:
    from sftl.extract.repair import fix_typographic_quotes

    code, repair = fix_typographic_quotes("x = [\u2018qq\u2019, \u201cww\u201d]\nprint(x)\n")
    assert code == "x = ['qq', \"ww\"]\nprint(x)\n" and repair is not None and "4 typographic" in repair.detail
    inside = "print('\u2018quoted\u2019 in a string')\n"
    assert fix_typographic_quotes(inside) == (inside, None)  # it parses: the quotes are the program's text


def test_a_standard_library_module_used_but_never_imported_is_imported() -> None:
    code, repair = add_missing_imports("f = functools.partial(max, 1)\nprint(f(2))\n", "tensorflow")
    assert code == "import functools\nf = functools.partial(max, 1)\nprint(f(2))\n" and _run(code) == "2\n"
    assert repair is not None and "functools" in repair.detail
    # a free name that is a module's name but is not used as one (`print(os)`) is left to fail as reported
    assert add_missing_imports("print(os)\n", "tensorflow") == ("print(os)\n", None)


def test_a_snippet_pasted_with_a_margin_loses_it_only_when_that_makes_it_parse() -> None:
    from sftl.extract.repair import dedent

    code, repair = dedent("    x = 2\n    if x:\n        print(x)\n")
    assert code == "x = 2\nif x:\n    print(x)\n" and repair is not None and repair.kind == "indentation"
    assert dedent("x = 1\n") == ("x = 1\n", None)
