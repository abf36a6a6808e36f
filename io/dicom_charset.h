// DICOM character sets to UTF-8: every string value that leaves DCMTK goes through here, so that
// logs, JSON, the spool and the viewer only ever see valid UTF-8 (a byte that nlohmann::json or
// Qt cannot take must never reach them).
//
// The conversion is DCMTK's (glibc iconv in Debian's DCMTK), made total:
//   - pure ASCII (no byte above 0x7F, no ESC) is returned unchanged, whatever the declared set;
//   - one declared set without code extensions (ISO_IR 100 ... 166, ISO_IR 13, GB18030, GBK)
//     converts with DcmSpecificCharacterSet; Debian's DCMTK aborts a whole conversion on the first
//     invalid byte (DCMTK_FIXED_ICONV_CONVERSION_FLAGS), so a failed value is converted again
//     character by character and only the bytes that still do not convert become U+FFFD;
//   - ISO 2022 code extensions (several values, or one "ISO 2022 IR n": IR 6/13/87/159/149/58 and
//     the ISO 8859 parts) are interpreted here, G0 and G1 apart as PS3.5 6.1.2.5 says, each run
//     converted by DCMTK's OFCharacterEncoding (DCMTK's own ISO 2022 path asks glibc for
//     "ISO-IR-87", which it lacks: every Japanese multi-byte declaration would fail);
//   - ISO_IR 192 (UTF-8): kept, each invalid byte replaced by U+FFFD;
//   - no set declared (or the bare ASCII "ISO_IR 6", which cannot hold these bytes, or a defined
//     term that is not DICOM's): a value that is valid UTF-8 is kept as UTF-8 (what modern
//     senders that forget the declaration write), anything else is read as ISO 8859-1 (Latin-1,
//     what most undeclared legacy data is, and what pydicom and Orthanc assume by default).
// Nothing here throws or fails: the worst a wrongly declared set gets is replacement characters.
//
// Which set applies: (0008,0005) of the item that holds the element, else of its nearest parent
// item (a sequence item may override the data set's set), else none.
// Thread safety: all functions are safe to call from any thread; DCMTK converters are cached per
// thread (a converter holds iconv state and cannot be shared).
#pragma once

#include <string>
#include <string_view>

class DcmItem;
class DcmTagKey;

namespace voxseg::io::charset {

// `bytes` (one DICOM value, possibly several values joined by '\') in the character set
// `specific_character_set` (the raw value of (0008,0005), values separated by '\'), as UTF-8.
// `person_name`: the value is a PN, whose '^' and '=' also return to the default set (PS3.5 6.2).
std::string toUtf8(std::string_view bytes, std::string_view specific_character_set,
                   bool person_name = false);

// `bytes` with every byte that is not part of a valid UTF-8 sequence replaced by U+FFFD (over-long
// forms, surrogates and code points past U+10FFFF are invalid too).
std::string sanitizeUtf8(std::string_view bytes);
bool isValidUtf8(std::string_view bytes);

// The SpecificCharacterSet in force for elements of `item`: its own (0008,0005), else that of
// its nearest parent item; "" when none declares one.
std::string characterSetOf(DcmItem* item);

// The value of `tag` in `item` (all values joined by '\'; not trimmed), as UTF-8 in the set in
// force there; "" when absent. Values of VRs that no character set applies to (UI, CS, DS...)
// are only sanitized.
std::string getUtf8(DcmItem* item, const DcmTagKey& tag);

// Rewrites every string value in `root` (recursively, items' own sets honoured) as UTF-8, removes
// the items' own (0008,0005) and declares "ISO_IR 192" on `root`. For writers that copy elements
// from a source data set next to strings of their own (SEG, RTSTRUCT): after this, everything
// they write is UTF-8 and says so.
void convertItemToUtf8(DcmItem& root);

// The longest prefix of the UTF-8 string `s` that is at most `max_bytes` long and does not cut a
// character in two.
std::string truncateUtf8(const std::string& s, size_t max_bytes);

}  // namespace voxseg::io::charset
