"""StarForge's in-capsule runner.

Shipped as `.starforge/runner.pyz` inside every Job Capsule and started, from the unpacked
capsule's root, as `python3 .starforge/runner.pyz run`. Standard library only; Python >= 3.8.
See runner/README.md in the StarForge repository for the contract.
"""

__version__ = "1"
