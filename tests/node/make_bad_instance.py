#!/usr/bin/env python3
"""Writes a damaged copy of a DICOM file (implicit or explicit VR little endian, compressed ones
included) for the node's receive tests. Standard library only.

  nested DEPTH: a private sequence nested DEPTH levels deep is inserted at its place in tag
      order (group 0x0071, creator "VOXSEG DEEP"; each level a sequence of undefined length
      holding one item of undefined length), the rest copied byte for byte: the poison pill of
      issue 35 (at about 5,600 levels DCMTK's recursive parser overflowed voxseg's stack; at
      10,000 the node died while receiving).
  truncate BYTES: Pixel Data (7FE0,0010), the last element, loses its last BYTES bytes (its
      length is rewritten, so the file is well formed but holds less than Rows x Columns x
      BitsAllocated / 8).
  garble BYTES: encapsulated (compressed) Pixel Data: BYTES bytes of the first fragment after
      its first two (the JPEG SOI marker) are zeroed, lengths kept: a well-formed file whose
      frame does not decode.

Usage: make_bad_instance.py IN.dcm OUT.dcm nested DEPTH | truncate BYTES | garble BYTES
"""
import struct
import sys

EXPLICIT_LONG = {b"OB", b"OD", b"OF", b"OL", b"OV", b"OW", b"SQ", b"SV", b"UC", b"UN", b"UR",
                 b"UT", b"UV"}
GROUP = 0x0071


def meta_end(data):
    """Offset of the data set after the preamble and the group 0002 meta header, and whether
    the data set is explicit VR."""
    if data[128:132] != b"DICM":
        raise SystemExit("no DICM preamble")
    pos, explicit = 132, True
    while pos < len(data):
        group, elem = struct.unpack_from("<HH", data, pos)
        if group != 0x0002:
            break
        vr = data[pos + 4:pos + 6]
        if vr in EXPLICIT_LONG:
            length = struct.unpack_from("<I", data, pos + 8)[0]
            value = pos + 12
        else:
            length = struct.unpack_from("<H", data, pos + 6)[0]
            value = pos + 8
        if elem == 0x0010:
            uid = data[value:value + length].rstrip(b"\0 ").decode()
            if uid in ("1.2.840.10008.1.2.2", "1.2.840.10008.1.2.1.99"):
                raise SystemExit("transfer syntax %s: only little endian, not deflated" % uid)
            explicit = uid != "1.2.840.10008.1.2"
        pos = value + length
    return pos, explicit


def insertion_point(data, pos, explicit):
    """Offset of the first top-level element at or after (GROUP,0010); fails on undefined
    lengths before it (no need for them in the test files)."""
    while pos < len(data):
        group, elem = struct.unpack_from("<HH", data, pos)
        if (group, elem) >= (GROUP, 0x0010):
            if group == GROUP and elem < 0x1100:
                raise SystemExit("group %04x is in use" % GROUP)
            return pos
        if explicit:
            vr = data[pos + 4:pos + 6]
            if vr in EXPLICIT_LONG:
                length, header = struct.unpack_from("<I", data, pos + 8)[0], 12
            else:
                length, header = struct.unpack_from("<H", data, pos + 6)[0], 8
        else:
            length, header = struct.unpack_from("<I", data, pos + 4)[0], 8
        if length == 0xFFFFFFFF:
            raise SystemExit("undefined length before (%04x,0010)" % GROUP)
        pos += header + length
    return pos


def nested(depth, explicit):
    creator = b"VOXSEG DEEP "  # even length
    if explicit:
        head = struct.pack("<HH2sH", GROUP, 0x0010, b"LO", len(creator)) + creator
        seq = struct.pack("<HH2sHI", GROUP, 0x1001, b"SQ", 0, 0xFFFFFFFF)
    else:
        head = struct.pack("<HHI", GROUP, 0x0010, len(creator)) + creator
        seq = struct.pack("<HHI", GROUP, 0x1001, 0xFFFFFFFF)
    item = struct.pack("<HHI", 0xFFFE, 0xE000, 0xFFFFFFFF)
    item_end = struct.pack("<HHI", 0xFFFE, 0xE00D, 0)
    seq_end = struct.pack("<HHI", 0xFFFE, 0xE0DD, 0)
    return head + (seq + item) * depth + (item_end + seq_end) * depth


def truncated(data, cut, explicit):
    """The file with its trailing Pixel Data shortened by `cut` bytes (even)."""
    tag = struct.pack("<HH", 0x7FE0, 0x0010)
    at = data.rfind(tag + (b"OW" if explicit else b""))
    if at < 0 and explicit:
        at = data.rfind(tag + b"OB")
    if at < 0:
        raise SystemExit("no Pixel Data")
    length_at = at + (8 if explicit else 4)
    length = struct.unpack_from("<I", data, length_at)[0]
    end = length_at + 4 + length
    if length == 0xFFFFFFFF or end != len(data):
        raise SystemExit("Pixel Data is not the last element of defined length")
    cut += cut % 2
    return (data[:length_at] + struct.pack("<I", length - cut) + data[length_at + 4:end - cut])


def garbled(data, n):
    """The file with n bytes of the first pixel data fragment zeroed (after 2 bytes)."""
    at = data.rfind(struct.pack("<HH", 0x7FE0, 0x0010) + b"OB\0\0" + b"\xff" * 4)
    if at < 0:
        raise SystemExit("no encapsulated Pixel Data")
    pos = at + 12
    tag, length = struct.unpack_from("<II", data, pos)  # the Basic Offset Table item
    pos += 8 + length
    tag, length = struct.unpack_from("<II", data, pos)  # the first fragment
    if tag != 0xE000FFFE or length < 4:
        raise SystemExit("no fragment")
    start = pos + 8 + 2
    n = min(n, length - 4)
    return data[:start] + b"\0" * n + data[start + n:]


def main():
    if len(sys.argv) != 5 or sys.argv[3] not in ("nested", "truncate", "garble"):
        raise SystemExit(__doc__)
    data = open(sys.argv[1], "rb").read()
    start, explicit = meta_end(data)
    n = int(sys.argv[4])
    if sys.argv[3] == "nested":
        at = insertion_point(data, start, explicit)
        out = data[:at] + nested(n, explicit) + data[at:]
    elif sys.argv[3] == "truncate":
        out = truncated(data, n, explicit)
    else:
        out = garbled(data, n)
    with open(sys.argv[2], "wb") as f:
        f.write(out)


if __name__ == "__main__":
    main()
