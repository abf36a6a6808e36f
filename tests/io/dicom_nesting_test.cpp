// Sequence nesting limit (issue 35 item 2): io/dicom_nesting walks files DCMTK would recurse
// into and refuses those nested deeper than --max-nesting-depth, before DCMTK parses them, in
// every reader (header scan, pixels, DICOMDIR, SEG, RTSTRUCT). Before the check, a 212 KB file
// nested 5,600 deep overflowed DCMTK's stack (SIGSEGV) in a scan thread, 6,000 and more on the
// main thread too (see NestingCli in tests/app for the binary).
#include "io/dicom_nesting.h"
#include "io/dcmtk_log.h"
#include "io/dicom_header.h"
#include "io/dicom_pixels.h"
#include "io/dicom_series.h"
#include "io/dicom_synth.h"
#include "io/rtstruct_reader.h"
#include "io/seg_reader.h"
#include "tests/io/deep_dicom.h"
#include "tests/test_data.h"

#include <dcmtk/config/osconfig.h>
#include <dcmtk/dcmdata/dcfilefo.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <random>
#include <string>
#include <vector>

namespace voxseg::io {
namespace {

namespace fs = std::filesystem;
using testing::DeepDicomSpec;
using testing::DeepSyntax;

struct Variant {
    const char* name;
    DeepSyntax syntax;
    bool undefined;
    bool after_pixel_data = false;
    bool public_tag = false;
    bool un_vr = false;
    bool meta = true;
};

// Every encoding the walk follows; each is one DCMTK recurses into (checked at the limit below).
const std::vector<Variant>& variants() {
    static const std::vector<Variant> v = {
        {"explicit LE, undefined lengths", DeepSyntax::kExplicitLittle, true},
        {"explicit LE, defined lengths", DeepSyntax::kExplicitLittle, false},
        {"implicit LE, undefined lengths", DeepSyntax::kImplicitLittle, true},
        {"implicit LE, defined lengths (public sequence)", DeepSyntax::kImplicitLittle, false,
         false, true},
        {"explicit BE, undefined lengths", DeepSyntax::kExplicitBig, true},
        {"explicit BE, defined lengths", DeepSyntax::kExplicitBig, false},
        {"deflated explicit LE", DeepSyntax::kDeflated, true},
        {"explicit LE, UN of undefined length (CP-246)", DeepSyntax::kExplicitLittle, true, false,
         false, true},
        {"explicit LE, after the pixel data", DeepSyntax::kExplicitLittle, true, true},
        {"implicit LE, after the pixel data", DeepSyntax::kImplicitLittle, true, true},
        {"implicit LE without meta", DeepSyntax::kImplicitLittle, true, false, false, false, false},
        {"explicit LE without meta, defined lengths", DeepSyntax::kExplicitLittle, false, false,
         false, false, false},
    };
    return v;
}

DeepDicomSpec spec(const Variant& v, int depth) {
    DeepDicomSpec s;
    s.syntax = v.syntax;
    s.depth = depth;
    s.undefined_lengths = v.undefined;
    s.after_pixel_data = v.after_pixel_data;
    s.public_tag = v.public_tag;
    s.un_vr = v.un_vr;
    s.meta = v.meta;
    return s;
}

bool contains(const std::string& s, const std::string& part) {
    return s.find(part) != std::string::npos;
}

TEST(DicomNesting, DeepFilesAreRefusedNamingTheFileTheDepthAndTheOption) {
    testing::TempDir dir;
    for (const Variant& v : variants())
        for (const int depth : {5600, 10000}) {
            const std::string path = testing::writeDeepDicom(
                dir.path() / ("deep" + std::to_string(depth)), spec(v, depth));
            const Status s = checkDicomNesting(path);
            EXPECT_EQ(s.code(), StatusCode::kUnsupported) << v.name << " " << depth;
            EXPECT_EQ(s.subject(), path) << v.name;
            EXPECT_TRUE(contains(s.message(), std::to_string(depth) + " levels deep"))
                << v.name << ": " << s.message();
            EXPECT_TRUE(contains(s.message(), "limit 128")) << s.message();
            EXPECT_TRUE(contains(s.message(), "--max-nesting-depth")) << s.message();
            // The same bytes from memory.
            const std::vector<uint8_t> bytes = testing::deepDicom(spec(v, depth));
            EXPECT_EQ(checkDicomNestingBytes(bytes.data(), bytes.size(), "mem").code(),
                      StatusCode::kUnsupported)
                << v.name;
        }
}

// At the limit DCMTK reads the file (it is valid DICOM) and the check lets it through; one level
// more is refused. This also shows that each variant is one DCMTK does nest: it finds the leaf
// at the bottom.
TEST(DicomNesting, AtTheLimitDcmtkReadsTheFileAndOneLevelMoreIsRefused) {
    configureDcmtkLogging(false);  // DCMTK warns about UN of undefined length (CP-246)
    testing::TempDir dir;
    for (const Variant& v : variants()) {
        const std::string at = testing::writeDeepDicom(dir.path() / "at.dcm", spec(v, 128));
        EXPECT_TRUE(checkDicomNesting(at).isOk())
            << v.name << ": " << checkDicomNesting(at).toString();
        DcmFileFormat file;
        ASSERT_TRUE(file.loadFile(at.c_str()).good()) << v.name;
        DcmStack stack;
        int levels = 0;
        while (file.getDataset()->nextObject(stack, OFTrue).good()) {
            int sequences = 0;
            for (unsigned long i = 0; i < stack.card(); ++i)
                if (stack.elem(i)->ident() == EVR_SQ) ++sequences;
            levels = std::max(levels, sequences);
        }
        EXPECT_GE(levels, 128) << v.name << ": DCMTK does not nest this encoding";
        const std::string over = testing::writeDeepDicom(dir.path() / "over.dcm", spec(v, 129));
        const Status s = checkDicomNesting(over);
        EXPECT_EQ(s.code(), StatusCode::kUnsupported) << v.name;
        EXPECT_TRUE(contains(s.message(), "129 levels deep")) << v.name << ": " << s.message();
    }
}

TEST(DicomNesting, TheLimitInForceAppliesAndOptionsOverrideIt) {
    testing::TempDir dir;
    const std::string six = testing::writeDeepDicom(dir.path() / "six.dcm", spec(variants()[0], 6));
    EXPECT_TRUE(checkDicomNesting(six).isOk());
    ReadLimits limits = readLimits();
    const ReadLimits saved = limits;
    limits.nesting_depth = 5;
    setReadLimits(limits);
    const Status s = checkDicomNesting(six);
    setReadLimits(saved);
    EXPECT_EQ(s.code(), StatusCode::kUnsupported);
    EXPECT_TRUE(contains(s.message(), "6 levels deep (limit 5")) << s.message();
    NestingCheckOptions options;
    options.limit = 6;
    EXPECT_TRUE(checkDicomNesting(six, options).isOk());
}

// For callers that parse only up to the pixel data; the default walks past it (by seeking).
TEST(DicomNesting, StopAtPixelDataIgnoresWhatFollowsIt) {
    testing::TempDir dir;
    const std::string after =
        testing::writeDeepDicom(dir.path() / "after.dcm", spec(variants()[8], 5600));
    NestingCheckOptions stop;
    stop.stop_at_pixel_data = true;
    EXPECT_TRUE(checkDicomNesting(after, stop).isOk());
    EXPECT_FALSE(checkDicomNesting(after).isOk());
}

// A data set as received over the network: no preamble, no meta, syntax given by the caller.
TEST(DicomNesting, DatasetWithoutMetaInAGivenTransferSyntax) {
    for (const auto& [syntax, uid] : std::vector<std::pair<DeepSyntax, std::string>>{
             {DeepSyntax::kImplicitLittle, "1.2.840.10008.1.2"},
             {DeepSyntax::kExplicitLittle, "1.2.840.10008.1.2.1"},
             {DeepSyntax::kExplicitBig, "1.2.840.10008.1.2.2"},
             {DeepSyntax::kExplicitLittle, "1.2.840.10008.1.2.4.50"}}) {
        DeepDicomSpec s;
        s.syntax = syntax;
        s.meta = false;
        s.depth = 5600;
        std::vector<uint8_t> bytes = testing::deepDicom(s);
        EXPECT_EQ(checkDicomDatasetNesting(bytes.data(), bytes.size(), uid, "net").code(),
                  StatusCode::kUnsupported)
            << uid;
        s.depth = 20;
        bytes = testing::deepDicom(s);
        EXPECT_TRUE(checkDicomDatasetNesting(bytes.data(), bytes.size(), uid, "net").isOk()) << uid;
    }
}

// Truncated and damaged input: never a read out of bounds (the sanitizer build runs this), and
// never a wrong refusal of a file whose nesting is under the limit.
TEST(DicomNesting, TruncatedAndDamagedInputIsWalkedSafely) {
    for (const Variant& v : variants()) {
        const std::vector<uint8_t> bytes = testing::deepDicom(spec(v, 40));
        for (size_t n = 0; n <= bytes.size(); n += (n < 400 ? 1 : 7))
            EXPECT_TRUE(checkDicomNestingBytes(bytes.data(), n, "cut").isOk())
                << v.name << " " << n;
        std::mt19937 rng(7);
        for (int round = 0; round < 300; ++round) {
            std::vector<uint8_t> damaged = bytes;
            for (int k = 0; k < 4; ++k)
                damaged[rng() % damaged.size()] = static_cast<uint8_t>(rng());
            (void)checkDicomNestingBytes(damaged.data(), damaged.size(), "damaged");
        }
    }
    EXPECT_TRUE(checkDicomNestingBytes(nullptr, 0, "empty").isOk());
}

TEST(DicomNesting, NormalSeriesPass) {
    testing::TempDir dir;
    for (const bool meta : {true, false}) {
        SynthSeriesSpec s;
        s.write_meta_header = meta;
        s.ct_image_iod = true;
        auto files = writeSynthSeries(s, dir / (meta ? "meta" : "bare"));
        ASSERT_TRUE(files.isOk()) << files.status().toString();
        for (const std::string& f : *files) EXPECT_TRUE(checkDicomNesting(f).isOk()) << f;
    }
}

// Every reader refuses the deep file with the check's reason instead of handing it to DCMTK.
TEST(DicomNesting, EveryReaderRefusesADeepFile) {
    testing::TempDir dir;
    const std::string deep =
        testing::writeDeepDicom(dir.path() / "deep.dcm", spec(variants()[0], 10000));
    const auto expectRefusal = [&](const Status& s, const char* reader) {
        EXPECT_FALSE(s.isOk()) << reader;
        EXPECT_TRUE(contains(s.toString(), "10000 levels deep")) << reader << ": " << s.toString();
    };

    const FileHeaders headers = readDicomHeaders(deep);
    EXPECT_TRUE(headers.frames.empty());
    EXPECT_TRUE(contains(headers.skip_reason, "10000 levels deep")) << headers.skip_reason;

    auto scan = scanDicom({deep}, {});
    expectRefusal(scan.status(), "scanDicom");
    EXPECT_EQ(scan.status().code(), StatusCode::kNotFound);  // exit 3, as other refused files

    expectRefusal(DicomPixelReader::open(deep).status(), "DicomPixelReader::open");
    const std::vector<uint8_t> bytes = testing::deepDicom(spec(variants()[0], 10000));
    expectRefusal(DicomPixelReader::fromBuffer(bytes, "deep").status(), "fromBuffer");
    expectRefusal(readDicomSeg(deep).status(), "readDicomSeg");

    // DICOMDIR: the deep data set under that name, read as `voxseg info DICOMDIR` does.
    const fs::path dicomdir = dir.path() / "cd" / "DICOMDIR";
    fs::create_directories(dicomdir.parent_path());
    fs::copy_file(deep, dicomdir);
    expectRefusal(readDicomdir(dicomdir.string()).status(), "readDicomdir");
    expectRefusal(scanDicom({dicomdir.string()}, {}).status(), "scanDicom(DICOMDIR)");

    // RTSTRUCT: the structure set is refused; a deep file among the referenced images too.
    SynthSeriesSpec s;
    auto files = writeSynthSeries(s, dir / "series");
    ASSERT_TRUE(files.isOk());
    auto series = scanDicom({dir / "series"}, {});
    ASSERT_TRUE(series.isOk()) << series.status().toString();
    ASSERT_EQ(series->series.size(), 1u);
    EXPECT_FALSE(isRtStruct(deep));
    expectRefusal(readRtStruct(deep, series->series.front(), {}).status(), "readRtStruct");
}

// A deep file in a folder is skipped with the reason once; the good series next to it loads.
TEST(DicomNesting, ScanSkipsTheDeepFileAndKeepsTheGoodSeries) {
    testing::TempDir dir;
    SynthSeriesSpec s;
    ASSERT_TRUE(writeSynthSeries(s, dir / "study").isOk());
    testing::writeDeepDicom(dir.path() / "study" / "deep1", spec(variants()[0], 5600));
    testing::writeDeepDicom(dir.path() / "study" / "deep2", spec(variants()[2], 5600));
    auto scan = scanDicom({dir / "study"}, {});
    ASSERT_TRUE(scan.isOk()) << scan.status().toString();
    ASSERT_EQ(scan->series.size(), 1u);
    ASSERT_EQ(scan->skipped.size(), 2u);
    for (const auto& skipped : scan->skipped)
        EXPECT_TRUE(contains(skipped.reason, "5600 levels deep")) << skipped.reason;
}

}  // namespace
}  // namespace voxseg::io
