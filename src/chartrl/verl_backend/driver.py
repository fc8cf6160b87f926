"""The NVIDIA driver a verl job's CUDA wheels need, checked on the node before verl starts.

requirements/gpu.lock resolves PyPI's default wheels, which for torch 2.11 and vLLM 0.24 are CUDA 13 builds; CUDA
13 runs on Linux drivers 580.65.06 and newer (NVIDIA's CUDA Toolkit release notes, "CUDA Driver", table 3). On an
older driver (many clusters run 535-570) torch sees no GPU, and verl fails minutes in with an error that does not
name the driver. So a verl job compares the node's driver (``nvidia-smi``) with the floor of the CUDA wheels its
environment holds (the ``nvidia-cuda-runtime`` distribution torch loads) and refuses to start below it. A node
without ``nvidia-smi`` (a CPU node running a Ray job's driver) or an environment without CUDA wheels is not
checked.
"""

from __future__ import annotations

import subprocess
import sys
from importlib.metadata import PackageNotFoundError, version

from chartrl.errors import ChartrlError

DRIVER_FLOORS = {13: "580.65.06", 12: "525.60.13"}
"""CUDA major version -> the oldest Linux driver that runs it (CUDA 12.x on 525.60.13 and newer through minor-version
compatibility; CUDA 13.0 GA needs 580.65.06), from NVIDIA's CUDA Toolkit release notes."""
CUDA_RUNTIME_WHEELS = ("nvidia-cuda-runtime", "nvidia-cuda-runtime-cu12")
"""The CUDA runtime's distribution in a cu13 environment (named without a suffix, versioned 13.x) and a cu12 one."""


class DriverTooOld(ChartrlError):
    """The node's NVIDIA driver cannot run the environment's CUDA wheels."""


def environment_cuda_major() -> int | None:
    """The CUDA major version of the runtime wheels installed here, or None (a CPU build, a system CUDA)."""
    for name in CUDA_RUNTIME_WHEELS:
        try:
            return int(version(name).split(".")[0])
        except (PackageNotFoundError, ValueError):
            continue
    return None


def node_driver_version() -> str | None:
    """The NVIDIA driver of this node (``nvidia-smi``, first GPU), or None when there is none to ask."""
    try:
        result = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL,
        )  # fmt: skip
    except (OSError, subprocess.TimeoutExpired):
        return None
    lines = result.stdout.split()
    return lines[0] if result.returncode == 0 and lines else None


def _numbers(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split(".") if part.isdigit())


def driver_problem(driver: str | None, cuda_major: int | None) -> str | None:
    """Why ``driver`` cannot run CUDA ``cuda_major`` wheels, or None (it can, or either is unknown)."""
    floor = DRIVER_FLOORS.get(cuda_major) if cuda_major is not None else None
    if driver is None or floor is None or _numbers(driver) >= _numbers(floor):
        return None
    return (
        f"this node's NVIDIA driver {driver} is older than {floor}, the oldest that runs the CUDA {cuda_major} wheels "
        f"of the environment {sys.prefix} (requirements/gpu.lock: torch 2.11 and vLLM 0.24 for CUDA 13), so torch "
        "would find no GPU. Run on nodes whose driver is R580 or newer (nvidia-smi), or make the GPU environment "
        "from CUDA 12.8 wheels (docs/cluster.md, 'The NVIDIA driver')"
    )


def refuse_an_old_driver() -> None:
    """Raise :class:`DriverTooOld` on a node whose driver is below the floor of this environment's CUDA wheels."""
    problem = driver_problem(node_driver_version(), environment_cuda_major())
    if problem:
        raise DriverTooOld(problem)
