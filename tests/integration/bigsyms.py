#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""A file whose symbol table is costly to read, and a process that runs in it.

    bigsyms.py write FILE NSYMS   writes FILE: an x86-64 ELF object with one
                                  page of code (a loop, the function
                                  bigsyms_spin) and NSYMS more function
                                  symbols (SHN_ABS, one byte each, distinct
                                  addresses past the code) named f000000000...
    bigsyms.py run FILE...        maps each FILE's code twice and loops in
                                  each mapping on a thread of its own, for ever

test-hostile.sh uses it as a hostile user would: to make the agent read a
large table when it unwinds or names a sample in that code.
"""
import ctypes
import os
import struct
import sys
import threading

CODE_OFF = 0x1000
CODE = b"\xeb\xfe"  # jmp .
NAME_W = 11  # "f%09d\0"
SPIN = b"bigsyms_spin\0"


def write(path, nsyms):
    shstr = b"\0.text\0.symtab\0.strtab\0.shstrtab\0"
    sym_off = CODE_OFF + 0x1000
    sym_size = 24 * (nsyms + 2)
    str_off = sym_off + sym_size
    str_size = 1 + NAME_W * nsyms + len(SPIN)
    shstr_off = str_off + str_size
    sh_off = (shstr_off + len(shstr) + 7) & ~7

    ehdr = struct.pack("<16sHHIQQQIHHHHHH", b"\x7fELF\x02\x01\x01" + bytes(9), 3, 62, 1, 0,
                       64, sh_off, 0, 64, 56, 1, 64, 5, 4)
    phdr = struct.pack("<IIQQQQQQ", 1, 5, 0, 0, 0, CODE_OFF + 0x1000, CODE_OFF + 0x1000, 0x1000)
    with open(path, "wb") as f:
        f.write(ehdr + phdr)
        f.seek(CODE_OFF)
        f.write(CODE)
        f.seek(sym_off)
        f.write(bytes(24))
        # bigsyms_spin: GLOBAL FUNC in .text, the loop's two bytes
        f.write(struct.pack("<IBBHQQ", 1 + NAME_W * nsyms, 0x12, 0, 1, CODE_OFF, len(CODE)))
        chunk = 1 << 16
        for base in range(0, nsyms, chunk):
            n = min(chunk, nsyms - base)
            buf = bytearray(24 * n)
            for j in range(n):
                i = base + j
                # st_name, st_info (GLOBAL FUNC), st_other, st_shndx (ABS), st_value, st_size
                struct.pack_into("<IBBHQQ", buf, 24 * j, 1 + NAME_W * i, 0x12, 0, 0xFFF1,
                                 0x10000 + i, 1)
            f.write(buf)
        f.write(b"\0")
        for base in range(0, nsyms, chunk):
            f.write(b"".join(b"f%09d\0" % i for i in range(base, min(base + chunk, nsyms))))
        f.write(SPIN)
        f.write(shstr)
        f.seek(sh_off)
        sh = struct.Struct("<IIQQQQIIQQ")
        f.write(bytes(64))  # the null section
        f.write(sh.pack(1, 1, 6, CODE_OFF, CODE_OFF, 0x1000, 0, 0, 16, 0))  # .text
        f.write(sh.pack(7, 2, 0, 0, sym_off, sym_size, 3, 1, 8, 24))  # .symtab
        f.write(sh.pack(15, 3, 0, 0, str_off, str_size, 0, 0, 1, 0))  # .strtab
        f.write(sh.pack(23, 3, 0, 0, shstr_off, len(shstr), 0, 0, 1, 0))  # .shstrtab


def run(paths):
    """Maps each file's code twice (two mappings, as a library's segments
    are) and loops in every mapping on a thread of its own."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                          ctypes.c_int, ctypes.c_long]
    loops = []
    for path in paths:
        fd = os.open(path, os.O_RDONLY)
        for _ in range(2):
            addr = libc.mmap(None, CODE_OFF + 0x1000, 1 | 4, 2, fd, 0)  # PROT_READ|EXEC, PRIVATE
            if addr in (None, ctypes.c_void_p(-1).value):
                sys.exit("bigsyms.py: mmap: " + os.strerror(ctypes.get_errno()))
            loops.append(ctypes.CFUNCTYPE(None)(addr + CODE_OFF))
    for loop in loops[1:]:
        threading.Thread(target=loop, daemon=True).start()
    loops[0]()  # ctypes lets go of the GIL: every thread loops at once


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "write":
        write(sys.argv[2], int(sys.argv[3]))
    elif len(sys.argv) >= 3 and sys.argv[1] == "run":
        run(sys.argv[2:])
    else:
        sys.exit("usage: bigsyms.py write FILE NSYMS | run FILE...")
