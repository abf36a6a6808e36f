#include "io/dicom_tags.h"

#include "io/dicom_charset.h"

#include <cmath>
#include <cstdlib>
#include <limits>

namespace voxseg::io::tags {

namespace {

std::string trim(const std::string& s) {
    size_t b = 0;
    size_t e = s.size();
    while (b < e && (s[b] == ' ' || s[b] == '\0')) ++b;
    while (e > b && (s[e - 1] == ' ' || s[e - 1] == '\0')) --e;
    return s.substr(b, e - b);
}

}  // namespace

std::string getString(DcmItem* item, const DcmTagKey& tag) {
    // In UTF-8 whatever the data set's SpecificCharacterSet (io/dicom_charset.h).
    return trim(charset::getUtf8(item, tag));
}

double getDouble(DcmItem* item, const DcmTagKey& tag, unsigned long pos, double fallback) {
    if (!item) return fallback;
    // A value that is not a finite number ("inf", "1e999", NaN: no valid DS or FD holds one)
    // counts as absent, so that no spacing, position or time downstream is infinite.
    Float64 value = 0;
    if (item->findAndGetFloat64(tag, value, pos, OFFalse).good())
        return std::isfinite(value) ? value : fallback;
    // Fallback for IS and malformed DS: parse the string component.
    OFString s;
    if (item->findAndGetOFString(tag, s, pos, OFFalse).good() && !s.empty()) {
        char* end = nullptr;
        double v = std::strtod(s.c_str(), &end);
        if (end != s.c_str()) return std::isfinite(v) ? v : fallback;
    }
    return fallback;
}

int getInt(DcmItem* item, const DcmTagKey& tag, int fallback) {
    if (!item) return fallback;
    Sint32 value = 0;
    if (item->findAndGetSint32(tag, value, 0, OFFalse).good()) return value;
    Uint16 u16 = 0;
    if (item->findAndGetUint16(tag, u16, 0, OFFalse).good()) return u16;
    Uint32 u32 = 0;
    if (item->findAndGetUint32(tag, u32, 0, OFFalse).good()) return static_cast<int>(u32);
    double d = getDouble(item, tag, 0, static_cast<double>(fallback));
    // out of int's range the conversion would be undefined
    if (!(d >= std::numeric_limits<int>::min() && d <= std::numeric_limits<int>::max()))
        return fallback;
    return static_cast<int>(d);
}

std::vector<double> getDoubles(DcmItem* item, const DcmTagKey& tag) {
    std::vector<double> out;
    if (!item) return out;
    DcmElement* element = nullptr;
    if (item->findAndGetElement(tag, element, OFFalse).bad() || !element) return out;
    const unsigned long vm = element->getVM();
    for (unsigned long i = 0; i < vm; ++i) {
        double v = getDouble(item, tag, i, std::numeric_limits<double>::quiet_NaN());
        if (v != v) return {};
        out.push_back(v);
    }
    return out;
}

DcmItem* getItem(DcmItem* item, const DcmTagKey& tag, unsigned long index) {
    if (!item) return nullptr;
    DcmItem* sub = nullptr;
    if (item->findAndGetSequenceItem(tag, sub, static_cast<signed long>(index), OFFalse).bad())
        return nullptr;
    return sub;
}

DcmTagKey privateTag(DcmItem* item, Uint16 group, const char* creator, Uint8 element_low) {
    if (item) {
        for (Uint16 block = 0x10; block <= 0xFF; ++block) {
            std::string owner = getString(item, DcmTagKey(group, block));
            if (owner == creator)
                return DcmTagKey(group, static_cast<Uint16>((block << 8) | element_low));
        }
    }
    return DcmTagKey(0, 0);
}

std::vector<Uint8> getBytes(DcmItem* item, const DcmTagKey& tag) {
    std::vector<Uint8> out;
    if (!item || tag.getGroup() == 0) return out;
    DcmElement* element = nullptr;
    if (item->findAndGetElement(tag, element, OFFalse).bad() || !element) return out;
    const Uint32 length = element->getLength();
    if (length == 0) return out;
    // OB and UN (private elements of implicit-VR files) hold the raw bytes.
    Uint8* bytes = nullptr;
    if (element->getUint8Array(bytes).good() && bytes) out.assign(bytes, bytes + length);
    return out;
}

}  // namespace voxseg::io::tags
