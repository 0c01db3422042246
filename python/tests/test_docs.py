"""docs/python.md works as written: its `python` blocks, in order, as one
notebook would run them, from the repository's root against a real forge serve, with `forge` on
the PATH (so submit packs with the CLI, as the page says) and the client configured by
FORGE_SERVER / FORGE_TOKEN."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def blocks(text: str):
    return [m.group(1) for m in re.finditer(r"^```python\n(.*?)^```$", text, re.M | re.S)]


def test_walkthrough_runs_as_written(serve, forge_bin, tmp_path):
    code = blocks((REPO / "docs" / "python.md").read_text(encoding="utf-8"))
    assert len(code) >= 10, "the walk-through lost its blocks"
    script = tmp_path / "walkthrough.py"
    script.write_text("\n".join(code))
    env = {k: v for k, v in os.environ.items() if not k.startswith("FORGE_")}
    env.update(
        FORGE_SERVER=serve.url,
        FORGE_TOKEN=serve.alice,
        HOME=str(tmp_path),
        PATH=str(Path(forge_bin).parent) + os.pathsep + env.get("PATH", ""),
        PYTHONPATH=str(REPO / "python" / "src"),
    )
    env.pop("XDG_CONFIG_HOME", None)
    p = subprocess.run([sys.executable, str(script)], cwd=REPO, env=env, capture_output=True,
                       text=True, timeout=800)
    assert p.returncode == 0, f"stdout:\n{p.stdout[-3000:]}\nstderr:\n{p.stderr[-3000:]}"
    out = p.stdout
    for expected in ("alice False", "Succeeded", "422 Invalid", "Cancelled", "Ready"):
        assert expected in out, f"{expected!r} not in the output:\n{out}"
    assert out.rstrip().endswith("Stopped"), out
