# SPDX-License-Identifier: MIT
#
# Writes a small ELF64 file that is both a build's executable (its program
# headers: one PT_LOAD of .text) and its debug file (a .symtab of function
# symbols and a GNU build ID note), for the collector's tests of naming by
# debuginfod, good and hostile:
#
#   python3 mkelf.py OUT BUILD_ID NAME[:COUNT[:LENGTH]]...
#
# Each NAME gives COUNT (1) function symbols of 16 bytes each, one after
# another from .text's address 0x401000 (file offset 0x1000); LENGTH pads
# the name to that many bytes with 'x'. All COUNT symbols share one string
# of the table: "f:100000:4000" is a few megabytes of symbols whose names,
# copied, would take 400 MB. BUILD_ID is hex of any even length.
import struct
import sys

TEXT_ADDR, TEXT_OFF = 0x401000, 0x1000


def main():
    out, build_id, specs = sys.argv[1], bytes.fromhex(sys.argv[2]), sys.argv[3:]
    strtab = bytearray(b"\0")
    syms = [bytes(24)]
    addr = TEXT_ADDR
    for spec in specs:
        parts = spec.split(":")
        name = parts[0]
        count = int(parts[1]) if len(parts) > 1 else 1
        length = int(parts[2]) if len(parts) > 2 else 0
        name = name + "x" * max(0, length - len(name))
        at = len(strtab)
        strtab += name.encode() + b"\0"
        for _ in range(count):
            # st_name, st_info (GLOBAL FUNC), st_other, st_shndx (.text = 2), st_value, st_size
            syms.append(struct.pack("<IBBHQQ", at, 0x12, 0, 2, addr, 16))
            addr += 16
    text_size = addr - TEXT_ADDR
    note = struct.pack("<III", 4, len(build_id), 3) + b"GNU\0" + build_id
    note += bytes(-len(note) % 4)
    shstr = b"\0.note.gnu.build-id\0.text\0.symtab\0.strtab\0.shstrtab\0"
    name_at = {n: shstr.index(n.encode() + b"\0") for n in
               (".note.gnu.build-id", ".text", ".symtab", ".strtab", ".shstrtab")}
    symdata = b"".join(syms)
    # Layout: ELF header, one program header, the note; .text is NOBITS at 0x1000's
    # address (a debug file keeps no code), then the tables and the section headers.
    body = bytearray(64 + 56)
    note_off = len(body)
    body += note
    body += bytes(-len(body) % 8)
    sym_off = len(body)
    body += symdata
    str_off = len(body)
    body += strtab
    shs_off = len(body)
    body += shstr
    body += bytes(-len(body) % 8)
    sh_off = len(body)

    def sh(name, typ, flags, addr_, off, size, link=0, info=0, align=1, entsize=0):
        return struct.pack("<IIQQQQIIQQ", name, typ, flags, addr_, off, size, link, info, align,
                           entsize)

    shdrs = [bytes(64),
             sh(name_at[".note.gnu.build-id"], 7, 2, 0, note_off, len(note), align=4),
             sh(name_at[".text"], 8, 6, TEXT_ADDR, TEXT_OFF, text_size, align=16),
             sh(name_at[".symtab"], 2, 0, 0, sym_off, len(symdata), link=4, info=1, align=8,
                entsize=24),
             sh(name_at[".strtab"], 3, 0, 0, str_off, len(strtab)),
             sh(name_at[".shstrtab"], 3, 0, 0, shs_off, len(shstr))]
    body += b"".join(shdrs)
    ehdr = (b"\x7fELF" + bytes([2, 1, 1, 0]) + bytes(8) +
            struct.pack("<HHIQQQIHHHHHH", 2, 62, 1, TEXT_ADDR, 64, sh_off, 0, 64, 56, 1, 64,
                        len(shdrs), 5))
    # PT_LOAD, R+X: file bytes [0x1000, +text) at TEXT_ADDR.
    phdr = struct.pack("<IIQQQQQQ", 1, 5, TEXT_OFF, TEXT_ADDR, TEXT_ADDR, text_size, text_size,
                       0x1000)
    body[0:64] = ehdr
    body[64:120] = phdr
    with open(out, "wb") as f:
        f.write(body)


if __name__ == "__main__":
    main()
