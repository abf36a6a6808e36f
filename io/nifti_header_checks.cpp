#include "io/nifti_header_checks.h"

#include "io/gzip_reader.h"
#include "io/image_io.h"

#include <fmt/format.h>
#include <zlib.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <optional>

namespace voxseg::io {
namespace {
namespace fs = std::filesystem;

// A NIfTI-1 header's 348 bytes, read in the byte order niftilib picks: by dim[0] in 1..7, not
// by sizeof_hdr, which it ignores (a header it reads must be checked in the same order).
struct NiftiHeaderView {
    const unsigned char* hdr;
    bool swap;
    int16_t i16(int off) const {
        return static_cast<int16_t>(swap ? (hdr[off] << 8 | hdr[off + 1])
                                         : (hdr[off + 1] << 8 | hdr[off]));
    }
    uint32_t u32(int off) const {
        uint32_t v = 0;
        for (int i = 0; i < 4; ++i) v = v << 8 | hdr[swap ? off + i : off + 3 - i];
        return v;
    }
    float f32(int off) const {
        const uint32_t bits = u32(off);
        float v = 0;
        std::memcpy(&v, &bits, sizeof v);
        return v;
    }
};

// Empty when neither byte order gives a dim[0] in 1..7 (ITK refuses such a file itself).
std::optional<NiftiHeaderView> niftiHeaderView(const unsigned char* hdr) {
    for (const bool swap : {false, true}) {
        const NiftiHeaderView view{hdr, swap};
        if (view.i16(40) >= 1 && view.i16(40) <= 7) return view;
    }
    return std::nullopt;
}

// The bytes a NIfTI header promises: vox_offset + dim product * bitpix / 8. 0 when the header
// is not one ITK reads (ITK then says what is wrong).
Result<int64_t> niftiPromisedBytes(const std::string& path) {
    gzFile f = gzopen(path.c_str(), "rb");
    if (f == nullptr) return ioError("cannot open", path);
    struct Closer {
        gzFile f;
        ~Closer() { gzclose(f); }
    } closer{f};
    unsigned char hdr[348];
    if (gzread(f, hdr, sizeof hdr) != static_cast<int>(sizeof hdr))
        return corruptData("NIfTI header is truncated (under 348 bytes)", path);
    const auto view = niftiHeaderView(hdr);
    if (!view) return int64_t{0};  // ITK refuses it
    const int ndim = view->i16(40);
    // In double: seven dimensions of 32767 overflow int64, and vox_offset is a float the file
    // sets (2.7e23 made the conversion undefined; found by fuzz_image_nii).
    double voxels = 1;
    for (int d = 1; d <= ndim; ++d) voxels *= std::max<int16_t>(1, view->i16(40 + 2 * d));
    const int bitpix = std::max<int>(0, view->i16(72));
    const float vox_offset = view->f32(108);
    if (!std::isfinite(vox_offset) || vox_offset < 0)
        return corruptData(fmt::format("NIfTI header has vox_offset = {}", vox_offset), path);
    const double claimed = std::max(352.0, static_cast<double>(vox_offset)) + voxels * bitpix / 8;
    if (claimed > 0x1p62)
        return corruptData(fmt::format("NIfTI header promises {:.3g} bytes", claimed), path);
    return static_cast<int64_t>(claimed);
}

}  // namespace

// ITK 5.2's NIfTI reader aborts the process (vnl's assert_finite) on a non-finite orientation
// matrix (found by fuzz_image_nii: a NaN in srow_y), and its SVD of the matrix never returns
// when an entry is finite but huge (fuzz_image_nii campaign: srow_z[3] = -2.9e38 hung
// vnl_svd/netlib ssvdc for minutes): the header's spacing, quaternion and affine rows in use
// must be finite and within 1e9 (mm; a kilometre-sized voxel or offset is a corrupt header)
// before ITK reads it.
Status checkNiftiHeaderFinite(const std::string& path) {
    gzFile f = gzopen(path.c_str(), "rb");
    if (f == nullptr) return ioError("cannot open", path);
    unsigned char hdr[348];
    const int n = gzread(f, hdr, sizeof hdr);
    gzclose(f);
    if (n != static_cast<int>(sizeof hdr)) return Status::ok();  // ITK says what is wrong
    const auto view = niftiHeaderView(hdr);
    if (!view) return Status::ok();
    auto check = [&](const char* field, int off, int count) -> Status {
        constexpr float kMaxMagnitude = 1e9f;
        for (int i = 0; i < count; ++i) {
            const float v = view->f32(off + 4 * i);
            if (!std::isfinite(v))
                return corruptData(fmt::format("NIfTI header has a non-finite {}[{}]", field, i),
                                   path);
            if (std::abs(v) > kMaxMagnitude)
                return corruptData(fmt::format("NIfTI header's {}[{}] is {:g}, beyond {:g} mm",
                                               field, i, v, kMaxMagnitude),
                                   path);
        }
        return Status::ok();
    };
    VOXSEG_RETURN_IF_ERROR(check("pixdim", 80, view->i16(40)));  // pixdim[1..dim[0]]
    if (view->i16(252) > 0) VOXSEG_RETURN_IF_ERROR(check("quatern/qoffset", 256, 6));  // qform
    if (view->i16(254) > 0) VOXSEG_RETURN_IF_ERROR(check("srow", 280, 12));            // sform_code
    return Status::ok();
}

// What a NIfTI header promises, checked before ITK allocates the image (issue 35: a 1,376-byte
// .nii claiming 1250^3 float64 held 15.4 GB for 40 s before its truncation was found): a .nii
// must hold the bytes (the file size), a .nii.gz's stream must be able to inflate to them
// (deflate's 1032:1).
Status checkNiftiClaim(const std::string& path) {
    VOXSEG_ASSIGN_OR_RETURN(const int64_t needed, niftiPromisedBytes(path));
    std::error_code ec;
    const auto size = static_cast<int64_t>(fs::file_size(path, ec));
    if (ec) return ioError("cannot read the file size: " + ec.message(), path);
    if (imageFormatFromPath(path) == ImageFormat::kNiftiGz)
        return checkDeflateCanHold(path, "the NIfTI's gzip stream", needed, size);
    if (size < needed)
        return corruptData("file is truncated: the header promises " + std::to_string(needed) +
                               " bytes, the file holds " + std::to_string(size) +
                               "; re-export or re-copy it",
                           path);
    return Status::ok();
}

// ITK 5.2's NIfTI reader zero-fills what a truncated .nii.gz lacks and reports success: the
// stream is inflated here (all gzip members, CRC-checked by zlib, through a 1 MiB buffer, up to
// one byte past the header's promise), which the caller runs on a second thread while ITK reads.
// (A .nii is checked against its size by checkNiftiClaim, before ITK reads.)
Status checkNiftiComplete(const std::string& path) {
    if (imageFormatFromPath(path) != ImageFormat::kNiftiGz) return Status::ok();
    VOXSEG_ASSIGN_OR_RETURN(const int64_t needed, niftiPromisedBytes(path));
    // One byte more than promised: the stream's end, and so its CRC, is reached and checked
    // when it holds what the header says; a longer stream is not inflated to its end.
    VOXSEG_ASSIGN_OR_RETURN(const GzipCount count, countGzipBytes(path, 0, needed + 1));
    if (!count.ended && count.bytes < needed)
        return corruptData("file is truncated: the gzip stream ends early (" +
                               std::to_string(count.bytes) + " of " + std::to_string(needed) +
                               " bytes); re-export or re-copy it",
                           path);
    if (count.bytes < needed)
        return corruptData("file is truncated: the header promises " + std::to_string(needed) +
                               " bytes, the file holds " + std::to_string(count.bytes) +
                               "; re-export or re-copy it",
                           path);
    return Status::ok();
}

}  // namespace voxseg::io
