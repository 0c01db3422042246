"""StarForge from Python: submit training jobs, follow them, start playgrounds.

    import starforge
    client = starforge.Client()            # FORGE_SERVER/FORGE_TOKEN, else `forge login`'s
    job = client.submit("job.yaml", code="./my-code")
    for line in job.logs(follow=True):
        print(line)
    print(job.wait().phase)
"""

from ._client import Client
from ._errors import FieldError, StarForgeError
from ._models import (
    PHASES,
    TERMINAL_PHASES,
    Artifact,
    Capacity,
    CapsuleRef,
    Cleanup,
    Event,
    Job,
    JobResources,
    LogEnd,
    Playground,
    ResourceUsage,
    Transition,
    Whoami,
)

__all__ = [
    "Client",
    "StarForgeError",
    "FieldError",
    "Job",
    "Playground",
    "Event",
    "Transition",
    "Capacity",
    "Whoami",
    "Artifact",
    "LogEnd",
    "CapsuleRef",
    "Cleanup",
    "JobResources",
    "ResourceUsage",
    "PHASES",
    "TERMINAL_PHASES",
]
__version__ = "0.1.0"
