"""Keep pyarrow from importing pandas in processes that never hand it pandas objects.

pyarrow's first conversion of a Python object (`pa.array` of a list, `pa.scalar`, `pa.table` of a
dict) imports pandas only to ask whether the object is a pandas Series: ~0.2 s of CPU, which in
the snapshot job fell inside the MySQL global read lock (the schema history's first record is
written while it is held). pyarrow asks once per process and remembers the answer, so
`skip_pandas_probe` lets that one question find no pandas. pandas stays importable: `to_pandas()`
and `import pandas` still work, since pyarrow imports it when a pandas result is really asked for.
pyarrow has no setting for this; the finder below is removed as soon as the probe has run.

pyspark asks too, in the job's driver: the first JVM call of a SparkContext's start passes its
arguments through py4j's input converters, and pyspark's NumPy converter imports
`pyspark.testing.utils` for a `have_numpy` flag; that module imports pandas (0.26 s of CPU here,
0.7 s in a profile of a loaded 2-core run, on the thread that competes with the driver's chunk
reading) only to set `have_pandas` for pyspark's own test helpers. `skip_pyspark_pandas_check`
imports it first with pandas hidden (0.38 -> 0.09 s).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


class _NoPandas:
    """A meta-path finder that says pandas does not exist (for the probe only)."""

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> None:
        if name == "pandas" or name.startswith("pandas."):
            raise ModuleNotFoundError("pandas is not used here", name=name)


@contextmanager
def _pandas_hidden() -> Iterator[None]:
    finder = _NoPandas()
    sys.meta_path.insert(0, finder)
    try:
        yield
    finally:
        sys.meta_path.remove(finder)


def skip_pandas_probe() -> None:
    """Answer pyarrow's "is pandas there?" with no, unless pandas is loaded already."""
    if "pandas" in sys.modules:
        return
    import pyarrow as pa

    with _pandas_hidden():
        pa.array([0])  # the first Python-object conversion runs the probe


def skip_pyspark_pandas_check() -> None:
    """Import pyspark's test helpers (`pyspark.testing.utils`, which a SparkContext's start
    imports) with pandas hidden, unless pandas or they are loaded already: they then record
    `have_pandas = False`, which only pyspark's own test helpers read."""
    if "pandas" in sys.modules or "pyspark.testing.utils" in sys.modules:
        return
    with _pandas_hidden():
        import pyspark.testing.utils  # noqa: F401
