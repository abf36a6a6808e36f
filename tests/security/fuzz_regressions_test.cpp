// Inputs the fuzzers of tests/fuzz found crashing (issue 19; docs/fuzzing.md), replayed
// through the product's own entry points in the normal build: each must end in a clear error,
// not an abort. The inputs lie in tests/fuzz/regressions/<fuzz target>/ (scripts/fuzz.sh also
// replays them as seeds on every CI fuzz run); copies named as a user would name them are made
// in a temporary folder.
#include "batch/journal.h"
#include "edit/edit_op.h"
#include "edit/journal.h"
#include "engine/graph/graph.h"
#include "engine/model/model_package.h"
#include "engine/onnx/import.h"
#include "engine/passes/optimize.h"
#include "io/dicom_header.h"
#include "io/dicom_series.h"
#include "io/image_io.h"
#include "io/seg_reader.h"
#include "node/config.h"
#include "tests/test_data.h"

#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>
#include <zlib.h>

#include <filesystem>
#include <fstream>
#include <limits>
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

// fuzz_node_instance (session 14's CI run): an MR instance whose PixelSpacing reads as infinity.
// The volume's geometry had an infinite spacing, ITK's SetSpacing inverted a non-finite matrix
// and vnl aborted the process (the node's receiver, `voxseg convert`, `voxseg segment`). A value
// that is not a finite number now counts as absent (pixel spacing 1 mm, as for a missing tag).
TEST(FuzzRegressions, DicomWithInfinitePixelSpacingLoadsOnAFiniteGrid) {
    TempDir dir;
    const std::string path =
        regression(dir, "fuzz_node_instance", "pixel-spacing-inf", "IM0001.dcm");
    auto scan = scanDicom({path});
    ASSERT_TRUE(scan.isOk()) << scan.status().toString();
    ASSERT_EQ(scan->series.size(), 1u);
    EXPECT_TRUE(scan->series[0].geometry.isFinite());
    auto volume = loadSeries(scan->series[0]);
    ASSERT_TRUE(volume.isOk()) << volume.status().toString();
    EXPECT_DOUBLE_EQ(volume->geometry().spacing[0], 1.0);
    EXPECT_TRUE(volume->geometry().isFinite());
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

// fuzz_seg_reader (campaign of session 11): a BINARY SEG with BitsAllocated 8. dcmseg failed
// to load its frames, said nothing, and counted 3 frames from the functional groups; getFrame(0)
// then read through a null pointer (SEGV in DcmSegmentation::getFrame). The SEG's pixel
// attributes are now checked against what dcmseg loads before any frame is asked for.
TEST(FuzzRegressions, BinarySegWhosePixelsDcmsegDidNotLoadIsCorruptData) {
    TempDir dir;
    const std::string path = regression(dir, "fuzz_seg_reader",
                                        "binary-seg-bits-allocated-8-no-frames-loaded", "seg.dcm");
    auto seg = readDicomSeg(path);
    ASSERT_FALSE(seg.isOk());
    EXPECT_EQ(seg.status().code(), StatusCode::kCorruptData) << seg.status().toString();
    EXPECT_NE(seg.status().toString().find("BitsAllocated 8"), std::string::npos)
        << seg.status().toString();
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
// double to int64 anyway (undefined behaviour; UBSan stopped in engine/graph/graph.cpp). Now the
// node is refused with the scale and the size.
TEST(FuzzRegressions, OnnxResizeWhoseOutputExceedsInt64IsRefused) {
    const std::string bytes =
        regressionBytes("fuzz_onnx_import", "resize-scale-output-beyond-int64");
    auto graph = engine::importOnnxBytes(bytes, {}, "model.onnx");
    ASSERT_FALSE(graph.isOk());
    EXPECT_NE(graph.status().toString().find("gives an output of"), std::string::npos)
        << graph.status().toString();
}

// fuzz_onnx_import (session 15, a 150 s run): a Resize whose 'sizes' initializer has no
// elements made Tensor::toInt64s memcpy from a null pointer (UBSan). Now the model imports or is
// refused, without undefined behaviour, and what imports optimizes.
TEST(FuzzRegressions, OnnxResizeWithEmptySizesImportsWithoutUndefinedBehaviour) {
    const std::string bytes = regressionBytes("fuzz_onnx_import", "resize-with-empty-int64-sizes");
    auto graph = engine::importOnnxBytes(bytes, {}, "model.onnx");
    if (graph.isOk()) {
        const engine::Graph opt = engine::optimize(*graph);
        EXPECT_EQ(opt.outputs.size(), graph->outputs.size());
    } else {
        EXPECT_FALSE(graph.status().message().empty());
    }
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

// fuzz_image_nii (campaign of session 11, a libFuzzer timeout): srow_z[3] = -2.9e38, finite, so
// the check above let it through, and ITK's NIfTI reader ran vnl_svd on the affine for minutes
// (netlib ssvdc on overflowing products). Entries beyond 1e9 mm are now corrupt data too.
TEST(FuzzRegressions, NiftiWithAHugeAffineEntryIsCorruptDataNotAHang) {
    TempDir dir;
    const std::string path =
        regression(dir, "fuzz_image_nii", "huge-srow-hangs-itk-svd", "scan.nii");
    auto header = readImageHeader(path);
    ASSERT_FALSE(header.isOk());
    EXPECT_EQ(header.status().code(), StatusCode::kCorruptData) << header.status().toString();
    EXPECT_NE(header.status().toString().find("beyond 1e+09 mm"), std::string::npos)
        << header.status().toString();
}

// fuzz_onnx_import: a Reshape folded on constants to a target of [-8863084062370168833, 2];
// the target's element count was computed unchecked (tensor.cpp's numel; UBSan: signed
// overflow). Now a negative target dim is refused before anything is multiplied, and products
// are checked (next test). UBSan catches this input in the fuzz build; the normal build replays
// it for the refusal.
TEST(FuzzRegressions, OnnxReshapeFoldToANegativeTargetIsRefused) {
    const std::string bytes =
        regressionBytes("fuzz_onnx_import", "fold-reshape-target-overflows-int64");
    auto graph = engine::importOnnxBytes(bytes, {}, "model.onnx");
    ASSERT_FALSE(graph.isOk());
    EXPECT_NE(graph.status().toString().find("Reshape node '/net/upcat_4/Reshape': cannot "
                                             "reshape [10] to [-8863084062370168833, 2]"),
              std::string::npos)
        << graph.status().toString();
}

// An ONNX model whose node `op` folds the int64 constants `inputs` (one Constant node each;
// input `to_float` as float32 instead, times 1e12); the graph's output is its input, so the
// import succeeds when the folding does.
std::string foldingModel(const std::string& op, const std::vector<std::vector<int64_t>>& inputs,
                         int to_float = -1) {
    onnx::ModelProto model;
    model.set_ir_version(8);
    model.add_opset_import()->set_version(17);
    auto* g = model.mutable_graph();
    auto* x = g->add_input();
    x->set_name("x");
    x->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto_DataType_FLOAT);
    x->mutable_type()->mutable_tensor_type()->mutable_shape()->add_dim()->set_dim_value(1);
    for (size_t i = 0; i < inputs.size(); ++i) {
        auto* c = g->add_node();
        c->set_op_type("Constant");
        c->add_output("c" + std::to_string(i));
        auto* a = c->add_attribute();
        a->set_name("value");
        a->set_type(onnx::AttributeProto_AttributeType_TENSOR);
        auto* t = a->mutable_t();
        if (inputs[i].size() != 1) t->add_dims(static_cast<int64_t>(inputs[i].size()));
        const bool f = static_cast<int>(i) == to_float;
        t->set_data_type(f ? onnx::TensorProto_DataType_FLOAT : onnx::TensorProto_DataType_INT64);
        for (int64_t v : inputs[i])
            f ? t->add_float_data(static_cast<float>(v) * 1e12f) : t->add_int64_data(v);
    }
    auto* fold = g->add_node();
    fold->set_op_type(op);
    fold->set_name("fold");
    for (size_t i = 0; i < inputs.size(); ++i) fold->add_input("c" + std::to_string(i));
    fold->add_output("folded");
    if (op == "Cast") {
        auto* a = fold->add_attribute();
        a->set_name("to");
        a->set_type(onnx::AttributeProto_AttributeType_INT);
        a->set_i(onnx::TensorProto_DataType_INT64);
    }
    auto* id = g->add_node();
    id->set_op_type("Identity");
    id->add_input("x");
    id->add_output("y");
    g->add_output()->set_name("y");
    return model.SerializeAsString();
}

// Found while auditing the importer for the finding above: every int64 operation of constant
// folding on the file's values (Add, Sub, Mul, Div, Neg, Abs, ReduceProd/Sum, Range, Cast of a
// float, Reshape's target) was computed unchecked. Each overflow is now refused naming the node and
// the values; the same ops without overflow still fold.
TEST(FuzzRegressions, OnnxInt64FoldingOverflowIsRefusedNamingNodeOpAndValues) {
    constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
    constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
    struct Case {
        std::string op;
        std::vector<std::vector<int64_t>> in;
        std::string message;
        int to_float = -1;
    };
    const std::vector<Case> cases = {
        {"Mul",
         {{int64_t{1} << 62}, {4}},
         "Mul node 'fold' overflows int64 folding "
         "4611686018427387904 * 4"},
        {"Add", {{kMax}, {1}}, "overflows int64 folding 9223372036854775807 + 1"},
        {"Sub", {{kMin}, {1}}, "overflows int64 folding -9223372036854775808 - 1"},
        {"Div", {{kMin}, {-1}}, "overflows int64 folding -9223372036854775808 / -1"},
        {"Neg", {{kMin}}, "overflows int64 folding Neg(-9223372036854775808)"},
        {"Abs", {{kMin}}, "overflows int64 folding Abs(-9223372036854775808)"},
        {"ReduceProd", {{int64_t{1} << 40, int64_t{1} << 40}}, "overflows int64 folding"},
        {"ReduceSum", {{kMax, kMax}}, "overflows int64 folding"},
        {"Range", {{kMin}, {kMax}, {1}}, "range too long to fold"},
        {"Cast", {{int64_t{1} << 40}}, "overflows int64 folding Cast of", 0},
        // 7 * 5270498306774157606 wraps to exactly the 10 elements of the data: before the
        // fix the fold made a [7, 5.3e18] tensor of 10 values.
        {"Reshape",
         {{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, {7, 5270498306774157606}},
         "Reshape node 'fold' overflows int64 folding 7 * 5270498306774157606"},
    };
    for (const Case& c : cases) {
        auto graph =
            engine::importOnnxBytes(foldingModel(c.op, c.in, c.to_float), {}, "model.onnx");
        ASSERT_FALSE(graph.isOk()) << c.op;
        EXPECT_NE(graph.status().toString().find(c.message), std::string::npos)
            << c.op << ": " << graph.status().toString();
        EXPECT_EQ(graph.status().toString().rfind("model.onnx: ", 0), 0u)
            << graph.status().toString();
    }
    for (const Case& fine : std::vector<Case>{{"Mul", {{int64_t{1} << 40}, {4}}, ""},
                                              {"Range", {{kMax - 3}, {kMax}, {2}}, ""},
                                              {"Neg", {{kMax}}, ""}}) {
        auto graph = engine::importOnnxBytes(foldingModel(fine.op, fine.in), {}, "model.onnx");
        EXPECT_TRUE(graph.isOk()) << fine.op << ": " << graph.status().toString();
    }
}

// fuzz_image_mha: a MetaImage header line whose key is 270 characters long. ITK 5.2's MetaIO
// copies an unknown key into its 255-byte field name (MET_InitReadField, strcpy): glibc's
// fortify check aborted the process ("voxseg convert scan.mha" died with SIGABRT). voxseg's own
// header check (io/metaimage_header.cpp) now refuses it before MetaIO reads the file.
TEST(FuzzRegressions, MetaImageKeyLongerThanMetaIoBuffersIsRefused) {
    TempDir dir;
    const std::string path =
        regression(dir, "fuzz_image_mha", "metaio-key-overflows-field-name", "scan.mha");
    auto header = readImageHeader(path);
    ASSERT_FALSE(header.isOk());
    EXPECT_EQ(header.status().code(), StatusCode::kUnsupported) << header.status().toString();
    EXPECT_NE(header.status().toString().find("scan.mha"), std::string::npos);
    EXPECT_NE(header.status().toString().find("line 1 has a key of"), std::string::npos)
        << header.status().toString();
    EXPECT_FALSE(readImage(path).isOk());
}

// Header forms that reach MetaIO's other fixed buffers or unchecked arithmetic (NDims sizes
// 10-entry arrays and a 4-entry SequenceID, DimSize is an int, the product is int64), that make
// ITK read something else than the header says (duplicates, missing values), or whose data is
// shorter than claimed: each refused naming what is wrong; the header a writer makes is read.
TEST(FuzzRegressions, MetaImageHeaderIsCheckedBeforeItkReadsIt) {
    TempDir dir;
    const std::string good = dir / "good.mha";
    Geometry geometry;
    geometry.size = {4, 3, 2};
    ASSERT_TRUE(writeImage(Volume::allocate<int16_t>(geometry), good).isOk());
    std::string header;
    {
        std::ifstream in(good, std::ios::binary);
        std::stringstream ss;
        ss << in.rdbuf();
        header = ss.str().substr(0, ss.str().find("ElementDataFile"));
    }
    ASSERT_NE(header.find("NDims = 3"), std::string::npos) << header;
    ASSERT_TRUE(readImage(good).isOk());
    auto replaced = [&](const std::string& from, const std::string& to) {
        std::string h = header;
        const size_t at = h.find(from);
        EXPECT_NE(at, std::string::npos) << from;
        return at == std::string::npos ? h : h.replace(at, from.size(), to);
    };
    const std::string data(4 * 3 * 2 * 2, '\0');
    const std::string local = "ElementDataFile = LOCAL\n";
    struct Case {
        std::string name, text, message;
    };
    const std::vector<Case> cases = {
        {"ndims.mha", replaced("NDims = 3", "NDims = 11") + local + data, "NDims = 11"},
        {"ndims-neg.mha", replaced("NDims = 3", "NDims = -1") + local + data, "NDims = -1"},
        {"dims.mha", replaced("DimSize = 4 3 2", "DimSize = 4 3 4294967297") + local + data,
         "DimSize has '4294967297'"},
        {"dims-few.mha", replaced("DimSize = 4 3 2", "DimSize = 4 3") + local + data,
         "DimSize holds 2 sizes"},
        {"twice.mha", replaced("DimSize", "NDims = 4\nDimSize") + local + data, "repeats NDims"},
        {"nan.mha", replaced("ElementSpacing = 1 1 1", "ElementSpacing = 1 nan 1") + local + data,
         "ElementSpacing has 'nan'"},
        {"comment.mha", "Comment = " + std::string(300, 'c') + "\n" + header + local + data,
         "Comment has a value of 300 characters"},
        {"short.mha", header + local + data.substr(0, 7), "file is truncated"},
        {"vector.mha", replaced("MET_SHORT", "MET_SHORT_ARRAY") + local + data,
         "not a scalar type"},
        {"escape.mhd", header + "ElementDataFile = ../outside.raw\n", "outside the header's"},
        {"list.mhd", header + "ElementDataFile = LIST\n", "several files"},
        {"nodata.mha", header, "ElementDataFile"},
    };
    for (const Case& c : cases) {
        const std::string path = dir / c.name;
        std::ofstream(path, std::ios::binary) << c.text;
        auto h = readImageHeader(path);
        ASSERT_FALSE(h.isOk()) << c.name;
        EXPECT_NE(h.status().toString().find(c.message), std::string::npos)
            << c.name << ": " << h.status().toString();
        EXPECT_NE(h.status().toString().find(c.name), std::string::npos);
    }
    // Compressed data that does not inflate (ITK's MetaIO prints "Uncompress failed").
    const std::string bad_zlib = dir / "bad-zlib.mha";
    std::ofstream(bad_zlib, std::ios::binary)
        << replaced("CompressedData = False", "CompressedData = True\nCompressedDataSize = 10")
        << local << std::string(10, 'z');
    auto bad = readImage(bad_zlib);
    ASSERT_FALSE(bad.isOk());
    EXPECT_NE(bad.status().toString().find("compressed data is damaged"), std::string::npos)
        << bad.status().toString();
    // Intact but short: the zlib stream of half the voxels.
    std::string half;
    {
        uLongf n = compressBound(data.size() / 2);
        half.resize(n);
        ASSERT_EQ(compress(reinterpret_cast<Bytef*>(half.data()), &n,
                           reinterpret_cast<const Bytef*>(data.data()), data.size() / 2),
                  Z_OK);
        half.resize(n);
    }
    const std::string short_zlib = dir / "short-zlib.mha";
    std::ofstream(short_zlib, std::ios::binary)
        << replaced("CompressedData = False", "CompressedData = True") << local << half;
    auto shorter = readImage(short_zlib);
    ASSERT_FALSE(shorter.isOk());
    EXPECT_NE(shorter.status().toString().find("inflates to 24 of the 48 bytes"), std::string::npos)
        << shorter.status().toString();
    const std::string mhd = dir / "split.mhd";
    std::ofstream(mhd, std::ios::binary) << header << "ElementDataFile = split.raw\n";
    std::ofstream(dir / "split.raw", std::ios::binary) << data;
    EXPECT_TRUE(readImage(mhd).isOk()) << readImage(mhd).status().toString();
}

// ASCII voxel data (BinaryData = False) in a file whose NDims is not 3: ITK 5.2 reads it through
// MetaImage::ReadROI, which wrote element-size times past ITK's buffer (valgrind: invalid write
// of size 2 in MET_DoubleToValue; under ASan, whose MetaIO is uninstrumented, a quarantine CHECK
// many inputs later). Refused before MetaIO reads it, for 1, 2 and 4 dimensions; ASCII data in a
// 3-D file (MetaImage::Read, which counts voxels) is still read, value for value.
TEST(FuzzRegressions, AsciiMetaImageThatIsNot3dIsRefusedBeforeMetaIoOverflows) {
    TempDir dir;
    const std::string two_d =
        regression(dir, "fuzz_image_mha", "ascii-2d-short-overflows-metaio-readroi", "flat.mha");
    auto header = readImageHeader(two_d);
    ASSERT_FALSE(header.isOk());
    EXPECT_EQ(header.status().code(), StatusCode::kUnsupported) << header.status().toString();
    for (const char* part : {"flat.mha", "BinaryData = False, line 5", "NDims = 2", "binary data"})
        EXPECT_NE(header.status().toString().find(part), std::string::npos)
            << part << ": " << header.status().toString();
    EXPECT_FALSE(readImage(two_d).isOk());
    std::string values;
    for (int i = 1; i <= 16; ++i) values += std::to_string(i) + " ";
    auto ascii = [&](const std::string& name, int ndims, const std::string& sizes) {
        const std::string path = dir / name;
        std::ofstream(path, std::ios::binary)
            << "ObjectType = Image\nNDims = " << ndims << "\nDimSize = " << sizes
            << "\nElementType = MET_SHORT\nBinaryData = False\nElementDataFile = LOCAL\n"
            << values << "\n";
        return path;
    };
    EXPECT_FALSE(readImageHeader(ascii("line.mha", 1, "16")).isOk());
    EXPECT_FALSE(readImageHeader(ascii("four.mha", 4, "4 2 2 1")).isOk());
    auto cube = readImage(ascii("cube.mha", 3, "4 2 2"));
    ASSERT_TRUE(cube.isOk()) << cube.status().toString();
    ASSERT_EQ(cube->geometry().voxelCount(), 16);
    ASSERT_EQ(cube->pixelType(), PixelType::kInt16);
    for (int i = 0; i < 16; ++i) EXPECT_EQ(cube->data<int16_t>()[i], i + 1) << i;
}

// A node.json whose min_free_mb is 5.1e86 (fuzz_node_config, campaign of session 12): the
// reader converted min_free_mb x 2^20 (5.4e92) to a uint64_t byte count (UBSan: outside the range
// of representable values). Every number of node.json now has a range, named in the refusal.
TEST(FuzzRegressions, NodeConfigNumberPastItsRangeIsRefusedNotConverted) {
    const std::string text =
        regressionBytes("fuzz_node_config", "min-free-mb-5e92-overflows-uint64");
    ASSERT_NE(text.find("\"min_free_mb\": 5126666"), std::string::npos);
    auto config = voxseg::node::parseNodeConfig(text, "node.json", "/etc/voxseg");
    ASSERT_FALSE(config.isOk());
    for (const char* part : {"min_free_mb: 5.1266", "e+86 is outside 0..1099511627776"})
        EXPECT_NE(config.status().toString().find(part), std::string::npos)
            << part << ": " << config.status().toString();
    EXPECT_NE(config.status().toString().find("node.json"), std::string::npos);
}

// A node.json route whose series_description pattern is 2,604 characters with a back reference
// of 48 digits (fuzz_node_config, campaign of session 12): libstdc++'s regex compiler read the
// number into a long unchecked (UBSan: signed integer overflow in _M_cur_int_value), recursing
// once per term of the pattern.
// Patterns are now at most 256 characters without a number of more than 9 digits.
TEST(FuzzRegressions, NodeConfigRegexThatOverflowsLibstdcxxIsRefused) {
    const std::string text =
        regressionBytes("fuzz_node_config", "regex-long-backreference-overflows-long");
    auto config = voxseg::node::parseNodeConfig(text, "node.json", "/etc/voxseg");
    ASSERT_FALSE(config.isOk());
    EXPECT_NE(config.status().toString().find("routes[0].match.series_description: a pattern of"),
              std::string::npos)
        << config.status().toString();
}

// A compressed .mha whose zlib header sets FDICT (found by the 20 s CI run of fuzz_image_mha in
// session 12's final test): inflate answers Z_NEED_DICT, ITK 5.2's MET_PerformUncompression
// called it again forever and `voxseg convert` hung. Refused by the header check, before ITK
// (the inflate check runs beside ITK's read and could not stop it).
TEST(FuzzRegressions, MetaImageZlibStreamWithAPresetDictionaryIsRefusedNotAHang) {
    TempDir dir;
    const std::string path =
        regression(dir, "fuzz_image_mha", "zlib-preset-dictionary-hangs-metaio", "dict.mha");
    for (const Status& s : {readImageHeader(path).status(), readImage(path).status()}) {
        EXPECT_EQ(s.code(), StatusCode::kCorruptData) << s.toString();
        EXPECT_NE(s.toString().find("needs a preset dictionary"), std::string::npos)
            << s.toString();
        EXPECT_NE(s.toString().find("dict.mha"), std::string::npos);
    }
}

// A compressed 2-D .mha whose stream inflates to 48 of the 136 bytes DimSize claims (the 20 s CI
// run of fuzz_image_mha, 2026-12-07): ITK 5.2 reads a MetaImage that is not 3-D through
// MetaImage::ReadROI, whose MET_UncompressStream looped forever on the short stream, and
// `voxseg convert` hung. Such files are now inflated and checked before ITK reads them; a whole
// 2-D one still reads.
TEST(FuzzRegressions, ShortCompressed2dMetaImageIsRefusedNotAHang) {
    TempDir dir;
    const std::string path =
        regression(dir, "fuzz_image_mha", "zlib-short-2d-hangs-metaio-readroi", "short.mha");
    const Status s = readImage(path).status();
    EXPECT_EQ(s.code(), StatusCode::kCorruptData) << s.toString();
    for (const char* part : {"short.mha", "inflates to 48 of the 136 bytes"})
        EXPECT_NE(s.toString().find(part), std::string::npos) << part << " in " << s.toString();

    // The same header over a whole stream: 34 x 2 int16 values read as a 34 x 2 x 1 volume.
    std::vector<int16_t> values(68);
    for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<int16_t>(i * 37 - 900);
    std::vector<unsigned char> packed(compressBound(values.size() * sizeof(int16_t)));
    uLongf packed_size = packed.size();
    ASSERT_EQ(compress(packed.data(), &packed_size, reinterpret_cast<const Bytef*>(values.data()),
                       values.size() * sizeof(int16_t)),
              Z_OK);
    const std::string whole = dir / "whole.mha";
    std::ofstream(whole, std::ios::binary)
        << "ObjectType = Image\nNDims = 2\nBinaryData = True\nBinaryDataByteOrderMSB = False\n"
        << "CompressedData = True\nCompressedDataSize = " << packed_size
        << "\nElementSpacing = 0.8 0.8\nDimSize = 34 2\nElementType = MET_SHORT\n"
        << "ElementDataFile = LOCAL\n"
        << std::string(reinterpret_cast<const char*>(packed.data()), packed_size);
    auto volume = readImage(whole);
    ASSERT_TRUE(volume.isOk()) << volume.status().toString();
    EXPECT_EQ(volume->geometry().size, (std::array<int64_t, 3>{34, 2, 1}));
    ASSERT_EQ(volume->pixelType(), PixelType::kInt16);
    for (size_t i = 0; i < values.size(); ++i)
        ASSERT_EQ(volume->data<int16_t>()[i], values[i]) << i;
}

// A 157 KB ONNX file whose folded constants (Casts and Expands of constants, each within the
// per-tensor limit) made the importer hold more than 2 GB (fuzz_onnx_import, campaign of session
// 12: out of memory at libFuzzer's 2 GB, 44 s). Refused at the folding limit, here 512 MiB (the
// default, 4 GiB, would have this test hold 4 GiB before the refusal).
TEST(FuzzRegressions, OnnxWhoseFoldedConstantsPassTheLimitIsRefused) {
    const std::string bytes = regressionBytes("fuzz_onnx_import", "folded-constants-past-2-gb");
    ASSERT_GT(bytes.size(), 100000u);
    engine::OnnxImportOptions options;
    options.max_folded_bytes = uint64_t{512} << 20;
    auto g = engine::importOnnxBytes(bytes, options, "bomb.onnx");
    ASSERT_FALSE(g.isOk());
    EXPECT_NE(g.status().toString().find("MiB of computed constants (at most 512 MiB)"),
              std::string::npos)
        << g.status().toString();
}

// A DICOMDIR whose Referenced File IDs leave its folder ("..\SECRET\IM1",
// "IMAGES\..\..\IM3", "/ETC/PASSWD", which std::filesystem would take as absolute): those
// records are skipped with a warning naming them; the record inside the folder is listed.
TEST(FuzzRegressions, DicomdirReferencesOutsideItsFolderAreSkipped) {
    TempDir dir;
    const std::string path =
        regression(dir, "fuzz_dicomdir", "referenced-file-ids-leave-the-folder", "DICOMDIR");
    auto files = readDicomdir(path);
    ASSERT_TRUE(files.isOk()) << files.status().toString();
    ASSERT_EQ(files->size(), 1u);
    EXPECT_EQ(fs::path(files->front()), fs::path(dir / "IMAGES") / "IM2");
}

// A batch journal whose line holds a number where a string belongs ("input": 1.25): the line is
// skipped as corrupt (readJournalFile counts it) instead of nlohmann's type_error ending the
// batch runner (found by fuzz_batch_journal's CI run). The fuzzer's file also has lines that are
// not JSON in the middle: refused with the line's number (core/journal.h's torn-line policy).
TEST(FuzzRegressions, JournalLineWithAFieldOfTheWrongTypeIsSkipped) {
    TempDir dir;
    const std::string path =
        regression(dir, "fuzz_batch_journal", "wrong_field_type.jsonl", "journal.jsonl");
    int skipped = 0;
    auto entries = batch::readJournalFile(path, &skipped);
    ASSERT_FALSE(entries.isOk());
    EXPECT_EQ(entries.status().code(), StatusCode::kCorruptData);
    EXPECT_NE(entries.status().message().find("line 1"), std::string::npos)
        << entries.status().toString();
    const std::string typed = dir / "typed.jsonl";
    std::ofstream(typed) << R"({"case_id": "a", "state": "done", "input": 1.25})"
                         << "\n"
                         << R"({"case_id": "b", "state": "done", "input": "b.nii.gz"})"
                         << "\n";
    auto two = batch::readJournalFile(typed, &skipped);
    ASSERT_TRUE(two.isOk()) << two.status().toString();
    EXPECT_EQ(skipped, 1);
    ASSERT_EQ(two->size(), 1u);
    EXPECT_EQ(two->front().case_id, "b");
}

// An edit journal whose paint sphere is centred 4.4e25 mm away (fuzz_edit_journal's 20 s CI run,
// stop 58): the brush turned the centre into an index box and converted 4.4e25 to int64 (UBSan:
// outside the range of representable values). Positions and lengths beyond 1 km are now refused
// when the line is read, naming the file, the line and the key; ops built in code clip their box
// before it becomes an integer (core/geometry.h voxelSpan; Brush.FarCentresAndHugeRadiiStay...).
TEST(FuzzRegressions, EditJournalPositionBeyondOneKilometreIsRefused) {
    TempDir dir;
    const std::string path =
        regression(dir, "fuzz_edit_journal", "paint-centre-4e25-mm-overflows-index", "edits.jsonl");
    auto lines = edit::readJournal(path);
    ASSERT_FALSE(lines.isOk());
    const std::string message = lines.status().toString();
    for (const char* part : {"edits.jsonl", "line 1", "\"center_mm\"", "not a patient position"})
        EXPECT_NE(message.find(part), std::string::npos) << part << " in " << message;
}

// A journal line whose file size is 3.3e77 (fuzz_batch_journal, campaign of session 12): nlohmann
// parsed it as a double and `value("bytes", uint64_t{0})` cast it to uint64_t (UBSan: outside the
// range of representable values). Sizes are now integers that fit or the line is corrupt; so are
// the node's series records (frames_per_instance, instances) and an edit session's version.
TEST(FuzzRegressions, JournalFileSizeThatIsNotAnIntegerIsACorruptLine) {
    TempDir dir;
    const std::string path =
        regression(dir, "fuzz_batch_journal", "file-bytes-3e77-cast-to-uint64", "journal.jsonl");
    int skipped = 0;
    auto entries = batch::readJournalFile(path, &skipped);
    ASSERT_TRUE(entries.isOk()) << entries.status().toString();
    EXPECT_EQ(skipped, 2);  // the line with the size, and a second line that is not JSON
    EXPECT_TRUE(entries->empty());
    const std::string sizes = dir / "sizes.jsonl";
    std::ofstream(sizes)
        << R"({"case_id": "a", "state": "done", "files": [{"name": "x", "bytes": -1}]})"
        << "\n"
        << R"({"case_id": "b", "state": "done", "files": [{"name": "x", "bytes": 2.5}]})"
        << "\n"
        << R"({"case_id": "c", "state": "done", "files": [{"name": "x", "bytes": 812}]})"
        << "\n";
    auto one = batch::readJournalFile(sizes, &skipped);
    ASSERT_TRUE(one.isOk()) << one.status().toString();
    EXPECT_EQ(skipped, 2);
    ASSERT_EQ(one->size(), 1u);
    EXPECT_EQ(one->front().case_id, "c");
    ASSERT_EQ(one->front().files.size(), 1u);
    EXPECT_EQ(one->front().files[0].bytes, 812u);
}

// An ASCII NRRD whose first value is 1,100 characters long (found while fixing the
// fuzz_image_nrrd out-of-memory below): ITK 5.2's NrrdIO scans each value with fscanf("%s")
// into a 1025-byte stack buffer; `voxseg convert` died of glibc's stack-smashing abort. Refused
// by voxseg's NRRD data check before NrrdIO reads it; the header alone is still read.
TEST(FuzzRegressions, AsciiNrrdValueLongerThanNrrdIoBufferIsRefusedNotACrash) {
    TempDir dir;
    const std::string path = regression(
        dir, "fuzz_image_nrrd", "ascii-value-of-1100-characters-smashes-nrrdio-stack", "a.nrrd");
    ASSERT_TRUE(readImageHeader(path).isOk());
    auto volume = readImage(path);
    ASSERT_FALSE(volume.isOk());
    EXPECT_EQ(volume.status().code(), StatusCode::kCorruptData);
    EXPECT_NE(volume.status().toString().find("NRRD ASCII value 1 is longer than 1024 characters"),
              std::string::npos)
        << volume.status().toString();
}

// fuzz_image_nrrd ran out of memory (libFuzzer's 2 GB, 240,205 executions, session 12): each
// damaged gzip NRRD made NrrdIO fail and leak its Nrrd, gzip state and error strings (30-60 KB,
// seen with LeakSanitizer). The data is now checked before NrrdIO reads it: refused as
// truncated, naming what the stream holds; LeakSanitizer no longer needs a NrrdIO suppression.
// Since issue 35 the refusal comes before the image is allocated: 155 compressed bytes cannot
// hold the 1.5 MB the header claims (deflate's 1032:1).
TEST(FuzzRegressions, DamagedGzipNrrdIsRefusedBeforeNrrdIoLeaks) {
    TempDir dir;
    const std::string path =
        regression(dir, "fuzz_image_nrrd", "damaged-gzip-data-leaks-nrrdio", "ct.nrrd");
    auto volume = readImage(path);
    ASSERT_FALSE(volume.isOk());
    EXPECT_EQ(volume.status().code(), StatusCode::kCorruptData);
    EXPECT_NE(volume.status().toString().find("claims 1572864 bytes of voxel data, but the "
                                              "NRRD's gzip data holds 155 compressed bytes"),
              std::string::npos)
        << volume.status().toString();
    EXPECT_NE(volume.status().toString().find("ct.nrrd"), std::string::npos);
}

// A gzip NRRD whose encoding line is "encoDing: gzip" followed by a NUL and the rest of the next
// field (fuzz_image_nrrd, session 13's campaign, after 23,547 executions): voxseg's data check
// read the whole line as the encoding, did not know it and left the data to NrrdIO, which parses
// C strings (the line ends at the NUL: gzip), failed on the damaged stream and leaked. Lines are
// now split and cut as NrrdIO's airOneLine does ("\n", "\r\n", "\r"; a NUL ends the line) and an
// encoding voxseg does not know is refused; voxseg reads this stream itself and refuses it
// (since issue 35 before allocating: 55 compressed bytes cannot hold the header's claim).
TEST(FuzzRegressions, NrrdLineWithANulIsReadAsNrrdIoReadsIt) {
    TempDir dir;
    const std::string path =
        regression(dir, "fuzz_image_nrrd", "nul-in-encoding-line-leaks-nrrdio", "nul.nrrd");
    auto volume = readImage(path);
    ASSERT_FALSE(volume.isOk());
    EXPECT_EQ(volume.status().code(), StatusCode::kCorruptData);
    EXPECT_NE(volume.status().toString().find("the NRRD's gzip data holds 55 compressed bytes"),
              std::string::npos)
        << volume.status().toString();
}

// A NRRD header line "space di\xf8rections: (0.6999...", 992 characters (fuzz_image_nrrd,
// session 13's campaign, after 155,478 executions): ITK 5.2's NrrdIO formats a field line it
// cannot parse into a buffer of about 1 KB; glibc's fortify check aborted `voxseg info` ("buffer
// overflow detected"). Field lines are limited to 512 characters before ITK reads the header.
TEST(FuzzRegressions, NrrdFieldLineLongerThanNrrdIoErrorBufferIsRefused) {
    TempDir dir;
    const std::string path = regression(
        dir, "fuzz_image_nrrd", "long-field-line-overflows-nrrdio-error-buffer", "long.nrrd");
    auto header = readImageHeader(path);
    ASSERT_FALSE(header.isOk());
    EXPECT_EQ(header.status().code(), StatusCode::kCorruptData);
    EXPECT_NE(header.status().toString().find("characters long (at most 512 for a field"),
              std::string::npos)
        << header.status().toString();
}

// The same overflow found by the 20 s CI run of fuzz_image_nrrd in session 13's final test: a
// 1,163-byte field line with a NUL at byte 412. voxseg measured the line as a C string (412
// characters, under the limit); NrrdIO copies the whole line. The limit now counts every byte.
TEST(FuzzRegressions, NrrdFieldLineWithANulIsMeasuredWhole) {
    TempDir dir;
    const std::string path = regression(dir, "fuzz_image_nrrd",
                                        "long-field-line-with-a-nul-overflows-nrrdio", "nul.nrrd");
    auto header = readImageHeader(path);
    ASSERT_FALSE(header.isOk());
    EXPECT_NE(header.status().toString().find("line 6 is 1163 characters long"), std::string::npos)
        << header.status().toString();
}

}  // namespace
}  // namespace voxseg::io
