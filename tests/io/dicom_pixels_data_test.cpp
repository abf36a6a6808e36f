// Pixel decoding on real scanner data (../shared/data; label `data`, skipped when absent).
#include "io/dicom_pixels.h"
#include "tests/io/pixel_test_util.h"
#include "tests/test_data.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>

namespace voxseg::io {
namespace {

using testing::decodeAll;
using testing::mosaicTile;
using testing::readNifti;
using testing::sharedData;

constexpr int64_t kMosaicTile = 64;  // dcm_qa_ts / dcm_qa_12bit: 384x384 mosaic of 64x64 tiles
constexpr int64_t kMosaicSlices = 35;

// Every tile of the mosaic must equal one slice of the dcm2niix reference, each slice once.
void expectMosaicMatchesNifti(const std::vector<int32_t>& mosaic, int64_t width,
                              const std::string& nifti) {
    const auto reference = readNifti(nifti);
    ASSERT_EQ(reference.size[2], kMosaicSlices);
    const testing::SliceIndex slices(reference, 2);
    std::set<int64_t> matched;
    for (int64_t k = 0; k < kMosaicSlices; ++k) {
        const int64_t z = slices.find(mosaicTile(mosaic, width, kMosaicTile, k));
        EXPECT_GE(z, 0) << "mosaic tile " << k << " matches no slice of " << nifti;
        matched.insert(z);
    }
    EXPECT_EQ(matched.size(), static_cast<size_t>(kMosaicSlices));
}

TEST(DicomPixelsData, AllNineTransferSyntaxesDecodeIdentically) {
    VOXSEG_REQUIRE_DATA("dcm_qa_ts/In");
    PixelFormat base_format;
    const auto base = decodeAll(sharedData("dcm_qa_ts/In/1.dcm").string(), &base_format);
    ASSERT_EQ(base.size(), 384u * 384u);
    EXPECT_EQ(base_format.bits_stored, 12);
    for (int i = 2; i <= 9; ++i) {
        const std::string path = sharedData("dcm_qa_ts/In/" + std::to_string(i) + ".dcm").string();
        PixelFormat format;
        const auto pixels = decodeAll(path, &format);
        EXPECT_TRUE(pixels == base) << path << " (" << format.transfer_syntax_uid
                                    << ") differs from the uncompressed 1.dcm";
    }
    expectMosaicMatchesNifti(base, 384, sharedData("dcm_qa_ts/Ref/1.nii").string());
}

TEST(DicomPixelsData, TwelveBitMaskingAndSignExtension) {
    VOXSEG_REQUIRE_DATA("dcm_qa_12bit/In");
    const struct {
        const char* file;
        const char* ref;
        bool is_signed;
    } cases[] = {{"12bitUnsigned.dcm", "2.nii", false},
                 {"12bitUnsigned_0x0F0F.dcm", "3.nii", false},
                 {"12bitSigned_0x0F0F.dcm", "4.nii", true}};
    for (const auto& c : cases) {
        SCOPED_TRACE(c.file);
        PixelFormat format;
        const auto pixels =
            decodeAll(sharedData(std::string("dcm_qa_12bit/In/") + c.file).string(), &format);
        ASSERT_FALSE(pixels.empty());
        EXPECT_EQ(format.bits_stored, 12);
        EXPECT_EQ(format.is_signed, c.is_signed);
        const auto [lo, hi] = std::minmax_element(pixels.begin(), pixels.end());
        if (c.is_signed) {
            EXPECT_GE(*lo, -2048);
            EXPECT_LE(*hi, 2047);
            EXPECT_LT(*lo, 0) << "signed 12-bit data must produce negative values";
        } else {
            EXPECT_GE(*lo, 0);
            EXPECT_LE(*hi, 4095);
        }
        expectMosaicMatchesNifti(pixels, 384,
                                 sharedData(std::string("dcm_qa_12bit/Ref/") + c.ref).string());
    }
}

// Each file of dcm_qa_frag is one sagittal slice whose compressed frame spans several fragments;
// every decoded slice must equal one slice of the dcm2niix reference volume, each slice once.
void expectFragSeriesMatches(const std::string& folder, const std::string& nifti) {
    const auto reference = readNifti(nifti);
    ASSERT_EQ(reference.size[0], 96);
    const testing::SliceIndex slices(reference, 0);
    std::set<int64_t> matched;
    int files = 0;
    for (const auto& entry : std::filesystem::directory_iterator(folder)) {
        PixelFormat format;
        const auto pixels = decodeAll(entry.path().string(), &format);
        ASSERT_EQ(pixels.size(), 128u * 128u) << entry.path();
        testing::Slice slice{format.columns, format.rows, pixels};
        const int64_t x = slices.find(slice);
        EXPECT_GE(x, 0) << entry.path() << " matches no slice of " << nifti;
        matched.insert(x);
        ++files;
    }
    EXPECT_EQ(files, 96);
    EXPECT_EQ(matched.size(), 96u);
}

TEST(DicomPixelsData, FragmentedJpegLosslessMatchesReference) {
    VOXSEG_REQUIRE_DATA("dcm_qa_frag/In/5001_anat-T1w_acq-tfl");
    expectFragSeriesMatches(sharedData("dcm_qa_frag/In/5001_anat-T1w_acq-tfl").string(),
                            sharedData("dcm_qa_frag/Ref/anat-T1w_acq-tfl_5001.nii").string());
}

TEST(DicomPixelsData, FragmentedJpeg2000MatchesReference) {
    VOXSEG_REQUIRE_DATA("dcm_qa_frag/In/6001_anat-T1w_acq-tfl");
    expectFragSeriesMatches(sharedData("dcm_qa_frag/In/6001_anat-T1w_acq-tfl").string(),
                            sharedData("dcm_qa_frag/Ref/anat-T1w_acq-tfl_6001.nii").string());
}

// Rewrites the TransferSyntaxUID of a file's meta header (explicit VR little endian), fixing the
// element and group lengths. Returns false when the layout is not the expected one.
bool rewriteTransferSyntax(const std::filesystem::path& in, const std::filesystem::path& out,
                           const std::string& from, const std::string& to) {
    std::ifstream f(in, std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(f)), {});
    const std::string padded_from = from.size() % 2 ? from + '\0' : from;
    const std::string padded_to = to.size() % 2 ? to + '\0' : to;
    const std::string tag("\x02\x00\x10\x00UI", 6);
    const size_t at = bytes.find(tag + static_cast<char>(padded_from.size()) + '\0' + padded_from);
    const size_t group = bytes.find(std::string("\x02\x00\x00\x00UL\x04\x00", 8));
    if (at == std::string::npos || group == std::string::npos) return false;
    bytes.replace(at + 8, padded_from.size(), padded_to);
    bytes[at + 6] = static_cast<char>(padded_to.size());
    uint32_t group_length = 0;
    std::memcpy(&group_length, bytes.data() + group + 8, 4);
    group_length += static_cast<uint32_t>(padded_to.size() - padded_from.size());
    std::memcpy(bytes.data() + group + 8, &group_length, 4);
    std::ofstream(out, std::ios::binary) << bytes;
    return true;
}

// DCMTK 3.6.7 does not know the HTJ2K transfer syntaxes; the reader must still find the fragments
// and decode them with OpenJPEG. A Part 1 codestream is valid HTJ2K content (Part 15 decoders read
// both), so relabelling a JPEG 2000 file exercises that path with a known answer.
TEST(DicomPixelsData, Htj2kLabelledFileDecodesLikeJpeg2000) {
    VOXSEG_REQUIRE_DATA("pydicom-test-files/MR_small_jp2klossless.dcm");
    voxseg::testing::TempDir dir;
    const auto source = sharedData("pydicom-test-files/MR_small_jp2klossless.dcm");
    const auto relabelled = dir.path() / "htj2k.dcm";
    ASSERT_TRUE(rewriteTransferSyntax(source, relabelled, "1.2.840.10008.1.2.4.90",
                                      "1.2.840.10008.1.2.4.201"));
    PixelFormat format;
    const auto expected = decodeAll(source.string());
    const auto pixels = decodeAll(relabelled.string(), &format);
    EXPECT_EQ(format.transfer_syntax_uid, "1.2.840.10008.1.2.4.201");
    ASSERT_FALSE(expected.empty());
    EXPECT_TRUE(pixels == expected);
}

}  // namespace
}  // namespace voxseg::io
