// Writing DICOM files with deeply nested sequences for the nesting-limit tests (issue 35 item
// 2): a small CT instance (4x4 pixels, complete geometry) written byte by byte, with one
// sequence nested `depth` levels deep before or after the pixel data. DCMTK cannot write these
// (its writer recurses too), hence the hand-written encoder. Header-only; test code only.
#pragma once

#include <zlib.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

namespace voxseg::testing {

enum class DeepSyntax { kExplicitLittle, kImplicitLittle, kExplicitBig, kDeflated };

struct DeepDicomSpec {
    DeepSyntax syntax = DeepSyntax::kExplicitLittle;
    int depth = 5600;
    bool undefined_lengths = true;
    // The nested sequence: private (0009,1001) before the pixel data, or (7FE1,1001) after it;
    // `public_tag`: (0040,A730) Content Sequence instead (implicit VR of defined length needs a
    // sequence DCMTK's dictionary knows).
    bool after_pixel_data = false;
    bool public_tag = false;
    // Explicit VR: write the nested sequence elements with VR UN (undefined length: DCMTK reads
    // them as implicit little endian sequences).
    bool un_vr = false;
    bool meta = true;
    std::string study_uid = "1.2.826.0.1.3680043.10.1047.1";
    std::string series_uid = "1.2.826.0.1.3680043.10.1047.1.1";
    int instance = 1;
    double z = 0;
};

namespace deep_detail {

struct Encoder {
    bool implicit = false;
    bool big = false;
    std::vector<uint8_t> out;

    void u16(uint16_t v) {
        if (big) {
            out.push_back(static_cast<uint8_t>(v >> 8));
            out.push_back(static_cast<uint8_t>(v));
        } else {
            out.push_back(static_cast<uint8_t>(v));
            out.push_back(static_cast<uint8_t>(v >> 8));
        }
    }
    void u32(uint32_t v) {
        if (big) {
            u16(static_cast<uint16_t>(v >> 16));
            u16(static_cast<uint16_t>(v));
        } else {
            u16(static_cast<uint16_t>(v));
            u16(static_cast<uint16_t>(v >> 16));
        }
    }
    static bool longVr(const char* vr) {
        for (const char* v : {"OB", "OW", "SQ", "UN", "UT", "UC", "UR", "OF", "OD", "OL"})
            if (std::memcmp(vr, v, 2) == 0) return true;
        return false;
    }
    static size_t headerSize(bool implicit, const char* vr) {
        return implicit ? 8 : longVr(vr) ? 12 : 8;
    }
    void header(uint16_t g, uint16_t e, const char* vr, uint32_t length) {
        u16(g);
        u16(e);
        if (implicit) {
            u32(length);
        } else {
            out.push_back(static_cast<uint8_t>(vr[0]));
            out.push_back(static_cast<uint8_t>(vr[1]));
            if (longVr(vr)) {
                u16(0);
                u32(length);
            } else {
                u16(static_cast<uint16_t>(length));
            }
        }
    }
    void text(uint16_t g, uint16_t e, const char* vr, std::string v) {
        if (v.size() % 2) v += std::strcmp(vr, "UI") == 0 ? '\0' : ' ';
        header(g, e, vr, static_cast<uint32_t>(v.size()));
        out.insert(out.end(), v.begin(), v.end());
    }
    void us(uint16_t g, uint16_t e, uint16_t v) {
        header(g, e, "US", 2);
        u16(v);
    }
    void item(uint32_t tag, uint32_t length) {  // item / delimiters: no VR in any syntax
        u16(static_cast<uint16_t>(tag >> 16));
        u16(static_cast<uint16_t>(tag));
        u32(length);
    }
    // The nested sequence: depth levels of element (g,e) holding one item holding the next.
    // With VR UN (explicit VR, undefined lengths) the value is implicit little endian inside.
    void deep(uint16_t g, uint16_t e, int depth, bool undefined, const char* vr) {
        if (std::strcmp(vr, "UN") == 0 && !implicit) {
            header(g, e, vr, 0xFFFFFFFF);
            const bool was_big = big;
            implicit = true;
            big = false;
            item(0xFFFEE000, 0xFFFFFFFF);
            deep(g, e, depth - 1, true, vr);
            item(0xFFFEE00D, 0);
            item(0xFFFEE0DD, 0);
            implicit = false;
            big = was_big;
            return;
        }
        const std::string leaf = "LEAF";
        const size_t leaf_size = headerSize(implicit, "LO") + leaf.size();
        const size_t level = headerSize(implicit, vr) + 8;
        for (int i = 0; i < depth; ++i) {
            const size_t inner = leaf_size + static_cast<size_t>(depth - i - 1) * level;
            header(g, e, vr, undefined ? 0xFFFFFFFF : static_cast<uint32_t>(inner + 8));
            item(0xFFFEE000, undefined ? 0xFFFFFFFF : static_cast<uint32_t>(inner));
        }
        text(0x0009, 0x1002, "LO", leaf);
        if (undefined)
            for (int i = 0; i < depth; ++i) {
                item(0xFFFEE00D, 0);
                item(0xFFFEE0DD, 0);
            }
    }
};

inline std::vector<uint8_t> rawDeflate(const std::vector<uint8_t>& in) {
    z_stream z{};
    deflateInit2(&z, 6, Z_DEFLATED, -MAX_WBITS, 8, Z_DEFAULT_STRATEGY);
    std::vector<uint8_t> out(deflateBound(&z, static_cast<uLong>(in.size())) + 16);
    z.next_in = const_cast<Bytef*>(in.data());
    z.avail_in = static_cast<uInt>(in.size());
    z.next_out = out.data();
    z.avail_out = static_cast<uInt>(out.size());
    deflate(&z, Z_FINISH);
    out.resize(z.total_out);
    deflateEnd(&z);
    return out;
}

}  // namespace deep_detail

inline std::vector<uint8_t> deepDicom(const DeepDicomSpec& s) {
    using deep_detail::Encoder;
    const std::string sop_class = "1.2.840.10008.5.1.4.1.1.2";
    const std::string sop_uid = s.series_uid + "." + std::to_string(s.instance);
    const char* syntax = s.syntax == DeepSyntax::kImplicitLittle ? "1.2.840.10008.1.2"
                         : s.syntax == DeepSyntax::kExplicitBig  ? "1.2.840.10008.1.2.2"
                         : s.syntax == DeepSyntax::kDeflated     ? "1.2.840.10008.1.2.1.99"
                                                                 : "1.2.840.10008.1.2.1";
    Encoder ds;
    ds.implicit = s.syntax == DeepSyntax::kImplicitLittle;
    ds.big = s.syntax == DeepSyntax::kExplicitBig;
    const char* vr = s.un_vr ? "UN" : "SQ";
    ds.text(0x0008, 0x0008, "CS", "ORIGINAL\\PRIMARY\\AXIAL");
    ds.text(0x0008, 0x0016, "UI", sop_class);
    ds.text(0x0008, 0x0018, "UI", sop_uid);
    ds.text(0x0008, 0x0060, "CS", "CT");
    ds.text(0x0008, 0x103E, "LO", "deep nesting");
    if (!s.after_pixel_data && !s.public_tag) {
        ds.text(0x0009, 0x0010, "LO", "VOXSEG DEEP");
        ds.deep(0x0009, 0x1001, s.depth, s.undefined_lengths, vr);
    }
    ds.text(0x0010, 0x0010, "PN", "DEEP^NESTING");
    ds.text(0x0010, 0x0020, "LO", "DEEP-0001");
    ds.text(0x0018, 0x0050, "DS", "2");
    ds.text(0x0020, 0x000D, "UI", s.study_uid);
    ds.text(0x0020, 0x000E, "UI", s.series_uid);
    ds.text(0x0020, 0x0011, "IS", "1");
    ds.text(0x0020, 0x0013, "IS", std::to_string(s.instance));
    ds.text(0x0020, 0x0032, "DS", "0\\0\\" + std::to_string(s.z));
    ds.text(0x0020, 0x0037, "DS", "1\\0\\0\\0\\1\\0");
    ds.text(0x0020, 0x0052, "UI", s.study_uid + ".9");
    ds.us(0x0028, 0x0002, 1);
    ds.text(0x0028, 0x0004, "CS", "MONOCHROME2");
    ds.us(0x0028, 0x0010, 4);
    ds.us(0x0028, 0x0011, 4);
    ds.text(0x0028, 0x0030, "DS", "1\\1");
    ds.us(0x0028, 0x0100, 16);
    ds.us(0x0028, 0x0101, 16);
    ds.us(0x0028, 0x0102, 15);
    ds.us(0x0028, 0x0103, 1);
    ds.text(0x0028, 0x1052, "DS", "0");
    ds.text(0x0028, 0x1053, "DS", "1");
    if (!s.after_pixel_data && s.public_tag)
        ds.deep(0x0040, 0xA730, s.depth, s.undefined_lengths, vr);
    ds.header(0x7FE0, 0x0010, "OW", 32);
    for (int i = 0; i < 16; ++i) ds.u16(static_cast<uint16_t>(i * 10));
    if (s.after_pixel_data) {
        ds.text(0x7FE1, 0x0010, "LO", "VOXSEG DEEP");
        ds.deep(0x7FE1, 0x1001, s.depth, s.undefined_lengths, vr);
    }

    std::vector<uint8_t> file;
    if (s.meta) {
        Encoder meta;  // explicit VR little endian
        meta.text(0x0002, 0x0001, "OB", std::string("\0\1", 2));
        meta.text(0x0002, 0x0002, "UI", sop_class);
        meta.text(0x0002, 0x0003, "UI", sop_uid);
        meta.text(0x0002, 0x0010, "UI", syntax);
        meta.text(0x0002, 0x0012, "UI", "1.2.826.0.1.3680043.10.1047");
        file.assign(128, 0);
        file.insert(file.end(), {'D', 'I', 'C', 'M'});
        Encoder length;
        length.header(0x0002, 0x0000, "UL", 4);
        length.u32(static_cast<uint32_t>(meta.out.size()));
        file.insert(file.end(), length.out.begin(), length.out.end());
        file.insert(file.end(), meta.out.begin(), meta.out.end());
    }
    if (s.syntax == DeepSyntax::kDeflated) {
        const std::vector<uint8_t> packed = deep_detail::rawDeflate(ds.out);
        file.insert(file.end(), packed.begin(), packed.end());
    } else {
        file.insert(file.end(), ds.out.begin(), ds.out.end());
    }
    return file;
}

inline std::string writeDeepDicom(const std::filesystem::path& path, const DeepDicomSpec& s) {
    const std::vector<uint8_t> bytes = deepDicom(s);
    std::filesystem::create_directories(path.parent_path());
    std::ofstream(path, std::ios::binary)
        .write(reinterpret_cast<const char*>(bytes.data()),
               static_cast<std::streamsize>(bytes.size()));
    return path.string();
}

}  // namespace voxseg::testing
