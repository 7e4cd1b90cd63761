"""Named numpy arrays in one zstd stream: how checkpoints store replay memory and state.

Atari frames are mostly flat background, so zstd at a low level shrinks them 60-180x at
GB/s (benchmarks/checkpoint.py measures it). It compresses in the calling thread: zstd's own
worker threads would come and go with every checkpoint. Arrays are streamed in
chunks in both directions, and read straight into preallocated arrays, so a 7 GB replay never
needs a second copy in RAM. zstd's frame checksum catches corruption on read.
"""

import json

import numpy as np
import zstandard

MAGIC = b"FDQNARR1"
_CHUNK = 4 << 20  # small: zstd copies each chunk it is given, and long runs watch RSS


class CorruptFile(Exception):
    """A file that does not hold what write_arrays wrote: truncated, damaged or foreign."""


def write_arrays(raw, arrays, level=1, threads=0):
    """Compress `arrays` ({name: ndarray}) into the open binary file `raw`."""
    header = json.dumps([[name, a.dtype.str, list(a.shape)] for name, a in arrays.items()])
    header = header.encode()
    compressor = zstandard.ZstdCompressor(level=level, threads=threads, write_checksum=True)
    with compressor.stream_writer(raw, closefd=False) as out:
        out.write(MAGIC + len(header).to_bytes(8, "little") + header)
        for array in arrays.values():
            view = memoryview(np.ascontiguousarray(array)).cast("B")
            for start in range(0, len(view), _CHUNK):
                out.write(view[start:start + _CHUNK])


def read_arrays(raw, into=None):
    """Read what write_arrays wrote; arrays named in `into` are filled in place.

    Raises CorruptFile on any mismatch: wrong magic, short data, a bad checksum, a shape or
    dtype that differs from the array it should fill, or trailing bytes.
    """
    into = into or {}
    try:
        with zstandard.ZstdDecompressor().stream_reader(raw, closefd=False) as inp:
            if _read_exact(inp, len(MAGIC)) != MAGIC:
                raise CorruptFile("not a fast-dqn array file")
            size = int.from_bytes(_read_exact(inp, 8), "little")
            header = json.loads(_read_exact(inp, size))
            out = {}
            for name, dtype, shape in header:
                target = into.get(name)
                if target is None:
                    target = np.empty(shape, np.dtype(dtype))
                elif target.shape != tuple(shape) or target.dtype != np.dtype(dtype):
                    raise CorruptFile(f"array '{name}' is {dtype}{tuple(shape)}, expected "
                                      f"{target.dtype.str}{target.shape}")
                _read_into(inp, memoryview(target).cast("B"))
                out[name] = target
            if inp.read(1):
                raise CorruptFile("unexpected data after the last array")
            return out
    except (zstandard.ZstdError, ValueError, EOFError) as error:
        raise CorruptFile(str(error)) from error


def _read_exact(inp, n):
    data = inp.read(n)
    if len(data) != n:
        raise CorruptFile("the file ends too early")
    return data


def _read_into(inp, view):
    done = 0
    while done < len(view):
        n = inp.readinto(view[done:done + _CHUNK])
        if n == 0:
            raise CorruptFile("the file ends too early")
        done += n
