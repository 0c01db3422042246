"""`pip install ./python` works as docs/python.md and python/README.md write it: in a fresh
virtual environment, from the repository's root, with pip's defaults (an isolated build that
fetches setuptools, httpx and its dependencies resolved from the index; PyPI or pip's cache).
The installed package, not the source tree, then talks to a real forge serve."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

PYTHON_DIR = Path(__file__).resolve().parents[1]


def test_pip_install_into_a_fresh_venv(serve, tmp_path):
    # From a copy laid out as the repository is (./python): pip builds in the source tree, and
    # setuptools would leave build/ and *.egg-info beside the real sources.
    root = tmp_path / "repo"
    shutil.copytree(PYTHON_DIR, root / "python",
                    ignore=shutil.ignore_patterns("build", "dist", "*.egg-info", "__pycache__",
                                                  "tests"))
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    bin_dir = venv / "bin"
    # The environment a researcher's shell would have: this venv first, nothing of the test's.
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME") and not k.startswith("FORGE_")
           and not k.startswith("PIP_")}
    env.update(VIRTUAL_ENV=str(venv), PATH=str(bin_dir) + os.pathsep + env.get("PATH", ""),
               HOME=str(tmp_path), PIP_DISABLE_PIP_VERSION_CHECK="1")
    # pip's cache stays the user's (HOME is moved so no config.json of forge login is read).
    env["PIP_CACHE_DIR"] = os.environ.get("PIP_CACHE_DIR",
                                          str(Path.home() / ".cache" / "pip"))
    out = subprocess.run(["pip", "install", "./python"], cwd=root, env=env, capture_output=True,
                         text=True, timeout=600)
    assert out.returncode == 0, f"pip install ./python failed:\n{out.stdout}\n{out.stderr}"
    assert "Successfully installed" in out.stdout and "starforge-0.1.0" in out.stdout, out.stdout

    probe = (
        "import pathlib, starforge, httpx\n"
        "pkg = pathlib.Path(starforge.__file__).parent\n"
        "print(pkg)\n"
        "print((pkg / 'py.typed').exists())\n"
        "print(starforge.Client().whoami().user)\n"
    )
    env.update(FORGE_SERVER=serve.url, FORGE_TOKEN=serve.alice)
    got = subprocess.run(["python", "-c", probe], cwd=tmp_path, env=env, capture_output=True,
                         text=True, timeout=120)
    assert got.returncode == 0, got.stderr
    pkg, typed, user = got.stdout.split()
    site = venv / "lib"
    assert Path(pkg).is_relative_to(site) and "site-packages" in pkg, pkg
    assert typed == "True"
    assert user == "alice"
