"""The SDK's tests run against a real `forge serve` of their own (tests/support/forge_serve.py):
the local fleet, a port the kernel picks, temporary storage root and state directory, kubesim's
vLLM emulator for playgrounds. STARFORGE_FORGE_BIN names the binary (ctest sets it). Every answer
the SDK receives is also validated against src/api/openapi.json (tests/support/openapi_check.py).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "support"))
sys.path.insert(0, str(REPO / "python" / "src"))

from forge_serve import ForgeServe  # noqa: E402
from openapi_check import Checker  # noqa: E402

import starforge  # noqa: E402


@pytest.fixture(scope="session")
def forge_bin() -> str:
    path = os.environ.get("STARFORGE_FORGE_BIN", "")
    if not path or not os.access(path, os.X_OK):
        pytest.fail("STARFORGE_FORGE_BIN must name the forge binary (ctest sets it)")
    return path


@pytest.fixture(scope="session")
def checker() -> Checker:
    c = Checker()
    yield c
    assert not c.problems, "answers that do not match openapi.json:\n" + "\n".join(
        dict.fromkeys(c.problems)
    )


@pytest.fixture(scope="session")
def serve(forge_bin):
    s = ForgeServe(forge_bin, vllm=True)
    s.start(alice=False)
    yield s
    s.stop()


def make_client(serve, checker, token, **kw) -> starforge.Client:
    c = starforge.Client(server=serve.url, token=token, **kw)
    c._http.event_hooks["response"].append(checker.hook)
    return c


@pytest.fixture
def client(serve, checker, forge_bin):
    # Without forge on the PATH unless a test asks: the plain code upload.
    c = make_client(serve, checker, serve.alice)
    yield c
    c.close()


@pytest.fixture
def admin(serve, checker):
    c = make_client(serve, checker, serve.admin_token)
    yield c
    c.close()


@pytest.fixture
def code_dir(tmp_path) -> Path:
    d = tmp_path / "code"
    d.mkdir()
    (d / "main.py").write_text(
        "import os, sys, time\n"
        "d = os.environ['FORGE_JOB_DIR']\n"
        "os.makedirs(os.path.join(d, 'ckpt'), exist_ok=True)\n"
        "open(os.path.join(d, 'ckpt', 'model.bin'), 'w').write('weights')\n"
        "for i in range(5):\n"
        "    print('step', i, 'loss', 1.0 / (i + 1), flush=True)\n"
        "if len(sys.argv) > 1:\n"
        "    time.sleep(float(sys.argv[1]))\n"
        "sys.exit(int(os.environ.get('EXIT', '0')))\n"
    )
    return d


@pytest.fixture(scope="session")
def serve_kuberay(forge_bin):
    """A second server with the kuberay fleet too, on a kubesim and an s3rver of its own."""
    s = ForgeServe(forge_bin, kuberay=True)
    s.start(alice=False)
    yield s
    s.stop()
