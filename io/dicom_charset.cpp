#include "io/dicom_charset.h"

#include <dcmtk/config/osconfig.h>
#include <dcmtk/dcmdata/dcdeftag.h>
#include <dcmtk/dcmdata/dcitem.h>
#include <dcmtk/dcmdata/dcsequen.h>
#include <dcmtk/dcmdata/dcspchrs.h>
#include <dcmtk/dcmdata/dcvr.h>
#include <dcmtk/ofstd/ofchrenc.h>

#include <map>
#include <memory>
#include <vector>

namespace voxseg::io::charset {

namespace {

constexpr char kReplacement[] = "\xEF\xBF\xBD";  // U+FFFD in UTF-8
// A value longer than this that DCMTK cannot convert as a whole is not taken apart character by
// character (up to 4 conversions per byte); it is read as if no set were declared instead.
constexpr size_t kMaxPiecewiseBytes = 64 * 1024;
// A hostile stream could declare a new set in every file; each thread keeps at most this many.
constexpr size_t kMaxCachedConverters = 32;
// Parent items followed to find the set in force (nesting is bounded where files are read).
constexpr int kMaxParentWalk = 4096;

const char kEscape = '\x1b';

bool isPlainAscii(std::string_view s) {
    for (const char c : s)
        if (static_cast<unsigned char>(c) >= 0x80 || c == kEscape) return false;
    return true;
}

// Length of the valid UTF-8 sequence at s[i], 0 when the byte there does not start one.
size_t utf8SequenceAt(std::string_view s, size_t i) {
    const auto at = [&](size_t k) -> unsigned {
        return i + k < s.size() ? static_cast<unsigned char>(s[i + k]) : 0x100u;
    };
    const auto cont = [&](size_t k, unsigned lo = 0x80, unsigned hi = 0xBF) {
        const unsigned b = at(k);
        return b >= lo && b <= hi;
    };
    const unsigned b0 = at(0);
    if (b0 < 0x80) return 1;
    if (b0 >= 0xC2 && b0 <= 0xDF) return cont(1) ? 2 : 0;
    if (b0 == 0xE0) return cont(1, 0xA0, 0xBF) && cont(2) ? 3 : 0;
    if ((b0 >= 0xE1 && b0 <= 0xEC) || b0 == 0xEE || b0 == 0xEF) return cont(1) && cont(2) ? 3 : 0;
    if (b0 == 0xED) return cont(1, 0x80, 0x9F) && cont(2) ? 3 : 0;  // no surrogates
    if (b0 == 0xF0) return cont(1, 0x90, 0xBF) && cont(2) && cont(3) ? 4 : 0;
    if (b0 >= 0xF1 && b0 <= 0xF3) return cont(1) && cont(2) && cont(3) ? 4 : 0;
    if (b0 == 0xF4) return cont(1, 0x80, 0x8F) && cont(2) && cont(3) ? 4 : 0;
    return 0;
}

std::string latin1ToUtf8(std::string_view s) {
    std::string out;
    out.reserve(s.size() * 2);
    for (const char c : s) {
        const auto b = static_cast<unsigned char>(c);
        if (b < 0x80) {
            out.push_back(c);
        } else {
            out.push_back(static_cast<char>(0xC0 | (b >> 6)));
            out.push_back(static_cast<char>(0x80 | (b & 0x3F)));
        }
    }
    return out;
}

// No usable declaration: UTF-8 if the bytes are valid UTF-8, else Latin-1 (see the header).
std::string undeclaredToUtf8(std::string_view s) {
    return isValidUtf8(s) ? std::string(s) : latin1ToUtf8(s);
}

std::string trimSpaces(std::string_view s) {
    size_t b = 0, e = s.size();
    while (b < e && (s[b] == ' ' || s[b] == '\0')) ++b;
    while (e > b && (s[e - 1] == ' ' || s[e - 1] == '\0')) --e;
    return std::string(s.substr(b, e - b));
}

std::vector<std::string> splitValues(std::string_view s) {
    std::vector<std::string> values;
    size_t start = 0;
    for (size_t i = 0; i <= s.size(); ++i)
        if (i == s.size() || s[i] == '\\') {
            values.push_back(trimSpaces(s.substr(start, i - start)));
            start = i + 1;
        }
    return values;
}

bool startsWith(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }

// ---- Single sets without code extensions: DCMTK's DcmSpecificCharacterSet ----

// Per-thread DCMTK converters by defined term; nullptr when DCMTK cannot select it.
DcmSpecificCharacterSet* converterFor(const std::string& declaration) {
    thread_local std::map<std::string, std::unique_ptr<DcmSpecificCharacterSet>> cache;
    auto it = cache.find(declaration);
    if (it != cache.end()) return it->second.get();
    if (cache.size() >= kMaxCachedConverters) cache.clear();
    auto converter = std::make_unique<DcmSpecificCharacterSet>();
    if (converter->selectCharacterSet(declaration.c_str(), "ISO_IR 192").bad()) converter.reset();
    return cache.emplace(declaration, std::move(converter)).first->second.get();
}

bool convertWith(DcmSpecificCharacterSet& converter, std::string_view bytes, std::string& out) {
    OFString converted;
    if (converter.convertString(bytes.data(), bytes.size(), converted).bad()) return false;
    out.assign(converted.c_str(), converted.length());
    return true;
}

// As a whole if it converts, else character by character: a character is the shortest sequence
// of 1 to 4 bytes that converts (GB18030 has 1, 2 and 4), a byte that starts none is U+FFFD.
std::string convertSingleSet(DcmSpecificCharacterSet& converter, std::string_view bytes) {
    std::string out;
    if (convertWith(converter, bytes, out)) return out;
    if (bytes.size() > kMaxPiecewiseBytes) return undeclaredToUtf8(bytes);
    out.clear();
    std::string piece;
    size_t p = 0;
    while (p < bytes.size()) {
        bool converted = false;
        for (size_t len = 1; len <= 4 && p + len <= bytes.size(); ++len) {
            if (convertWith(converter, bytes.substr(p, len), piece) && !piece.empty()) {
                out += piece;
                p += len;
                converted = true;
                break;
            }
        }
        if (!converted) {
            out += kReplacement;
            ++p;
        }
    }
    return out;
}

// ---- ISO 2022 code extensions (several values, or one "ISO 2022 IR n") ----
// DCMTK's own ISO 2022 support cannot be used on Debian: it converts JIS X 0208 and 0212 runs
// with iconv encodings "ISO-IR-87" and "ISO-IR-159" that glibc does not have, so selecting any
// Japanese multi-byte set fails. Here the escape sequences are interpreted as PS3.5 6.1.2.5 and
// Annex H-K describe (G0 and G1 kept apart), and each run is converted by DCMTK's iconv wrapper
// (OFCharacterEncoding) in an encoding glibc has: JIS X 0208/0212 as EUC-JP, KS X 1001 as EUC-KR,
// GB 2312 as EUC-CN, the ISO 8859 parts as ISO-8859-n.

enum class G0 { kAscii, kJisX0208, kJisX0212 };

struct Iso2022State {
    G0 g0 = G0::kAscii;
    const char* g1 = nullptr;  // iconv encoding of the G1 set (bytes 0xA1..0xFE); nullptr: none
    int g1_width = 1;          // bytes per G1 character
};

struct G1Set {
    const char* term;      // "ISO 2022 IR n"
    const char* escape;    // the bytes after ESC that designate it
    const char* encoding;  // iconv name
    int width;
};

const G1Set kG1Sets[] = {
    {"ISO 2022 IR 100", "-A", "ISO-8859-1", 1}, {"ISO 2022 IR 101", "-B", "ISO-8859-2", 1},
    {"ISO 2022 IR 109", "-C", "ISO-8859-3", 1}, {"ISO 2022 IR 110", "-D", "ISO-8859-4", 1},
    {"ISO 2022 IR 144", "-L", "ISO-8859-5", 1}, {"ISO 2022 IR 127", "-G", "ISO-8859-6", 1},
    {"ISO 2022 IR 126", "-F", "ISO-8859-7", 1}, {"ISO 2022 IR 138", "-H", "ISO-8859-8", 1},
    {"ISO 2022 IR 148", "-M", "ISO-8859-9", 1}, {"ISO 2022 IR 166", "-T", "TIS-620", 1},
    {"ISO 2022 IR 13", ")I", "SHIFT_JIS", 1},   {"ISO 2022 IR 149", "$)C", "EUC-KR", 2},
    {"ISO 2022 IR 58", "$)A", "GB2312", 2},
};

// The state a value starts in, and returns to at delimiters: what the first value of the
// declaration designates. False when the first value is no ISO 2022 defined term.
bool initialState(const std::string& first, Iso2022State& state) {
    state = Iso2022State{};
    if (first.empty() || first == "ISO 2022 IR 6") return true;
    // Multi-byte sets are not allowed first (PS3.5 6.1.2.5.3); their escape sequences still work.
    if (first == "ISO 2022 IR 87" || first == "ISO 2022 IR 159") return true;
    for (const G1Set& set : kG1Sets)
        if (first == set.term) {
            state.g1 = set.encoding;
            state.g1_width = set.width;
            return true;
        }
    return false;
}

// Applies the escape sequence `sequence` (the bytes after ESC); false when it is not one of
// DICOM's. Sequences are honoured whether or not (0008,0005) declares their set.
bool applyEscape(std::string_view sequence, Iso2022State& state) {
    if (sequence == "(B" || sequence == "(J") {  // ASCII; JIS X 0201 Romaji read as ASCII
        state.g0 = G0::kAscii;
        return true;
    }
    if (sequence == "$B" || sequence == "$@") {
        state.g0 = G0::kJisX0208;
        return true;
    }
    if (sequence == "$(D") {
        state.g0 = G0::kJisX0212;
        return true;
    }
    for (const G1Set& set : kG1Sets)
        if (sequence == set.escape) {
            state.g1 = set.encoding;
            state.g1_width = set.width;
            return true;
        }
    return false;
}

// Per-thread iconv converters (through DCMTK's wrapper) from `encoding` to UTF-8.
OFCharacterEncoding* encodingConverter(const char* encoding) {
    thread_local std::map<std::string, std::unique_ptr<OFCharacterEncoding>> cache;
    auto it = cache.find(encoding);
    if (it != cache.end()) return it->second.get();
    auto converter = std::make_unique<OFCharacterEncoding>();
    if (converter->selectEncoding(encoding, "UTF-8").bad()) converter.reset();
    return cache.emplace(encoding, std::move(converter)).first->second.get();
}

bool convertEncoding(OFCharacterEncoding* converter, std::string_view bytes, std::string& out) {
    if (converter == nullptr) return false;
    OFString converted;
    if (converter->convertString(bytes.data(), bytes.size(), converted).bad()) return false;
    out.assign(converted.c_str(), converted.length());
    return !out.empty();
}

// `bytes` (characters of `width` bytes each, already in `encoding`'s form) to UTF-8: as a whole,
// else one character at a time, U+FFFD for each that does not convert (and for a cut one).
void convertChars(const char* encoding, std::string_view bytes, size_t width, std::string& out) {
    if (bytes.empty()) return;
    OFCharacterEncoding* converter = encodingConverter(encoding);
    std::string piece;
    if (convertEncoding(converter, bytes, piece)) {
        out += piece;
        return;
    }
    for (size_t p = 0; p < bytes.size(); p += width) {
        if (p + width <= bytes.size() && convertEncoding(converter, bytes.substr(p, width), piece))
            out += piece;
        else
            out += kReplacement;
    }
}

class Iso2022Decoder {
  public:
    Iso2022Decoder(const Iso2022State& initial, bool person_name)
        : initial_(initial), state_(initial), person_name_(person_name) {}

    std::string decode(std::string_view bytes) {
        size_t i = 0;
        while (i < bytes.size()) {
            const auto b = static_cast<unsigned char>(bytes[i]);
            if (b == 0x1B) {
                flush();
                size_t end = i + 1;
                while (end < bytes.size() && bytes[end] >= 0x20 && bytes[end] <= 0x2F) ++end;
                if (end < bytes.size()) ++end;  // the final byte
                if (!applyEscape(bytes.substr(i + 1, end - i - 1), state_)) out_ += kReplacement;
                i = end;
                continue;
            }
            // Delimiters return to the initial state; PN's '^' and '=' only where G0 is ASCII
            // (in a two-byte G0 set they are halves of characters).
            const bool control = b == '\t' || b == '\n' || b == '\f' || b == '\r';
            const bool delimiter =
                control || (state_.g0 == G0::kAscii &&
                            (b == '\\' || (person_name_ && (b == '^' || b == '='))));
            if (delimiter) {
                flush();
                out_.push_back(static_cast<char>(b));
                state_ = initial_;
                ++i;
                continue;
            }
            const Kind kind = b >= 0x80                                             ? Kind::kG1
                              : (state_.g0 == G0::kAscii || b <= 0x20 || b == 0x7F) ? Kind::kAscii
                                                                                    : Kind::kG0;
            if (kind != kind_) flush();
            kind_ = kind;
            run_.push_back(static_cast<char>(b));
            ++i;
        }
        flush();
        return std::move(out_);
    }

  private:
    enum class Kind { kNone, kAscii, kG0, kG1 };

    void flush() {
        if (run_.empty()) return;
        if (kind_ == Kind::kAscii) {
            out_ += run_;
        } else if (kind_ == Kind::kG1) {
            if (state_.g1 == nullptr)
                for (size_t k = 0; k < run_.size(); ++k) out_ += kReplacement;
            else
                convertChars(state_.g1, run_, static_cast<size_t>(state_.g1_width), out_);
        } else {
            // JIS X 0208 / 0212 in G0 (0x21..0x7E pairs) as EUC-JP: both bytes | 0x80, and the
            // single shift 3 (0x8F) before JIS X 0212 characters.
            const bool supplementary = state_.g0 == G0::kJisX0212;
            std::string euc;
            for (size_t k = 0; k + 1 < run_.size(); k += 2) {
                if (supplementary) euc.push_back(static_cast<char>(0x8F));
                euc.push_back(static_cast<char>(run_[k] | 0x80));
                euc.push_back(static_cast<char>(run_[k + 1] | 0x80));
            }
            convertChars("EUC-JP", euc, supplementary ? 3 : 2, out_);
            if (run_.size() % 2) out_ += kReplacement;
        }
        run_.clear();
        kind_ = Kind::kNone;
    }

    const Iso2022State initial_;
    Iso2022State state_;
    const bool person_name_;
    Kind kind_ = Kind::kNone;
    std::string run_;
    std::string out_;
};

}  // namespace

bool isValidUtf8(std::string_view bytes) {
    for (size_t i = 0; i < bytes.size();) {
        const size_t n = utf8SequenceAt(bytes, i);
        if (n == 0) return false;
        i += n;
    }
    return true;
}

std::string sanitizeUtf8(std::string_view bytes) {
    std::string out;
    out.reserve(bytes.size());
    for (size_t i = 0; i < bytes.size();) {
        const size_t n = utf8SequenceAt(bytes, i);
        if (n == 0) {
            out += kReplacement;
            ++i;
        } else {
            out.append(bytes.substr(i, n));
            i += n;
        }
    }
    return out;
}

std::string toUtf8(std::string_view bytes, std::string_view specific_character_set,
                   bool person_name) {
    if (isPlainAscii(bytes)) return std::string(bytes);
    std::vector<std::string> values = splitValues(specific_character_set);
    while (values.size() > 1 && values.back().empty()) values.pop_back();
    const std::string& first = values[0];
    if (values.size() == 1 && !startsWith(first, "ISO 2022 ")) {
        if (first.empty() || first == "ISO_IR 6") return undeclaredToUtf8(bytes);
        if (first == "ISO_IR 192") return sanitizeUtf8(bytes);
        DcmSpecificCharacterSet* converter = converterFor(first);
        if (converter == nullptr) return undeclaredToUtf8(bytes);
        return sanitizeUtf8(convertSingleSet(*converter, bytes));
    }
    // Code extensions. "ISO_IR n" as the first of several values is read as "ISO 2022 IR n".
    Iso2022State initial;
    const std::string head =
        startsWith(first, "ISO_IR ") ? "ISO 2022 IR " + first.substr(7) : first;
    if (!initialState(head, initial)) return undeclaredToUtf8(bytes);
    return sanitizeUtf8(Iso2022Decoder(initial, person_name).decode(bytes));
}

std::string characterSetOf(DcmItem* item) {
    int steps = 0;
    for (DcmItem* it = item; it != nullptr && steps < kMaxParentWalk;
         it = it->getParentItem(), ++steps) {
        DcmElement* element = nullptr;
        if (it->findAndGetElement(DCM_SpecificCharacterSet, element, OFFalse).good() &&
            element != nullptr) {
            OFString value;
            if (element->getOFStringArray(value).bad()) return {};
            return std::string(value.c_str(), value.length());
        }
    }
    return {};
}

std::string getUtf8(DcmItem* item, const DcmTagKey& tag) {
    if (item == nullptr) return {};
    DcmElement* element = nullptr;
    if (item->findAndGetElement(tag, element, OFFalse).bad() || element == nullptr) return {};
    OFString value;
    if (element->getOFStringArray(value).bad()) return {};
    const std::string_view bytes(value.c_str(), value.length());
    if (isPlainAscii(bytes)) return std::string(bytes);
    const DcmVR vr(element->ident());
    if (!vr.isAffectedBySpecificCharacterSet()) return sanitizeUtf8(bytes);
    return toUtf8(bytes, characterSetOf(item), element->ident() == EVR_PN);
}

namespace {

void convertItem(DcmItem& item, const std::string& inherited, int depth) {
    std::string declared = inherited;
    DcmElement* own = nullptr;
    if (item.findAndGetElement(DCM_SpecificCharacterSet, own, OFFalse).good() && own != nullptr) {
        OFString value;
        own->getOFStringArray(value);
        declared.assign(value.c_str(), value.length());
    }
    const unsigned long count = item.card();
    for (unsigned long i = 0; i < count; ++i) {
        DcmElement* element = item.getElement(i);
        if (element == nullptr) continue;
        if (element->ident() == EVR_SQ) {
            if (depth >= kMaxParentWalk) continue;
            auto* sequence = static_cast<DcmSequenceOfItems*>(element);
            for (unsigned long k = 0; k < sequence->card(); ++k)
                if (DcmItem* sub = sequence->getItem(k)) convertItem(*sub, declared, depth + 1);
            continue;
        }
        if (element->getTag() == DCM_SpecificCharacterSet) continue;
        if (!DcmVR(element->ident()).isAffectedBySpecificCharacterSet()) continue;
        char* raw = nullptr;
        Uint32 length = 0;
        if (element->getString(raw, length).bad() || raw == nullptr) continue;
        const std::string_view bytes(raw, length);
        if (isPlainAscii(bytes)) continue;
        const std::string utf8 = toUtf8(bytes, declared, element->ident() == EVR_PN);
        element->putString(utf8.c_str(), static_cast<Uint32>(utf8.size()));
    }
    if (own != nullptr) delete item.remove(own);
}

}  // namespace

void convertItemToUtf8(DcmItem& root) {
    convertItem(root, characterSetOf(&root), 0);
    root.putAndInsertString(DCM_SpecificCharacterSet, "ISO_IR 192");
}

std::string truncateUtf8(const std::string& s, size_t max_bytes) {
    if (s.size() <= max_bytes) return s;
    size_t cut = max_bytes;
    while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80) --cut;
    return s.substr(0, cut);
}

}  // namespace voxseg::io::charset
