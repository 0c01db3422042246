"""kubesim's Ray control-plane emulator.

This package is NOT Ray. It emulates the parts of Ray's control plane that KubeRay's
generated commands and the Ray Jobs REST API use (``ray start``, ``ray health-check``,
``ray job ...``, the dashboard's Jobs API, runtime_env working_dir handling), so that
pods in kubesim run their real commands. The Python ``ray`` library is not emulated:
``import ray`` in a job fails with ``ModuleNotFoundError`` exactly as on a host without
Ray. Python 3.8+ standard library only.
"""

import os

DEFAULT_RAY_VERSION = "2.60.0"  # the version scripts/ray-requirements.txt pins
EMULATOR_NAME = "kubesim Ray control-plane emulator"
EMULATOR_NOTE = EMULATOR_NAME + "; the Python ray library is not emulated"
# The dashboard's HTTP API version (ray.dashboard.modules.version.CURRENT_VERSION).
DASHBOARD_API_VERSION = "4"
RAY_COMMIT = "kubesim"


def ray_version() -> str:
    """The Ray version this emulator reports (env KUBESIM_RAY_VERSION overrides)."""
    return os.environ.get("KUBESIM_RAY_VERSION") or DEFAULT_RAY_VERSION
