#!/usr/bin/env python3
"""Runs the extension's pytest suite (tests/) for ctest: exit 77, which ctest reports as Skipped,
when the extension was not built, or PyTorch, pytest or a GPU is missing; else pytest's own status.

  python3 run_tests.py --library build/capstone_dual_conv/torch/libgpu100_torch.so [pytest args]
  python3 run_tests.py --not-built "<why>"
"""
import os
import sys

SKIP = 77
HERE = os.path.dirname(os.path.abspath(__file__))


def skip(why):
    print(f"GPU100_SKIP: {why}")
    return SKIP


def main(argv):
    if len(argv) >= 2 and argv[0] == "--not-built":
        return skip(f"the PyTorch extension was not built: {argv[1]}")
    if len(argv) < 2 or argv[0] != "--library":
        print(__doc__, file=sys.stderr)
        return 2
    library, rest = argv[1], argv[2:]
    try:
        import torch
    except ImportError as e:
        return skip(f"PyTorch is not importable here ({e})")
    try:
        import pytest
    except ImportError:
        return skip("pytest is not installed (pip install pytest)")
    if not torch.cuda.is_available():
        return skip("no CUDA GPU is visible to PyTorch")
    os.environ["GPU100_TORCH_LIBRARY"] = os.path.abspath(library)
    sys.path.insert(0, HERE)  # the gpu100_torch package, as `pip install -e` would give it
    return pytest.main(["-q", "-p", "no:cacheprovider", os.path.join(HERE, "tests")] + rest)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
