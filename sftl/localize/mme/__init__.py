"""Missing-module-error localizer: from an AttributeError/ImportError to the framework file that lacks the name.

Two methods share the evidence reading (`evidence`):

* `paper` (`paper.py`): the published SFTL method — traceback files are the suspects, the modules
  each imports are scored by Needleman–Wunsch similarity against the missing owner, and the top
  three files' classes are checked for the missing attribute.
* `sftl` (`locate.py`): resolves the owner to the class that defines it (imports, re-exports,
  aliases, receiver annotations; `classes.py`), walks its class hierarchy to the class that should
  define the name (`attribute.py`), covers the module/import/overload variants of the error
  (`modules.py`), and abstains on user errors. It ranks the file that *refers* to the name when the
  evidence says the owner is not at fault: an owner outside the framework (`foreign.py`), a name
  renamed, moved or never defined across the cached releases before and after (`releases.py`), a
  circular import (`modules.py`); the class that never sets a name its base promises (`state.py`);
  the framework's model of a Python type (`models.py`).
"""

from __future__ import annotations

from sftl.localize.mme.evidence import Missing, frame_repo_path, guess_framework, parse_missing
from sftl.localize.mme.locate import localize_sftl
from sftl.localize.mme.paper import localize_paper

__all__ = ["Missing", "frame_repo_path", "guess_framework", "localize_paper", "localize_sftl", "parse_missing"]
