#!/usr/bin/env python3
"""Rewrites the stored type of one tensor of a GGUF file in place: fuzz seeds of the types edgelm
reads but cannot write (the grid IQ formats, which only llama.cpp's quantizer writes).

The tensor keeps its data offset and its bytes (they become the blocks of the new type: any bytes
are a valid grid-IQ block), so the new type must take no more bytes than the old one; the
offsets of the other tensors stay valid. Standard library only.
Usage: gguf_retype.py FILE TENSOR_NAME_REGEX GGML_TYPE_ID  (every tensor whose whole name matches)
"""
import mmap
import re
import struct
import sys

# ggml type id -> (block elements, block bytes), for the types this script may write or read.
SIZES = {0: (1, 4), 1: (1, 2), 16: (256, 66), 17: (256, 74), 18: (256, 98), 19: (256, 50), 21: (256, 110),
         22: (256, 82), 29: (256, 56), 30: (1, 2)}
SCALAR = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}  # GGUF value type -> bytes


def main():
    path, pattern, new_type = sys.argv[1], re.compile(sys.argv[2].encode()), int(sys.argv[3])
    f = open(path, 'r+b')
    buf = mmap.mmap(f.fileno(), 0)
    done = 0
    assert buf[:4] == b'GGUF', 'not a GGUF file'
    n_tensors, n_kv = struct.unpack_from('<QQ', buf, 8)
    at = 24

    def skip_value(at, vtype):
        if vtype == 8:  # string
            (n,) = struct.unpack_from('<Q', buf, at)
            return at + 8 + n
        if vtype == 9:  # array
            etype, count = struct.unpack_from('<IQ', buf, at)
            at += 12
            for _ in range(count):
                at = skip_value(at, etype)
            return at
        return at + SCALAR[vtype]

    for _ in range(n_kv):
        (klen,) = struct.unpack_from('<Q', buf, at)
        at += 8 + klen
        (vtype,) = struct.unpack_from('<I', buf, at)
        at = skip_value(at + 4, vtype)
    for _ in range(n_tensors):
        (nlen,) = struct.unpack_from('<Q', buf, at)
        tname = bytes(buf[at + 8:at + 8 + nlen])
        at += 8 + nlen
        (n_dims,) = struct.unpack_from('<I', buf, at)
        dims = struct.unpack_from('<%dQ' % n_dims, buf, at + 4)
        at += 4 + 8 * n_dims
        (old_type,) = struct.unpack_from('<I', buf, at)
        if pattern.fullmatch(tname):
            n = 1
            for d in dims:
                n *= d
            (ob, osz), (nb, nsz) = SIZES[old_type], SIZES[new_type]
            assert dims[0] % nb == 0, 'row length %d is not a multiple of %d' % (dims[0], nb)
            assert n // nb * nsz <= n // ob * osz, 'the new type needs more bytes than the old one'
            struct.pack_into('<I', buf, at, new_type)
            done += 1
        at += 4 + 8
    buf.flush()
    if done == 0:
        sys.exit('no tensor matches %s' % sys.argv[2])


main()
