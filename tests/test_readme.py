"""Every ``python`` code block of the README runs as written, each as a script of its own
(a script, not ``python -c``: a process pool's children import its functions by name).

Blocks that are not meant to run use another fence language (``text``, ``sh``). The Dask
example needs the ``dask`` extra: skipped without it, except in CI's Dask step.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from importlib.util import find_spec
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BLOCKS = re.findall(
    r"^ *```python\n(.*?)^ *```$", (ROOT / "README.md").read_text("utf-8"), re.M | re.S
)


def block_id(source: str) -> str:
    """The block's number and, for the Dask example, "dask": CI's Dask step selects by it."""
    number = BLOCKS.index(source) + 1
    return f"block{number}-dask" if "distributed" in source else f"block{number}"


def test_the_readme_has_python_blocks() -> None:
    assert len(BLOCKS) >= 8


@pytest.mark.parametrize("source", BLOCKS, ids=block_id)
def test_readme_block_runs(source: str, tmp_path: Path) -> None:
    if "distributed" in source and find_spec("distributed") is None:
        if os.environ.get("PRIORITY_EXECUTOR_REQUIRE_DASK"):  # CI: this run must not skip
            pytest.fail("the dask extra is not installed")
        pytest.skip("the dask extra is not installed: pip install '.[dask]'")
    script = tmp_path / "example.py"
    # Blocks indented under a list item are indented in the README too.
    lines = source.splitlines()
    indent = min(len(line) - len(line.lstrip()) for line in lines if line.strip())
    script.write_text("\n".join(line[indent:] for line in lines) + "\n", "utf-8")
    # The checkout's package, as the tests import it, wherever the script runs.
    path = [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(path))
    result = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=45,
    )
    assert result.returncode == 0, f"{source}\n{result.stderr}"
