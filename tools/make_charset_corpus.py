#!/usr/bin/env python3
"""Writes the DICOM character-set test corpus of issue 35: one small CT series per character set.

Usage: make_charset_corpus.py OUTDIR [--slices N] [--size N]

Each case is a folder OUTDIR/<case>/ of N single-frame CT images (default 4 slices of 16x16, a
bright block in the middle), whose PatientName, StudyDescription and SeriesDescription are
non-ASCII text in one character set: every defined term of PS3.3 C.12.1.1.2 that voxseg meets
(ISO_IR 6/100/101/109/110/126/127/138/144/148/166/13/192, ISO 2022 IR 13/87/149/159/58 with
escape sequences, GB18030, GBK), the PS3.5 Annex H-K examples among them, plus undeclared and
wrongly declared sets. OUTDIR/manifest.json lists, per case, the declared set and the UTF-8
strings a correct reader shows (including U+FFFD where bytes are invalid in the declared set).

Only the Python standard library is used: the bytes come from Python's codecs (an encoder
independent of DCMTK, which voxseg decodes with) and the DICOM files are written here directly
(Explicit VR Little Endian), so the corpus needs nothing but python3.
"""

import argparse
import json
import os
import struct
import sys

ESC = b"\x1b"
REPLACEMENT = "\ufffd"
UID_ROOT = "1.2.826.0.1.3680043.10.1035."  # voxseg test corpus UIDs (fixed, reproducible)


# ---- Encoders ----------------------------------------------------------------------------------

def single(codec):
    """A whole value in one single-set encoding."""
    return lambda text: text.encode(codec)


def iso2022(encode_part, back=ESC + b"(B"):
    """A PN or text value with ISO 2022 code extensions: ASCII runs as they are, every other run
    (split at the PN delimiters ^ and =, which must be ASCII) encoded by encode_part, which adds
    the escape sequences, followed by `back` for two-byte G0 sets."""
    def encode(text):
        out = b""
        part = ""
        for ch in text + "\0":
            if ch in "^=\0":
                if part:
                    out += part.encode("ascii") if part.isascii() else encode_part(part, back)
                if ch != "\0":
                    out += ch.encode("ascii")
                part = ""
            else:
                part += ch
        return out
    return encode


def jis_g0(part, back):
    """Kanji/kana in JIS X 0208 (ESC $ B) or 0212 (ESC $ ( D), half-width katakana in G1 (ESC ) I
    is designated by the first value, so those bytes need no escape); the ASCII characters of a
    mixed run return to G0 ASCII with `back`."""
    out = b""
    mode = None
    for ch in part:
        if "\uff61" <= ch <= "\uff9f":  # half-width katakana: JIS X 0201 G1 (0xA1..0xDF)
            if mode not in (None, "ascii"):
                out += back
            mode = "ascii"
            out += ch.encode("shift_jis")
            continue
        if ch.isascii():
            if mode not in (None, "ascii"):
                out += back
            mode = "ascii"
            out += ch.encode("ascii")
            continue
        coded = ch.encode("iso2022_jp_2")  # ESC $ B xx ESC ( B, or ESC $ ( D xx ESC ( B
        body = coded[coded.index(ESC) :]
        body = body[: body.rindex(ESC)] if body.count(ESC) > 1 else body
        designation = body[: 4 if body.startswith(ESC + b"$(") else 3]
        if mode != designation:
            out += designation
            mode = designation
        out += body[len(designation) :]
    if mode not in (None, "ascii"):
        out += back
    return out


def g1_multibyte(escape, codec):
    """KS X 1001 (ESC $ ) C, EUC-KR bytes) or GB 2312 (ESC $ ) A, EUC-CN bytes) in G1: the
    designation before every non-ASCII run, as PS3.5 I.2 and K.2 write it."""
    def encode_part(part, back):
        return escape + part.encode(codec)
    return encode_part


# ---- Cases --------------------------------------------------------------------------------------
# name: (SpecificCharacterSet or None when absent, encoder, PatientName, StudyDescription,
#        SeriesDescription, expected strings when they differ from the text (wrong declarations))

CASES = {
    "ascii_undeclared": (None, single("ascii"), "Doe^John", "Abdomen", "CT nativ", None),
    "ir6": ("ISO_IR 6", single("ascii"), "Doe^Jane", "Thorax", "CT arterial", None),
    "ir100": ("ISO_IR 100", single("latin_1"), "Müller^Jürgen", "Schädel", "Schädel nativ", None),
    "ir101": ("ISO_IR 101", single("iso8859_2"), "Dvořák^Łukasz", "Břicho", "Žlučník nativ", None),
    "ir109": ("ISO_IR 109", single("iso8859_3"), "Ċaruana^Ġorġ", "Ħamrun", "Ġenerali", None),
    "ir110": ("ISO_IR 110", single("iso8859_4"), "Ķēniņš^Ģirts", "Galva", "Ņemot ūdens", None),
    "ir126": ("ISO_IR 126", single("iso8859_7"), "Διονυσιος", "Κεφαλή", "Θώρακας", None),
    "ir127": ("ISO_IR 127", single("iso8859_6"), "قباني^لنزار", "رأس", "صدر", None),
    "ir138": ("ISO_IR 138", single("iso8859_8"), "שרון^דבורה", "ראש", "חזה", None),
    "ir144": ("ISO_IR 144", single("iso8859_5"), "Иванов^Иван", "Голова", "КТ без контраста",
              None),
    "ir148": ("ISO_IR 148", single("iso8859_9"), "Çavuşoğlu^Ömer", "Baş", "Göğüs İnce", None),
    "ir166": ("ISO_IR 166", single("tis_620"), "สมชาย^ใจดี", "ศีรษะ", "ทรวงอก", None),
    "ir13": ("ISO_IR 13", single("shift_jis"), "ﾔﾏﾀﾞ^ﾀﾛｳ", "ｱﾀﾏ", "ｷｮｳﾌﾞ CT", None),
    "ir192": ("ISO_IR 192", single("utf-8"), "Wang^XiaoDong=王^小東=", "Schädel 頭部",
              "Грудь 🫁", None),
    # PS3.5 H.3.1: ISO 2022 IR 87 (JIS X 0208) with ASCII as the default.
    "iso2022_ir87": ("\\ISO 2022 IR 87", iso2022(jis_g0), "Yamada^Tarou=山田^太郎=やまだ^たろう",
                     "頭部", "胸部 単純", None),
    # PS3.5 H.3.2: half-width katakana (ISO 2022 IR 13) as the default, JIS X 0208 extension,
    # ESC ( J (JIS X 0201 Romaji) to return.
    "iso2022_ir13_ir87": ("ISO 2022 IR 13\\ISO 2022 IR 87", iso2022(jis_g0, ESC + b"(J"),
                          "ﾔﾏﾀﾞ^ﾀﾛｳ=山田^太郎=やまだ^たろう", "ｱﾀﾏ 頭部", "ｷｮｳﾌﾞ 胸部", None),
    # JIS X 0212 (ISO 2022 IR 159, ESC $ ( D) next to JIS X 0208.
    "iso2022_ir159": ("\\ISO 2022 IR 87\\ISO 2022 IR 159", iso2022(jis_g0),
                      "Yamada^Tarou=丂山田^太郎", "丂部", "胸部 丂", None),
    # PS3.5 I.2: Korean, KS X 1001 in G1.
    "iso2022_ir149": ("\\ISO 2022 IR 149", iso2022(g1_multibyte(ESC + b"$)C", "euc_kr")),
                      "Hong^Gildong=洪^吉洞=홍^길동", "머리", "흉부 조영", None),
    # PS3.5 K.2: Simplified Chinese, GB 2312 in G1.
    "iso2022_ir58": ("\\ISO 2022 IR 58", iso2022(g1_multibyte(ESC + b"$)A", "gb2312")),
                     "Wang^XiaoDong=王^小东=", "头部", "胸部 平扫", None),
    # PS3.5 J.3 (GB18030, including a 4-byte character) and K.1 style GBK.
    "gb18030": ("GB18030", single("gb18030"), "Wang^XiaoDong=王^小东=", "头部 Ä", "胸部 𠀀", None),
    "gbk": ("GBK", single("gbk"), "Zhang^XiaoDong=张^小东=", "头部", "胸部 增强", None),
    # Code extensions written with one value ("ISO 2022 IR 144" alone).
    "iso2022_ir144_single": ("ISO 2022 IR 144", single("iso8859_5"), "Петров^Пётр", "Голова",
                             "Грудь", None),
    # No declaration: valid UTF-8 stays UTF-8, anything else is read as Latin-1.
    "undeclared_latin1": (None, single("latin_1"), "Müller^Jürgen", "Schädel",
                          "Schädel nativ", None),
    "undeclared_utf8": (None, single("utf-8"), "Müller^Jürgen", "Schädel 頭部", "Schädel nativ",
                        None),
    # Wrong declarations: never a failure, replacement characters where bytes are invalid.
    "wrong_utf8_latin1_bytes": ("ISO_IR 192", single("latin_1"), "Müller^Jürgen", "Schädel",
                                "Schädel nativ",
                                ("M\ufffdller^J\ufffdrgen", "Sch\ufffddel", "Sch\ufffddel nativ")),
    "wrong_unknown_term": ("LATIN1", single("latin_1"), "Müller^Jürgen", "Schädel",
                           "Schädel nativ", None),
    "wrong_greek_latin1_bytes": ("ISO_IR 126", single("latin_1"), "Smith", "Schädel",
                                 "Ò® nativ",
                                 ("Smith", "Schδdel", "\ufffd\ufffd nativ")),
    "wrong_gb18030_truncated": ("GB18030", lambda t: t.encode("gb18030")[:-1] if not t.isascii()
                                else t.encode("ascii"), "Li^Ming", "头部", "胸部",
                                ("Li^Ming", "头\ufffd", "胸\ufffd")),
}


def case_bytes(name):
    charset, encode, pn, study, series, expected = CASES[name]
    values = [encode(pn), encode(study), encode(series)]
    shown = list(expected) if expected else [pn, study, series]
    return charset, values, shown


# ---- A minimal DICOM writer (Explicit VR Little Endian) -------------------------------------------

def element(group, elem, vr, value):
    if isinstance(value, str):
        value = value.encode("ascii")
    pad = b"\0" if vr in ("UI", "OB") else b" "
    if len(value) % 2:
        value += pad
    tag = struct.pack("<HH", group, elem)
    if vr in ("OB", "OW", "SQ", "UN", "UT", "UC", "UR"):
        return tag + vr.encode() + b"\0\0" + struct.pack("<I", len(value)) + value
    return tag + vr.encode() + struct.pack("<H", len(value)) + value


def us(value):
    return struct.pack("<H", value)


def write_instance(path, charset, pn, study, series, uids, k, size, slices):
    sop_uid = uids["series"] + ".%d" % (k + 1)
    ds = []
    if charset is not None:
        ds.append(element(0x0008, 0x0005, "CS", charset.encode("ascii")))
    ds += [
        element(0x0008, 0x0008, "CS", "ORIGINAL\\PRIMARY\\AXIAL"),
        element(0x0008, 0x0016, "UI", "1.2.840.10008.5.1.4.1.1.2"),
        element(0x0008, 0x0018, "UI", sop_uid),
        element(0x0008, 0x0020, "DA", "20260101"),
        element(0x0008, 0x0060, "CS", "CT"),
        element(0x0008, 0x0070, "LO", "voxseg charset corpus"),
        element(0x0008, 0x1030, "LO", study),
        element(0x0008, 0x103E, "LO", series),
        element(0x0010, 0x0010, "PN", pn),
        element(0x0010, 0x0020, "LO", "CHARSET-0001"),
        element(0x0018, 0x0050, "DS", "5"),
        element(0x0020, 0x000D, "UI", uids["study"]),
        element(0x0020, 0x000E, "UI", uids["series"]),
        element(0x0020, 0x0011, "IS", "1"),
        element(0x0020, 0x0013, "IS", str(k + 1)),
        element(0x0020, 0x0032, "DS", "-%d\\-%d\\%d" % (size * 5, size * 5, k * 5)),
        element(0x0020, 0x0037, "DS", "1\\0\\0\\0\\1\\0"),
        element(0x0020, 0x0052, "UI", uids["frame"]),
        element(0x0028, 0x0002, "US", us(1)),
        element(0x0028, 0x0004, "CS", "MONOCHROME2"),
        element(0x0028, 0x0010, "US", us(size)),
        element(0x0028, 0x0011, "US", us(size)),
        element(0x0028, 0x0030, "DS", "10\\10"),
        element(0x0028, 0x0100, "US", us(16)),
        element(0x0028, 0x0101, "US", us(16)),
        element(0x0028, 0x0102, "US", us(15)),
        element(0x0028, 0x0103, "US", us(1)),
        element(0x0028, 0x1052, "DS", "-1024"),
        element(0x0028, 0x1053, "DS", "1"),
    ]
    # Stored values: air (0 = -1024 HU) around a block of soft tissue (1074 = 50 HU).
    pixels = bytearray()
    lo, hi = size // 4, size - size // 4
    for j in range(size):
        for i in range(size):
            inside = lo <= i < hi and lo <= j < hi and 0 < k < slices - 1 or slices <= 2
            pixels += struct.pack("<h", 1074 if inside else 0)
    ds.append(element(0x7FE0, 0x0010, "OW", bytes(pixels)))
    meta_body = b"".join([
        element(0x0002, 0x0001, "OB", b"\0\1"),
        element(0x0002, 0x0002, "UI", "1.2.840.10008.5.1.4.1.1.2"),
        element(0x0002, 0x0003, "UI", sop_uid),
        element(0x0002, 0x0010, "UI", "1.2.840.10008.1.2.1"),
        element(0x0002, 0x0012, "UI", UID_ROOT + "0"),
    ])
    meta = element(0x0002, 0x0000, "UL", struct.pack("<I", len(meta_body))) + meta_body
    with open(path, "wb") as f:
        f.write(b"\0" * 128 + b"DICM" + meta + b"".join(ds))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("outdir")
    parser.add_argument("--slices", type=int, default=4)
    parser.add_argument("--size", type=int, default=16)
    parser.add_argument("--cases", default="", help="comma-separated subset of the cases")
    args = parser.parse_args()
    names = [n for n in args.cases.split(",") if n] or list(CASES)
    manifest = {"fields": ["PatientName", "StudyDescription", "SeriesDescription"], "cases": []}
    for index, name in enumerate(names):
        charset, values, shown = case_bytes(name)
        folder = os.path.join(args.outdir, name)
        os.makedirs(folder, exist_ok=True)
        uids = {what: UID_ROOT + "%d.%d" % (index + 1, n)
                for n, what in enumerate(["study", "series", "frame"], start=1)}
        for k in range(args.slices):
            write_instance(os.path.join(folder, "IM%d.dcm" % (k + 1)), charset, *values, uids, k,
                           args.size, args.slices)
        manifest["cases"].append({
            "name": name,
            "specific_character_set": charset,
            "series_uid": uids["series"],
            "bytes": [v.hex() for v in values],
            "PatientName": shown[0],
            "StudyDescription": shown[1],
            "SeriesDescription": shown[2],
        })
    with open(os.path.join(args.outdir, "manifest.json"), "w", encoding="utf-8") as f:
        json.dump(manifest, f, ensure_ascii=False, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
