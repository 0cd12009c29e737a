"""Keep pyarrow from importing pandas in processes that never hand it pandas objects.

pyarrow's first conversion of a Python object (`pa.array` of a list, `pa.scalar`, `pa.table` of a
dict) imports pandas only to ask whether the object is a pandas Series: ~0.2 s of CPU, which in
the snapshot job fell inside the MySQL global read lock (the schema history's first record is
written while it is held). pyarrow asks once per process and remembers the answer, so
`skip_pandas_probe` lets that one question find no pandas. pandas stays importable: `to_pandas()`
and `import pandas` still work, since pyarrow imports it when a pandas result is really asked for.
pyarrow has no setting for this; the finder below is removed as soon as the probe has run.
"""

from __future__ import annotations

import sys
from typing import Any


class _NoPandas:
    """A meta-path finder that says pandas does not exist (for the probe only)."""

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> None:
        if name == "pandas" or name.startswith("pandas."):
            raise ModuleNotFoundError("pandas is not used here", name=name)


def skip_pandas_probe() -> None:
    """Answer pyarrow's "is pandas there?" with no, unless pandas is loaded already."""
    if "pandas" in sys.modules:
        return
    import pyarrow as pa

    finder = _NoPandas()
    sys.meta_path.insert(0, finder)
    try:
        pa.array([0])  # the first Python-object conversion runs the probe
    finally:
        sys.meta_path.remove(finder)
