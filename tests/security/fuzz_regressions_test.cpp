// Inputs the fuzzers of tests/fuzz found crashing (issue 19; docs/security.md), replayed
// through the product's own entry points in the normal build: each must end in a clear error,
// not an abort. The inputs lie in tests/fuzz/regressions/<fuzz target>/ (scripts/fuzz.sh also
// replays them as seeds on every CI fuzz run); copies named as a user would name them are made
// in a temporary folder.
#include "edit/edit_op.h"
#include "engine/model_package.h"
#include "engine/onnx_import.h"
#include "io/dicom_header.h"
#include "io/dicom_series.h"
#include "io/image_io.h"
#include "io/seg_reader.h"
#include "tests/test_data.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

namespace voxseg::io {
namespace {
namespace fs = std::filesystem;
using voxseg::testing::TempDir;

// A regression input copied to `dir/name`.
std::string regression(const TempDir& dir, const std::string& target, const std::string& input,
                       const std::string& name) {
    const fs::path from = fs::path(VOXSEG_SOURCE_DIR) / "tests/fuzz/regressions" / target / input;
    const fs::path to = dir / name;
    fs::copy_file(from, to);
    return to.string();
}

// The bytes of a regression input.
std::string regressionBytes(const std::string& target, const std::string& input) {
    std::ifstream in(fs::path(VOXSEG_SOURCE_DIR) / "tests/fuzz/regressions" / target / input,
                     std::ios::binary);
    std::stringstream bytes;
    bytes << in.rdbuf();
    return bytes.str();
}

void expectRefusedImage(const std::string& path) {
    auto header = readImageHeader(path);
    ASSERT_FALSE(header.isOk());
    EXPECT_EQ(header.status().code(), StatusCode::kUnsupported) << header.status().toString();
    EXPECT_NE(header.status().toString().find(fs::path(path).filename().string()),
              std::string::npos)
        << header.status().toString();
    auto volume = readImage(path);
    ASSERT_FALSE(volume.isOk());
    EXPECT_EQ(volume.status().code(), StatusCode::kUnsupported) << volume.status().toString();
}

// fuzz_image_mha: 9 bytes, a PNG signature and one more byte, named .mha. ITK's reader factory
// chose its PNG reader by content and libpng aborted the process ("voxseg convert scan.mha"
// died with SIGABRT). Now the extension picks the reader, which refuses the file.
TEST(FuzzRegressions, TruncatedPngNamedMhaIsRefusedNotAborted) {
    TempDir dir;
    expectRefusedImage(regression(dir, "fuzz_image_mha", "truncated-png-named-mha", "scan.mha"));
}

// fuzz_image_nii_gz: a PNG signature followed by a gzip stream, named .nii.gz (same abort).
TEST(FuzzRegressions, DamagedPngNamedNiiGzIsRefusedNotAborted) {
    TempDir dir;
    expectRefusedImage(
        regression(dir, "fuzz_image_nii_gz", "damaged-png-named-nii-gz", "scan.nii.gz"));
}

// fuzz_image_nii: a NIfTI-1 header whose vox_offset (a float the file sets) is 2.7e23; the
// completeness check converted it to int64 (undefined behaviour, UBSan stopped there). Now
// the claim is computed in double and refused as corrupt data naming it ("promises 2.72e+23
// bytes"); a vox_offset that is not a finite, non-negative number is refused the same way.
TEST(FuzzRegressions, NiftiWithHugeVoxOffsetIsCorruptData) {
    TempDir dir;
    const std::string path = regression(dir, "fuzz_image_nii", "vox-offset-2.7e23", "scan.nii");
    auto volume = readImage(path);
    ASSERT_FALSE(volume.isOk());
    EXPECT_EQ(volume.status().code(), StatusCode::kCorruptData) << volume.status().toString();
    EXPECT_NE(volume.status().toString().find("promises 2.72e+23 bytes"), std::string::npos)
        << volume.status().toString();
}

// The fix must not refuse real files: each format written and read back by extension.
TEST(FuzzRegressions, ImagesAreStillReadByExtension) {
    TempDir dir;
    Geometry g;
    g.size = {4, 3, 2};
    Volume v = Volume::allocate<int16_t>(g);
    for (int64_t i = 0; i < g.voxelCount(); ++i) v.data<int16_t>()[i] = static_cast<int16_t>(i);
    for (const std::string name : {"a.nii", "a.nii.gz", "a.nrrd", "a.mha"}) {
        const std::string path = dir / name;
        ASSERT_TRUE(writeImage(v, path).isOk()) << name;
        auto back = readImage(path);
        ASSERT_TRUE(back.isOk()) << name << ": " << back.status().toString();
        EXPECT_EQ(back->geometry().size, g.size) << name;
    }
}

// fuzz_dicomdir: a DICOMDIR whose directory record holds a damaged string; DCMTK's reader
// throws std::out_of_range from DcmByteString::verify inside loadFile, which terminated
// "voxseg info DICOMDIR". Now it is corrupt data naming the file.
TEST(FuzzRegressions, DicomdirWhoseRecordThrowsInDcmtkIsCorruptData) {
    TempDir dir;
    const std::string path =
        regression(dir, "fuzz_dicomdir", "record-type-throws-out-of-range", "DICOMDIR");
    auto files = readDicomdir(path);
    ASSERT_FALSE(files.isOk());
    EXPECT_EQ(files.status().code(), StatusCode::kCorruptData) << files.status().toString();
    EXPECT_NE(files.status().toString().find("DICOMDIR"), std::string::npos);
    auto scan = scanDicom({path});
    EXPECT_FALSE(scan.isOk());
}

// fuzz_dicom_header: the same kind of record inside an image file's header; the scan skips the
// file with the reason (and DCMTK's leak on that path is listed in tests/fuzz/lsan.supp).
TEST(FuzzRegressions, HeaderWithThrowingDirectoryRecordIsSkipped) {
    TempDir dir;
    const std::string path = regression(dir, "fuzz_dicom_header",
                                        "directory-record-throws-leaks-in-dcmtk", "IM0001.dcm");
    auto scan = scanDicom({path});
    ASSERT_FALSE(scan.isOk());
    EXPECT_NE(scan.status().toString().find("IM0001.dcm"), std::string::npos)
        << scan.status().toString();
}

// fuzz_seg_reader: a binary SEG whose ImageOrientationPatient became zero. The grid derived
// from its frames had a singular direction; ITK threw from SetDirection inside
// Volume::allocate and nothing caught it ("voxseg edit --labels seg.dcm" terminated).
TEST(FuzzRegressions, SegWithZeroOrientationIsCorruptData) {
    TempDir dir;
    const std::string path =
        regression(dir, "fuzz_seg_reader", "zero-orientation-singular-direction", "seg.dcm");
    auto seg = readDicomSeg(path);
    ASSERT_FALSE(seg.isOk());
    EXPECT_EQ(seg.status().code(), StatusCode::kCorruptData) << seg.status().toString();
    EXPECT_NE(seg.status().toString().find("ImageOrientationPatient"), std::string::npos)
        << seg.status().toString();
}

// fuzz_seg_reader: the same zero orientation in a Label Map SEG (its own reader,
// io/seg_labelmap.cpp, made the volume before the shared grid check ran).
TEST(FuzzRegressions, LabelMapSegWithZeroOrientationIsCorruptData) {
    TempDir dir;
    const std::string path =
        regression(dir, "fuzz_seg_reader", "labelmap-zero-orientation", "labelmap-seg.dcm");
    auto seg = readDicomSeg(path);
    ASSERT_FALSE(seg.isOk());
    EXPECT_EQ(seg.status().code(), StatusCode::kCorruptData) << seg.status().toString();
}

// fuzz_onnx_import: a Reshape whose target dims multiply past 2^63; shape inference overflowed
// int64 (undefined behaviour; UBSan stopped there). Now the import names the node and refuses.
TEST(FuzzRegressions, OnnxReshapeWhoseDimsOverflowIsRefused) {
    const std::string bytes = regressionBytes("fuzz_onnx_import", "reshape-dims-overflow-int64");
    auto graph = engine::importOnnxBytes(bytes, {}, "model.onnx");
    ASSERT_FALSE(graph.isOk());
    EXPECT_NE(graph.status().toString().find("2^63"), std::string::npos)
        << graph.status().toString();
}

// fuzz_model_json: a number too large for a double (9e886) made nlohmann::json throw
// out_of_range.406, which parseModelPackage did not catch (only parse_error): the process
// terminated. Now it is corrupt data naming the file; the node's config and the edit journal's
// lines had the same gap.
TEST(FuzzRegressions, ModelJsonWithANumberBeyondDoubleIsCorruptData) {
    const std::string bytes = regressionBytes("fuzz_model_json", "number-overflow-9e886");
    auto package = engine::parseModelPackage(bytes, "model.json", fs::temp_directory_path());
    ASSERT_FALSE(package.isOk());
    EXPECT_EQ(package.status().code(), StatusCode::kCorruptData) << package.status().toString();
    EXPECT_NE(package.status().toString().find("model.json"), std::string::npos);
    auto op = edit::parseEditOp(R"({"op": "paint", "radius_mm": 1e999})");
    ASSERT_FALSE(op.isOk());
    EXPECT_NE(op.status().toString().find("not JSON"), std::string::npos) << op.status().toString();
}

// fuzz_onnx_import: a Resize whose scale makes an output size beyond int64 was converted from
// double to int64 anyway (undefined behaviour; UBSan stopped in engine/graph.cpp). Now the node
// is refused with the scale and the size.
TEST(FuzzRegressions, OnnxResizeWhoseOutputExceedsInt64IsRefused) {
    const std::string bytes =
        regressionBytes("fuzz_onnx_import", "resize-scale-output-beyond-int64");
    auto graph = engine::importOnnxBytes(bytes, {}, "model.onnx");
    ASSERT_FALSE(graph.isOk());
    EXPECT_NE(graph.status().toString().find("gives an output of"), std::string::npos)
        << graph.status().toString();
}

// fuzz_image_nii (found by the CI-length run of the final test): a NaN in srow_y made ITK's
// NIfTI reader abort in vnl's assert_finite while it read the header. Now corrupt data naming
// the field.
TEST(FuzzRegressions, NiftiWithNonFiniteOrientationIsCorruptData) {
    TempDir dir;
    const std::string path =
        regression(dir, "fuzz_image_nii", "non-finite-orientation", "scan.nii");
    auto header = readImageHeader(path);
    ASSERT_FALSE(header.isOk());
    EXPECT_EQ(header.status().code(), StatusCode::kCorruptData) << header.status().toString();
    EXPECT_NE(header.status().toString().find("srow"), std::string::npos)
        << header.status().toString();
    EXPECT_FALSE(readImage(path).isOk());
}

}  // namespace
}  // namespace voxseg::io
