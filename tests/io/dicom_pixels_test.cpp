// DicomPixelReader on objects written by DCMTK in the test: every supported bit layout, byte
// order, deflate, RLE/JPEG/JPEG-LS round trips (single and multi-frame, with and without an offset
// table, frames over several fragments) and bad input that must fail with a clean Status.
#include "io/dicom_pixels.h"
#include "tests/test_data.h"

#include <dcmtk/config/osconfig.h>
#include <dcmtk/dcmdata/dcdeftag.h>
#include <dcmtk/dcmdata/dcfilefo.h>
#include <dcmtk/dcmdata/dcpixel.h>
#include <dcmtk/dcmdata/dcpixseq.h>
#include <dcmtk/dcmdata/dcpxitem.h>
#include <dcmtk/dcmdata/dcrleerg.h>
#include <dcmtk/dcmdata/dcuid.h>
#include <dcmtk/dcmdata/dcvrov.h>
#include <dcmtk/dcmjpeg/djencode.h>
#include <dcmtk/dcmjpeg/djrplol.h>
#include <dcmtk/dcmjpls/djencode.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

namespace voxseg::io {
namespace {

using voxseg::testing::TempDir;

struct Layout {
    int rows = 4;
    int columns = 3;
    int frames = 1;
    int bits_allocated = 16;
    int bits_stored = 16;
    int high_bit = 15;
    bool is_signed = false;
    const char* photometric = "MONOCHROME2";
    int samples = 1;
};

// Writes an image whose Pixel Data holds `raw` (one word of BitsAllocated per sample).
std::string writeImage(const TempDir& dir, const std::string& name, const Layout& l,
                       const std::vector<uint32_t>& raw,
                       E_TransferSyntax xfer = EXS_LittleEndianExplicit,
                       const DcmRepresentationParameter* param = nullptr) {
    DcmFileFormat file;
    DcmDataset* ds = file.getDataset();
    char uid[100];
    ds->putAndInsertString(DCM_SOPClassUID, UID_SecondaryCaptureImageStorage);
    ds->putAndInsertString(DCM_SOPInstanceUID, dcmGenerateUniqueIdentifier(uid));
    ds->putAndInsertUint16(DCM_Rows, static_cast<Uint16>(l.rows));
    ds->putAndInsertUint16(DCM_Columns, static_cast<Uint16>(l.columns));
    ds->putAndInsertUint16(DCM_BitsAllocated, static_cast<Uint16>(l.bits_allocated));
    ds->putAndInsertUint16(DCM_BitsStored, static_cast<Uint16>(l.bits_stored));
    ds->putAndInsertUint16(DCM_HighBit, static_cast<Uint16>(l.high_bit));
    ds->putAndInsertUint16(DCM_PixelRepresentation, l.is_signed ? 1 : 0);
    ds->putAndInsertUint16(DCM_SamplesPerPixel, static_cast<Uint16>(l.samples));
    ds->putAndInsertString(DCM_PhotometricInterpretation, l.photometric);
    if (l.samples > 1) ds->putAndInsertUint16(DCM_PlanarConfiguration, 0);
    if (l.frames > 1) ds->putAndInsertString(DCM_NumberOfFrames, std::to_string(l.frames).c_str());
    if (l.bits_allocated == 8) {
        std::vector<Uint8> bytes(raw.begin(), raw.end());
        ds->putAndInsertUint8Array(DCM_PixelData, bytes.data(), bytes.size());
    } else if (l.bits_allocated == 16) {
        std::vector<Uint16> words(raw.begin(), raw.end());
        ds->putAndInsertUint16Array(DCM_PixelData, words.data(), words.size());
    } else if (l.bits_allocated == 32) {
        std::vector<Uint16> words;
        for (uint32_t v : raw) {
            words.push_back(static_cast<Uint16>(v & 0xFFFF));
            words.push_back(static_cast<Uint16>(v >> 16));
        }
        ds->putAndInsertUint16Array(DCM_PixelData, words.data(), words.size());
    } else if (l.bits_allocated == 1) {
        std::vector<Uint8> bytes((raw.size() + 7) / 8 + 1 & ~size_t{1}, 0);
        for (size_t i = 0; i < raw.size(); ++i)
            if (raw[i]) bytes[i / 8] |= static_cast<Uint8>(1u << (i % 8));
        ds->putAndInsertUint8Array(DCM_PixelData, bytes.data(), bytes.size());
    }
    if (DcmXfer(xfer).isEncapsulated()) {
        const OFCondition c = ds->chooseRepresentation(xfer, param);
        EXPECT_TRUE(c.good()) << c.text();
        EXPECT_TRUE(ds->canWriteXfer(xfer));
    }
    const std::string path = dir / name;
    const OFCondition c = file.saveFile(path.c_str(), xfer);
    EXPECT_TRUE(c.good()) << c.text();
    return path;
}

std::vector<int32_t> readFrame(const std::string& path, int64_t frame) {
    auto reader = DicomPixelReader::open(path);
    EXPECT_TRUE(reader.isOk()) << reader.status().toString();
    if (!reader.isOk()) return {};
    std::vector<int32_t> out(static_cast<size_t>(reader->format().pixelsPerFrame()));
    const Status s = reader->readFrame(frame, out);
    EXPECT_TRUE(s.isOk()) << s.toString();
    return out;
}

TEST(DicomPixels, TwelveBitUnsignedMasksGarbageHighBits) {
    TempDir dir;
    Layout l;
    l.rows = 1;
    l.columns = 4;
    l.bits_stored = 12;
    l.high_bit = 11;
    const auto path = writeImage(dir, "a.dcm", l, {0xF123, 0x0FFF, 0xFFFF, 0x0000});
    EXPECT_EQ(readFrame(path, 0), (std::vector<int32_t>{0x123, 4095, 4095, 0}));
}

TEST(DicomPixels, TwelveBitSignedIsSignExtendedFromHighBit) {
    TempDir dir;
    Layout l;
    l.rows = 1;
    l.columns = 5;
    l.bits_stored = 12;
    l.high_bit = 11;
    l.is_signed = true;
    const auto path = writeImage(dir, "a.dcm", l, {0x0FFF, 0xF800, 0x07FF, 0x0F0F, 0x1001});
    EXPECT_EQ(readFrame(path, 0), (std::vector<int32_t>{-1, -2048, 2047, -241, 1}));
}

TEST(DicomPixels, HighBitAboveBitsStoredShiftsValues) {
    TempDir dir;
    Layout l;
    l.rows = 1;
    l.columns = 2;
    l.bits_stored = 12;
    l.high_bit = 15;
    const auto path = writeImage(dir, "a.dcm", l, {0xABC5, 0x0010});
    EXPECT_EQ(readFrame(path, 0), (std::vector<int32_t>{0xABC, 0x001}));
}

TEST(DicomPixels, SixteenBitSignedAndUnsigned) {
    TempDir dir;
    Layout l;
    l.rows = 1;
    l.columns = 3;
    const std::vector<uint32_t> raw{0xFFFF, 0x8000, 0x7FFF};
    EXPECT_EQ(readFrame(writeImage(dir, "u.dcm", l, raw), 0),
              (std::vector<int32_t>{65535, 32768, 32767}));
    l.is_signed = true;
    EXPECT_EQ(readFrame(writeImage(dir, "s.dcm", l, raw), 0),
              (std::vector<int32_t>{-1, -32768, 32767}));
}

TEST(DicomPixels, EightAndThirtyTwoBit) {
    TempDir dir;
    Layout l;
    l.rows = 2;
    l.columns = 2;
    l.bits_allocated = 8;
    l.bits_stored = 8;
    l.high_bit = 7;
    EXPECT_EQ(readFrame(writeImage(dir, "u8.dcm", l, {0, 1, 200, 255}), 0),
              (std::vector<int32_t>{0, 1, 200, 255}));
    l.is_signed = true;
    EXPECT_EQ(readFrame(writeImage(dir, "s8.dcm", l, {0, 1, 200, 255}), 0),
              (std::vector<int32_t>{0, 1, -56, -1}));
    l.bits_allocated = 32;
    l.bits_stored = 32;
    l.high_bit = 31;
    EXPECT_EQ(readFrame(writeImage(dir, "s32.dcm", l, {0, 0xFFFFFFFF, 100000, 0x80000000}), 0),
              (std::vector<int32_t>{0, -1, 100000, INT32_MIN}));
    l.is_signed = false;
    auto reader = DicomPixelReader::open(writeImage(dir, "u32.dcm", l, {0, 1, 2, 0xFFFFFFFF}));
    ASSERT_TRUE(reader.isOk());
    std::vector<int32_t> out(4);
    const Status s = reader->readFrame(0, out);
    EXPECT_EQ(s.code(), StatusCode::kUnsupported) << "uint32 above INT32_MAX must not wrap";
}

TEST(DicomPixels, BitPackedSingleBitFrames) {
    TempDir dir;
    Layout l;
    l.rows = 3;
    l.columns = 3;  // 9 bits per frame: frames are not byte-aligned
    l.frames = 3;
    l.bits_allocated = 1;
    l.bits_stored = 1;
    l.high_bit = 0;
    std::vector<uint32_t> raw(27);
    for (size_t i = 0; i < raw.size(); ++i) raw[i] = (i * 7 % 3) == 0;
    const auto path = writeImage(dir, "bits.dcm", l, raw);
    for (int f = 0; f < 3; ++f)
        EXPECT_EQ(readFrame(path, f),
                  std::vector<int32_t>(raw.begin() + 9 * f, raw.begin() + 9 * (f + 1)));
}

// Number of items in the encapsulated Pixel Data (offset table included) and the table's length.
std::pair<unsigned long, Uint32> pixelItems(const std::string& path) {
    DcmFileFormat file;
    if (file.loadFile(path.c_str()).bad()) return {0, 0};
    DcmElement* element = nullptr;
    file.getDataset()->findAndGetElement(DCM_PixelData, element);
    auto* pixels = dynamic_cast<DcmPixelData*>(element);
    E_TransferSyntax xfer = EXS_Unknown;
    const DcmRepresentationParameter* param = nullptr;
    DcmPixelSequence* sequence = nullptr;
    if (pixels == nullptr) return {0, 0};
    pixels->getOriginalRepresentationKey(xfer, param);
    if (pixels->getEncapsulatedRepresentation(xfer, param, sequence).bad()) return {0, 0};
    DcmPixelItem* table = nullptr;
    sequence->getItem(table, 0);
    return {sequence->card(), table ? table->getLength() : 0};
}

std::vector<uint32_t> noise12(size_t n, uint32_t seed) {
    std::mt19937 rng(seed);
    std::vector<uint32_t> v(n);
    for (auto& x : v) x = rng() & 0x0FFF;
    return v;
}

// Every byte order / deflate / codec must give back the values written.
TEST(DicomPixels, MultiFrameRoundTripThroughEveryWritableSyntax) {
    static std::once_flag once;
    std::call_once(once, [] {
        DcmRLEEncoderRegistration::registerCodecs();
        // 1 KB fragments and no offset table: frames span several fragments and their starts
        // must be found by scanning for JPEG markers.
        DJEncoderRegistration::registerCodecs(ECC_lossyYCbCr, EUC_never, OFFalse, 0, 0, 1, OFFalse);
        DJLSEncoderRegistration::registerCodecs();
    });
    TempDir dir;
    Layout l;
    l.rows = 48;
    l.columns = 64;
    l.frames = 3;
    l.bits_stored = 12;
    l.high_bit = 11;
    const auto raw = noise12(static_cast<size_t>(l.rows * l.columns * l.frames), 42);
    const DJ_RPLossless lossless;
    const struct {
        E_TransferSyntax xfer;
        const DcmRepresentationParameter* param;
    } cases[] = {{EXS_LittleEndianExplicit, nullptr}, {EXS_LittleEndianImplicit, nullptr},
                 {EXS_BigEndianExplicit, nullptr},    {EXS_DeflatedLittleEndianExplicit, nullptr},
                 {EXS_RLELossless, nullptr},          {EXS_JPEGProcess14SV1, &lossless},
                 {EXS_JPEGLSLossless, nullptr}};
    int index = 0;
    for (const auto& c : cases) {
        SCOPED_TRACE(DcmXfer(c.xfer).getXferName());
        const auto path =
            writeImage(dir, "f" + std::to_string(index++) + ".dcm", l, raw, c.xfer, c.param);
        if (c.xfer == EXS_JPEGProcess14SV1) {
            // The layout this case is meant to exercise: no offset table, >1 fragment per frame.
            const auto [items, table_length] = pixelItems(path);
            EXPECT_GT(items, 1 + 2 * l.frames);
            EXPECT_EQ(table_length, 0u);
        }
        auto reader = DicomPixelReader::open(path);
        ASSERT_TRUE(reader.isOk()) << reader.status().toString();
        EXPECT_EQ(reader->format().frames, 3);
        EXPECT_EQ(reader->format().transfer_syntax_uid, DcmXfer(c.xfer).getXferID());
        // Out of order: frames must not depend on having decoded the previous ones.
        for (int f : {2, 0, 1}) {
            std::vector<int32_t> out(static_cast<size_t>(l.rows * l.columns));
            const Status s = reader->readFrame(f, out);
            ASSERT_TRUE(s.isOk()) << s.toString();
            const auto first = raw.begin() + static_cast<std::ptrdiff_t>(f * out.size());
            EXPECT_TRUE(std::equal(out.begin(), out.end(), first)) << "frame " << f;
        }
    }
}

// RLE reproduces the stored words, garbage bits included, so it is masked like native data.
TEST(DicomPixels, RleKeepsHighBitShiftAndMasking) {
    DcmRLEEncoderRegistration::registerCodecs();
    TempDir dir;
    Layout l;
    l.rows = 1;
    l.columns = 3;
    l.bits_stored = 12;
    l.high_bit = 15;
    const auto path = writeImage(dir, "rle.dcm", l, {0xABC5, 0x0010, 0xFFFF}, EXS_RLELossless);
    EXPECT_EQ(readFrame(path, 0), (std::vector<int32_t>{0xABC, 0x001, 0xFFF}));
}

// The Extended Offset Table (7FE0,0001) is honoured: here it is deliberately wrong (offsets not
// on fragment boundaries), which must be reported instead of falling back to marker scanning.
TEST(DicomPixels, ExtendedOffsetTableIsUsed) {
    DJEncoderRegistration::registerCodecs();
    TempDir dir;
    Layout l;
    l.rows = 16;
    l.columns = 16;
    l.frames = 3;
    l.bits_stored = 12;
    l.high_bit = 11;
    const DJ_RPLossless lossless;
    const auto path =
        writeImage(dir, "eot.dcm", l, noise12(16 * 16 * 3, 5), EXS_JPEGProcess14SV1, &lossless);
    DcmFileFormat file;
    ASSERT_TRUE(file.loadFile(path.c_str()).good());
    const Uint64 offsets[] = {0, 3, 7};
    auto* table = new DcmOther64bitVeryLong(DcmTag(DCM_ExtendedOffsetTable, EVR_OV));
    ASSERT_TRUE(table->putUint64Array(offsets, 3).good());
    ASSERT_TRUE(file.getDataset()->insert(table, true).good());
    const std::string bad = dir / "eot_bad.dcm";
    ASSERT_TRUE(file.saveFile(bad.c_str(), EXS_JPEGProcess14SV1).good());
    auto reader = DicomPixelReader::open(bad);
    ASSERT_TRUE(reader.isOk()) << reader.status().toString();
    std::vector<int32_t> out(16 * 16);
    const Status s = reader->readFrame(1, out);
    EXPECT_EQ(s.code(), StatusCode::kCorruptData) << s.toString();
    EXPECT_NE(s.message().find("offset table"), std::string::npos) << s.toString();
}

TEST(DicomPixels, ReadersDecodeConcurrently) {
    TempDir dir;
    Layout l;
    l.rows = 32;
    l.columns = 32;
    l.bits_stored = 12;
    l.high_bit = 11;
    const auto raw = noise12(32 * 32, 7);
    const DJ_RPLossless lossless;
    DJEncoderRegistration::registerCodecs();
    const auto path = writeImage(dir, "j.dcm", l, raw, EXS_JPEGProcess14SV1, &lossless);
    std::vector<std::thread> threads;
    std::vector<int> ok(8, 0);
    for (int t = 0; t < 8; ++t)
        threads.emplace_back([&, t] {
            for (int i = 0; i < 20; ++i) {
                auto reader = DicomPixelReader::open(path);
                if (!reader.isOk()) return;
                std::vector<int32_t> out(32 * 32);
                if (!reader->readFrame(0, out).isOk()) return;
                if (!std::equal(out.begin(), out.end(), raw.begin())) return;
            }
            ok[t] = 1;
        });
    for (auto& t : threads) t.join();
    EXPECT_EQ(ok, std::vector<int>(8, 1));
}

TEST(DicomPixels, ColourAndPaletteAreUnsupportedWithAMessage) {
    TempDir dir;
    Layout l;
    l.bits_allocated = 8;
    l.bits_stored = 8;
    l.high_bit = 7;
    l.samples = 3;
    l.photometric = "RGB";
    const auto rgb = writeImage(dir, "rgb.dcm", l, std::vector<uint32_t>(36, 1));
    auto r = DicomPixelReader::open(rgb);
    ASSERT_FALSE(r.isOk());
    EXPECT_EQ(r.status().code(), StatusCode::kUnsupported);
    EXPECT_NE(r.status().message().find("colour"), std::string::npos) << r.status().toString();
    EXPECT_EQ(r.status().subject(), rgb);
    l.samples = 1;
    l.photometric = "PALETTE COLOR";
    auto p = DicomPixelReader::open(writeImage(dir, "pal.dcm", l, std::vector<uint32_t>(12, 1)));
    ASSERT_FALSE(p.isOk());
    EXPECT_EQ(p.status().code(), StatusCode::kUnsupported);
    EXPECT_NE(p.status().message().find("palette"), std::string::npos);
}

TEST(DicomPixels, BadInputFailsCleanly) {
    TempDir dir;
    auto missing = DicomPixelReader::open(dir / "nope.dcm");
    EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);

    const std::string garbage = dir / "garbage.dcm";
    std::ofstream(garbage) << "this is not DICOM at all, just some text";
    auto g = DicomPixelReader::open(garbage);
    EXPECT_FALSE(g.isOk());
    EXPECT_EQ(g.status().subject(), garbage);

    Layout l;
    l.rows = 64;
    l.columns = 64;
    const auto good = writeImage(dir, "good.dcm", l, noise12(64 * 64, 1));
    const auto size = std::filesystem::file_size(good);
    for (uint64_t cut : {size - 100, size / 2, uint64_t{200}, uint64_t{132}, uint64_t{10}}) {
        const std::string truncated = dir / ("cut" + std::to_string(cut) + ".dcm");
        std::filesystem::copy_file(good, truncated);
        std::filesystem::resize_file(truncated, cut);
        auto t = DicomPixelReader::open(truncated);
        if (t.isOk()) {
            std::vector<int32_t> out(64 * 64);
            const Status s = t->readFrame(0, out);
            EXPECT_FALSE(s.isOk()) << "truncated at " << cut << " decoded anyway";
        } else {
            EXPECT_EQ(t.status().subject(), truncated);
            EXPECT_FALSE(t.status().message().empty());
        }
    }

    auto reader = DicomPixelReader::open(good);
    ASSERT_TRUE(reader.isOk());
    std::vector<int32_t> small(10);
    EXPECT_EQ(reader->readFrame(0, small).code(), StatusCode::kInvalidArgument);
    std::vector<int32_t> out(64 * 64);
    EXPECT_EQ(reader->readFrame(1, out).code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(reader->readFrame(-1, out).code(), StatusCode::kInvalidArgument);
}

TEST(DicomPixels, MissingPixelDataIsReported) {
    TempDir dir;
    DcmFileFormat file;
    file.getDataset()->putAndInsertString(DCM_SOPClassUID, UID_BasicTextSRStorage);
    const std::string path = dir / "sr.dcm";
    ASSERT_TRUE(file.saveFile(path.c_str(), EXS_LittleEndianExplicit).good());
    auto r = DicomPixelReader::open(path);
    ASSERT_FALSE(r.isOk());
    EXPECT_NE(r.status().message().find("Pixel Data"), std::string::npos);
}

TEST(DicomPixels, FromBufferMatchesOpen) {
    TempDir dir;
    Layout l;
    l.rows = 8;
    l.columns = 8;
    const auto raw = noise12(64, 3);
    const auto path = writeImage(dir, "a.dcm", l, raw);
    std::ifstream in(path, std::ios::binary);
    std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), {});
    auto reader = DicomPixelReader::fromBuffer(bytes, "memory");
    ASSERT_TRUE(reader.isOk()) << reader.status().toString();
    std::vector<int32_t> out(64);
    ASSERT_TRUE(reader->readFrame(0, out).isOk());
    EXPECT_TRUE(std::equal(out.begin(), out.end(), raw.begin()));
}

}  // namespace
}  // namespace voxseg::io
