// Pixel decoding on real scanner data (../shared/data; label `data`, skipped when absent).
#include "io/dicom_pixels.h"
#include "tests/io/pixel_test_util.h"
#include "tests/test_data.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
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

}  // namespace
}  // namespace voxseg::io
