#!/usr/bin/env python3
"""Reads and writes the project's tensor files (".g100"): the weights, inputs and outputs of
capstone_mc_resnet18 (capstone_dual_conv/), in the format its loader reads.

  python3 scripts/tensor_file.py FILE      # lists the tensors: name, shape, min, max, mean

Layout (little-endian, no padding):
  magic "G100TNS1" (8 bytes), count uint32 (1..100000), then per tensor:
  name_len uint32 (1..255), name (printable ASCII), dtype uint32 (1 = float32, the only one),
  ndim uint32 (1..8), dims int64[ndim] (each >= 1, product < 2^40), data float32[product].
  The file ends exactly after the last tensor.
A malformed file raises ValueError with one line naming the file and the first problem; tensor
indices in the messages count from 0.

Pure Python + numpy: read_tensor_file(path) -> {name: float32 array} in file order;
write_tensor_file(path, [(name, array), ...]).
"""
import os
import struct
import sys

import numpy as np

MAGIC = b"G100TNS1"
DTYPE_FLOAT32 = 1
MAX_TENSORS = 100000
MAX_NAME = 255
MAX_NDIM = 8
MAX_ELEMENTS = 1 << 40  # exclusive


def _check_name(name):
    """The name's problem as a phrase, or None if it is valid."""
    if not 1 <= len(name) <= MAX_NAME:
        return f"name length {len(name)} (1..{MAX_NAME} allowed)"
    if any(not 0x20 <= ord(ch) <= 0x7E for ch in name):
        return f"name {name!r} has a character that is not printable ASCII"
    return None


class _Reader:
    """A cursor over the file's bytes that raises the spec's one-line errors."""

    def __init__(self, path, buf):
        self.path, self.buf, self.pos = path, buf, 0

    def fail(self, what):
        raise ValueError(f"{self.path}: {what}")

    def take(self, nbytes, where, what):
        """Advances past nbytes and returns where they start; `where what` name them."""
        if self.pos + nbytes > len(self.buf):
            self.fail(f"truncated in {where}: {nbytes} bytes of {what} expected, "
                      f"{len(self.buf) - self.pos} present")
        start = self.pos
        self.pos += nbytes
        return start

    def u32(self, where, what):
        return struct.unpack_from("<I", self.buf, self.take(4, where, what))[0]


def _read_one(rd, index):
    """Reads tensor `index` at the cursor; returns (name, array)."""
    where = f"tensor {index}"
    name_len = rd.u32(where, "name length")
    if not 1 <= name_len <= MAX_NAME:
        rd.fail(f"tensor {index} has name length {name_len} (1..{MAX_NAME} allowed)")
    start = rd.take(name_len, where, "name")
    name = bytes(rd.buf[start:rd.pos]).decode("latin-1")
    problem = _check_name(name)
    if problem:
        rd.fail(f"tensor {index}: {problem}")
    where = f"tensor {index} ({name!r})"
    dtype = rd.u32(where, "dtype")
    if dtype != DTYPE_FLOAT32:
        rd.fail(f"tensor {index} {name!r} has dtype {dtype} (only 1 = float32 is read)")
    ndim = rd.u32(where, "ndim")
    if not 1 <= ndim <= MAX_NDIM:
        rd.fail(f"tensor {index} {name!r} has ndim {ndim} (1..{MAX_NDIM} allowed)")
    dims = struct.unpack_from(f"<{ndim}q", rd.buf, rd.take(8 * ndim, where, "dims"))
    count = 1
    for d in dims:
        if d < 1:
            rd.fail(f"tensor {index} {name!r} has dims {list(dims)} (each must be >= 1)")
        count *= d
        if count >= MAX_ELEMENTS:
            rd.fail(f"tensor {index} {name!r} has dims {list(dims)} (2^40 elements or more)")
    offset = rd.take(4 * count, where, "data")
    data = np.frombuffer(rd.buf, dtype="<f4", count=count, offset=offset)
    return name, data.astype(np.float32, copy=False).reshape(dims)


def read_tensor_file(path):
    """Returns {name: float32 ndarray (shaped, writable)} in the file's order."""
    with open(path, "rb") as f:
        buf = bytearray(f.read())  # a bytearray, so the arrays viewing it are writable
    rd = _Reader(os.fspath(path), buf)
    head = bytes(buf[:len(MAGIC)])
    if head != MAGIC:
        shown = "".join(chr(b) if 0x20 <= b <= 0x7E else f"\\x{b:02x}" for b in head)
        rd.fail(f"not a tensor file (magic '{shown}', expected 'G100TNS1')")
    rd.pos = len(MAGIC)
    count = rd.u32("the header", "tensor count")
    if not 1 <= count <= MAX_TENSORS:
        rd.fail(f"tensor count {count} (1..{MAX_TENSORS} allowed)")
    tensors = {}
    for index in range(count):
        name, array = _read_one(rd, index)
        if name in tensors:
            rd.fail(f"tensor {index} {name!r} is a duplicate name")
        tensors[name] = array
    if rd.pos != len(buf):
        rd.fail(f"{len(buf) - rd.pos} trailing bytes after the last tensor")
    return tensors


def write_tensor_file(path, tensors):
    """Writes [(name, array), ...] (or a dict) as float32; checks names and shapes first."""
    items = list(tensors.items()) if hasattr(tensors, "items") else list(tensors)
    where = os.fspath(path)
    if not 1 <= len(items) <= MAX_TENSORS:
        raise ValueError(f"{where}: tensor count {len(items)} (1..{MAX_TENSORS} allowed)")
    seen = set()
    chunks = [MAGIC, struct.pack("<I", len(items))]
    for index, (name, array) in enumerate(items):
        problem = _check_name(name)
        if problem:
            raise ValueError(f"{where}: tensor {index}: {problem}")
        if name in seen:
            raise ValueError(f"{where}: tensor {index} {name!r} is a duplicate name")
        seen.add(name)
        a = np.asarray(array, dtype="<f4")  # (ascontiguousarray would make a 0-d array 1-d)
        if not 1 <= a.ndim <= MAX_NDIM or a.size == 0 or a.size >= MAX_ELEMENTS:
            raise ValueError(f"{where}: tensor {index} {name!r} has shape {list(a.shape)} "
                             f"(1..{MAX_NDIM} dims, each >= 1, fewer than 2^40 elements)")
        chunks.append(struct.pack(f"<I{len(name)}sII{a.ndim}q", len(name), name.encode("ascii"),
                                  DTYPE_FLOAT32, a.ndim, *a.shape))
        chunks.append(a.tobytes(order="C"))
    with open(path, "wb") as f:
        for chunk in chunks:
            f.write(chunk)


def main(argv):
    if len(argv) != 2:
        print(f"usage: {argv[0]} FILE.g100", file=sys.stderr)
        return 2
    try:
        tensors = read_tensor_file(argv[1])
    except (OSError, ValueError) as e:
        print(e, file=sys.stderr)
        return 2
    for name, a in tensors.items():
        print(f"{name:<40} {str(list(a.shape)):<20} min {a.min():+.4g}  max {a.max():+.4g}  "
              f"mean {a.mean(dtype=np.float64):+.4g}")
    print(f"{len(tensors)} tensors, {sum(a.size for a in tensors.values())} values")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
