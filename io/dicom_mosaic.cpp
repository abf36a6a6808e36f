#include "io/dicom_mosaic.h"

#include "io/dicom_tags.h"

#include <cmath>
#include <cstdlib>
#include <cstring>

namespace voxseg::io {

namespace {

uint32_t readU32(const std::vector<Uint8>& b, size_t at) {
    return static_cast<uint32_t>(b[at]) | (static_cast<uint32_t>(b[at + 1]) << 8) |
           (static_cast<uint32_t>(b[at + 2]) << 16) | (static_cast<uint32_t>(b[at + 3]) << 24);
}

}  // namespace

std::vector<std::string> csaValues(const std::vector<Uint8>& csa, const std::string& name) {
    // Layout (nibabel's csareader documents it): ["SV10" + 4 bytes] n_tags(u32) unused(u32),
    // then per tag: name[64] vm(i32) vr[4] syngodt(i32) n_items(i32) unused(i32), then per
    // item: 4 x i32 (the second is the value length) and the value padded to 4 bytes.
    std::vector<std::string> values;
    size_t at = 0;
    if (csa.size() >= 8 && std::memcmp(csa.data(), "SV10", 4) == 0) at = 8;
    if (csa.size() < at + 8) return values;
    const uint32_t n_tags = readU32(csa, at);
    at += 8;
    if (n_tags == 0 || n_tags > 1000) return values;
    for (uint32_t t = 0; t < n_tags; ++t) {
        if (csa.size() < at + 84) return values;
        std::string tag_name(reinterpret_cast<const char*>(&csa[at]),
                             strnlen(reinterpret_cast<const char*>(&csa[at]), 64));
        const uint32_t n_items = readU32(csa, at + 76);
        at += 84;
        if (n_items > 10000) return values;
        for (uint32_t i = 0; i < n_items; ++i) {
            if (csa.size() < at + 16) return values;
            const uint32_t length = readU32(csa, at + 4);
            at += 16;
            if (csa.size() < at + length) return values;
            if (tag_name == name && length > 0) {
                std::string v(reinterpret_cast<const char*>(&csa[at]),
                              strnlen(reinterpret_cast<const char*>(&csa[at]), length));
                while (!v.empty() && (v.back() == ' ' || v.back() == '\0')) v.pop_back();
                values.push_back(v);
            }
            at += (length + 3) / 4 * 4;
        }
        if (tag_name == name) return values;
    }
    return values;
}

MosaicInfo readMosaicInfo(DcmDataset* ds, const FrameHeader& base) {
    MosaicInfo info;
    if (base.image_type.find("MOSAIC") == std::string::npos) return info;
    info.is_mosaic = true;
    std::vector<Uint8> csa =
        tags::getBytes(ds, tags::privateTag(ds, 0x0029, "SIEMENS CSA HEADER", 0x10));
    if (!csa.empty()) {
        std::vector<std::string> n = csaValues(csa, "NumberOfImagesInMosaic");
        if (!n.empty()) info.images = std::atoi(n[0].c_str());
        std::vector<std::string> normal = csaValues(csa, "SliceNormalVector");
        if (normal.size() == 3) {
            info.slice_normal = {std::atof(normal[0].c_str()), std::atof(normal[1].c_str()),
                                 std::atof(normal[2].c_str())};
            info.has_normal = norm(info.slice_normal) > 0.5;
        }
    }
    if (info.images <= 0) {
        DcmTagKey key = tags::privateTag(ds, 0x0019, "SIEMENS MR HEADER", 0x0A);
        if (key.getGroup() != 0) {
            info.images = tags::getInt(ds, key, 0);
            if (info.images <= 0) {
                std::vector<Uint8> raw = tags::getBytes(ds, key);
                if (raw.size() == 2) info.images = raw[0] | (raw[1] << 8);
            }
        }
    }
    return info;
}

std::vector<FrameHeader> expandMosaic(const FrameHeader& base, const MosaicInfo& info,
                                      std::string& error) {
    if (info.images <= 0) {
        error =
            "Siemens MOSAIC without NumberOfImagesInMosaic (no CSA image header, no (0019,xx0A)): "
            "cannot unpack; convert it with the scanner software or dcm2niix";
        return {};
    }
    const int across = static_cast<int>(std::ceil(std::sqrt(static_cast<double>(info.images))));
    if (base.rows % across != 0 || base.columns % across != 0) {
        error = "Siemens MOSAIC of " + std::to_string(base.columns) + "x" +
                std::to_string(base.rows) + " does not divide into " + std::to_string(across) +
                "x" + std::to_string(across) + " tiles";
        return {};
    }
    if (!base.has_geometry) {
        error = "Siemens MOSAIC without ImagePositionPatient/ImageOrientationPatient";
        return {};
    }
    const int tile_rows = base.rows / across;
    const int tile_columns = base.columns / across;
    // IPP of a mosaic is the corner of the whole tiled image; move it to the first tile's.
    const double shift_x = (base.columns - tile_columns) / 2.0 * base.column_spacing;
    const double shift_y = (base.rows - tile_rows) / 2.0 * base.row_spacing;
    Vec3 first;
    for (int a = 0; a < 3; ++a)
        first[a] = base.position[a] + shift_x * base.row_dir[a] + shift_y * base.col_dir[a];
    Vec3 normal = info.has_normal ? info.slice_normal : cross(base.row_dir, base.col_dir);
    const double n = norm(normal);
    for (double& v : normal) v /= n;
    const double step = std::isfinite(base.spacing_between_slices) ? base.spacing_between_slices
                        : std::isfinite(base.slice_thickness)      ? base.slice_thickness
                                                                   : 1.0;
    std::vector<FrameHeader> tiles;
    for (int k = 0; k < info.images; ++k) {
        FrameHeader f = base;
        f.tile = k;
        f.rows = tile_rows;
        f.columns = tile_columns;
        f.mosaic_tiles_across = across;
        f.in_stack_position = k + 1;
        for (int a = 0; a < 3; ++a) f.position[a] = first[a] + k * step * normal[a];
        tiles.push_back(std::move(f));
    }
    return tiles;
}

}  // namespace voxseg::io
