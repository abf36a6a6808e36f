#include "io/dicom_pixels.h"

#include "core/limits.h"
#include "io/dicom_codec_fragments.h"
#include "io/dicom_codec_rle.h"
#include "io/dicom_inflate_guard.h"
#include "io/dicom_nesting.h"
#include "io/j2k_decoder.h"

#include <dcmtk/config/osconfig.h>
#include <dcmtk/dcmdata/dcdatset.h>
#include <dcmtk/dcmdata/dcdeftag.h>
#include <dcmtk/dcmdata/dcfcache.h>
#include <dcmtk/dcmdata/dcfilefo.h>
#include <dcmtk/dcmdata/dcistrmb.h>
#include <dcmtk/dcmdata/dcmetinf.h>
#include <dcmtk/dcmdata/dcpixel.h>
#include <dcmtk/dcmdata/dcpixseq.h>
#include <dcmtk/dcmdata/dcpxitem.h>
#include <dcmtk/dcmdata/dcrledrg.h>
#include <dcmtk/dcmdata/dcxfer.h>
#include <dcmtk/dcmjpeg/djdecode.h>
#include <dcmtk/dcmjpls/djdecode.h>
#include <fmt/format.h>

#include <algorithm>
#include <climits>
#include <filesystem>
#include <mutex>
#include <new>
#include <optional>
#include <type_traits>
#include <vector>

namespace voxseg::io {

void ensureDicomCodecsRegistered() {
    static std::once_flag once;
    std::call_once(once, [] {
        // Readers decode RLE themselves (io/dicom_codec_rle.h); DCMTK's decoder is registered for
        // other io/ code that converts whole datasets.
        DcmRLEDecoderRegistration::registerCodecs();
        // No colour conversion: voxseg reads monochrome frames only (colour is rejected first).
        DJDecoderRegistration::registerCodecs(EDC_never, EUC_never);
        DJLSDecoderRegistration::registerCodecs();
    });
}

namespace {

using detail::FragmentInfo;
using detail::FrameFragments;
using detail::StartMarker;

enum class Codec { kNative, kRle, kDcmtk, kJpeg2000 };

struct SyntaxInfo {
    Codec codec;
    StartMarker marker;
};

// How voxseg decodes each transfer syntax; nullopt = not supported.
std::optional<SyntaxInfo> classifySyntax(const std::string& uid) {
    static const char* const kNative[] = {"1.2.840.10008.1.2", "1.2.840.10008.1.2.1",
                                          "1.2.840.10008.1.2.2", "1.2.840.10008.1.2.1.99"};
    for (const char* n : kNative)
        if (uid == n) return SyntaxInfo{Codec::kNative, StartMarker::kNone};
    if (uid == "1.2.840.10008.1.2.5") return SyntaxInfo{Codec::kRle, StartMarker::kNone};
    // JPEG baseline (50), extended (51), lossless (57, 70) and the retired JPEG processes that
    // DCMTK's decoder may handle; JPEG-LS lossless/near-lossless (80, 81).
    static const char* const kJpeg[] = {"1.2.840.10008.1.2.4.50", "1.2.840.10008.1.2.4.51",
                                        "1.2.840.10008.1.2.4.53", "1.2.840.10008.1.2.4.55",
                                        "1.2.840.10008.1.2.4.57", "1.2.840.10008.1.2.4.70",
                                        "1.2.840.10008.1.2.4.80", "1.2.840.10008.1.2.4.81"};
    for (const char* j : kJpeg)
        if (uid == j) return SyntaxInfo{Codec::kDcmtk, StartMarker::kJpeg};
    // JPEG 2000 (90-93) and HTJ2K (201-203): OpenJPEG.
    static const char* const kJ2k[] = {"1.2.840.10008.1.2.4.90",  "1.2.840.10008.1.2.4.91",
                                       "1.2.840.10008.1.2.4.92",  "1.2.840.10008.1.2.4.93",
                                       "1.2.840.10008.1.2.4.201", "1.2.840.10008.1.2.4.202",
                                       "1.2.840.10008.1.2.4.203"};
    for (const char* j : kJ2k)
        if (uid == j) return SyntaxInfo{Codec::kJpeg2000, StartMarker::kJpeg2000};
    return std::nullopt;
}

std::string syntaxName(const std::string& uid) {
    DcmXfer xfer(uid.c_str());
    if (xfer.getXfer() != EXS_Unknown) return fmt::format("{} ({})", xfer.getXferName(), uid);
    if (uid == "1.2.840.10008.1.2.4.201" || uid == "1.2.840.10008.1.2.4.202" ||
        uid == "1.2.840.10008.1.2.4.203")
        return fmt::format("HTJ2K ({})", uid);
    return uid;
}

Status unsupportedSyntax(const std::string& uid, const std::string& path) {
    return unsupported(fmt::format("transfer syntax {} is not supported: convert the file to "
                                   "uncompressed DICOM with `gdcmconv -w {} <out.dcm>`",
                                   syntaxName(uid), path),
                       path);
}

std::string conditionText(const OFCondition& cond) { return cond.text() ? cond.text() : "?"; }

// Stored value from the raw bits of one sample: HighBit/BitsStored masking and sign extension.
struct Unpacker {
    int shift;  // HighBit + 1 - BitsStored for native data; 0 for decoded codec output
    int bits;   // BitsStored
    bool is_signed;

    // Returns false when an unsigned 32-bit value does not fit int32.
    bool operator()(uint32_t raw, int32_t& out) const {
        const uint64_t mask = (uint64_t{1} << bits) - 1;
        const uint64_t v = (static_cast<uint64_t>(raw) >> shift) & mask;
        int64_t value = static_cast<int64_t>(v);
        if (is_signed && ((v >> (bits - 1)) & 1)) value -= int64_t{1} << bits;
        if (value > INT32_MAX) return false;
        out = static_cast<int32_t>(value);
        return true;
    }
};

template <typename T>
bool unpackWords(const uint8_t* bytes, int64_t n, const Unpacker& unpack, int32_t* out) {
    const T* words = reinterpret_cast<const T*>(bytes);
    if constexpr (sizeof(T) < sizeof(uint32_t)) {
        // 8/16-bit words always fit int32: the same shift, mask and sign extension as Unpacker,
        // in 32-bit arithmetic without the overflow test, so the loop vectorises (this loop was
        // a fifth of `voxseg convert`'s CPU time on uncompressed CT).
        const uint32_t mask = (uint32_t{1} << unpack.bits) - 1;
        const int shift = unpack.shift;
        if (shift == 0 && unpack.bits == static_cast<int>(8 * sizeof(T))) {
            // Every bit stored (signed CT, 8-bit images): a plain widening copy.
            using Signed = std::make_signed_t<T>;
            if (unpack.is_signed) {
                for (int64_t i = 0; i < n; ++i) out[i] = static_cast<Signed>(words[i]);
            } else {
                for (int64_t i = 0; i < n; ++i) out[i] = words[i];
            }
            return true;
        }
        if (unpack.is_signed) {
            const int up = 32 - unpack.bits;
            for (int64_t i = 0; i < n; ++i)
                out[i] = static_cast<int32_t>(((static_cast<uint32_t>(words[i]) >> shift) & mask)
                                              << up) >>
                         up;
        } else {
            for (int64_t i = 0; i < n; ++i)
                out[i] = static_cast<int32_t>((static_cast<uint32_t>(words[i]) >> shift) & mask);
        }
        return true;
    }
    bool ok = true;
    for (int64_t i = 0; i < n; ++i) ok &= unpack(static_cast<uint32_t>(words[i]), out[i]);
    return ok;
}

// Unpacks n samples of the frame's allocated width (8/16/32 bits) from `bytes` into `out`.
Status unpackFrame(const uint8_t* bytes, int64_t n, int bits_allocated, const Unpacker& unpack,
                   std::span<int32_t> out, const std::string& path) {
    bool ok = true;
    switch (bits_allocated) {
        case 8:
            ok = unpackWords<uint8_t>(bytes, n, unpack, out.data());
            break;
        case 16:
            ok = unpackWords<uint16_t>(bytes, n, unpack, out.data());
            break;
        default:
            ok = unpackWords<uint32_t>(bytes, n, unpack, out.data());
            break;
    }
    if (!ok)
        return unsupported("unsigned 32-bit pixel values above 2147483647 are not supported", path);
    return Status::ok();
}

// Frame buffers outlive the reader that used them. A series is read with one reader per file;
// a fresh, zero-filled frame buffer per file cost a page fault per 4 KiB of every slice (40% of
// the page faults of `voxseg convert` on a 512x512x300 uncompressed CT, 29k of 71k). Released
// buffers are kept for the next readers, up to kKeptBytes in all; a reader takes one if any.
class ScratchPool {
  public:
    static std::vector<uint8_t> take() {
        ScratchPool& p = instance();
        std::lock_guard lock(p.mutex_);
        if (p.kept_.empty()) return {};
        std::vector<uint8_t> v = std::move(p.kept_.back());
        p.kept_.pop_back();
        p.bytes_ -= v.capacity();
        return v;
    }
    static void give(std::vector<uint8_t>&& v) {
        if (v.capacity() == 0) return;
        ScratchPool& p = instance();
        std::lock_guard lock(p.mutex_);
        if (p.bytes_ + v.capacity() > kKeptBytes) return;
        p.bytes_ += v.capacity();
        p.kept_.push_back(std::move(v));
    }

  private:
    static constexpr size_t kKeptBytes = size_t{16} << 20;
    static ScratchPool& instance() {
        static ScratchPool pool;
        return pool;
    }
    std::mutex mutex_;
    std::vector<std::vector<uint8_t>> kept_;
    size_t bytes_ = 0;
};

}  // namespace

struct DicomPixelReader::Impl {
    Impl() : scratch(ScratchPool::take()) {}
    ~Impl() { ScratchPool::give(std::move(scratch)); }
    Impl(const Impl&) = delete;
    Impl& operator=(const Impl&) = delete;

    std::string path;
    std::vector<uint8_t> memory;  // backing bytes for fromBuffer()
    std::unique_ptr<DcmFileFormat> file;
    DcmDataset* dataset = nullptr;
    DcmPixelData* pixel_data = nullptr;
    PixelFormat format;
    SyntaxInfo syntax{Codec::kNative, StartMarker::kNone};
    uint64_t frame_bytes = 0;  // one frame as stored uncompressed (bytes, rounded up)
    DcmPixelSequence* sequence = nullptr;
    std::vector<FrameFragments> frame_map;  // encapsulated only, built on first use
    bool frame_map_ready = false;
    std::vector<uint8_t> scratch;  // from ScratchPool; may be larger than the frame in use
    DcmFileCache file_cache;       // keeps the file open across frames of lazily loaded Pixel Data
    std::vector<uint8_t> packed_bits;  // BitsAllocated 1: the whole element, loaded once

    Status parse();
    Status buildFrameMap();
    Status readNative(int64_t frame, std::span<int32_t> out);
    Status readDcmtk(int64_t frame, std::span<int32_t> out);
    Status readJ2k(int64_t frame, std::span<int32_t> out);
    Status readRle(int64_t frame, std::span<int32_t> out);
    Status gatherFrame(int64_t frame);
    Status readBitPacked(int64_t frame, std::span<int32_t> out);
    Status damaged(const std::string& what) const {
        return corruptData(what + ": the file is damaged or truncated; re-export it", path);
    }
};

Status DicomPixelReader::Impl::parse() {
    dataset = file->getDataset();
    if (dataset == nullptr) return damaged("no DICOM dataset");

    OFString ts;
    DcmMetaInfo* meta = file->getMetaInfo();
    if (meta == nullptr || meta->findAndGetOFString(DCM_TransferSyntaxUID, ts).bad() ||
        ts.empty()) {
        // No file meta information (or no TransferSyntaxUID in it): use what DCMTK detected.
        DcmXfer detected(dataset->getOriginalXfer());
        if (detected.getXfer() == EXS_Unknown)
            return corruptData(
                "the transfer syntax is missing and could not be detected: the file "
                "is damaged or not DICOM",
                path);
        ts = detected.getXferID();
    }
    format.transfer_syntax_uid = ts.c_str();
    while (!format.transfer_syntax_uid.empty() && format.transfer_syntax_uid.back() == ' ')
        format.transfer_syntax_uid.pop_back();

    if (dataset->tagExists(DCM_FloatPixelData) || dataset->tagExists(DCM_DoubleFloatPixelData))
        return unsupported("floating-point pixel data (parametric map) is not supported", path);
    DcmElement* element = nullptr;
    if (dataset->findAndGetElement(DCM_PixelData, element).bad() || element == nullptr)
        return unsupported("no Pixel Data (7FE0,0010): this object is not an image", path);
    pixel_data = dynamic_cast<DcmPixelData*>(element);
    if (pixel_data == nullptr) return damaged("Pixel Data (7FE0,0010) has an unexpected form");

    Uint16 rows = 0, columns = 0, samples = 1, allocated = 0, stored = 0, high = 0, repr = 0;
    if (dataset->findAndGetUint16(DCM_Rows, rows).bad() ||
        dataset->findAndGetUint16(DCM_Columns, columns).bad() || rows == 0 || columns == 0)
        return damaged("Rows/Columns (0028,0010/0011) missing or zero");
    if (dataset->findAndGetUint16(DCM_BitsAllocated, allocated).bad())
        return damaged("BitsAllocated (0028,0100) missing");
    if (dataset->findAndGetUint16(DCM_BitsStored, stored).bad()) stored = allocated;
    if (dataset->findAndGetUint16(DCM_HighBit, high).bad()) high = stored - 1;
    if (dataset->findAndGetUint16(DCM_PixelRepresentation, repr).bad()) repr = 0;
    if (dataset->findAndGetUint16(DCM_SamplesPerPixel, samples).bad()) samples = 1;
    Sint32 frames = 1;
    if (dataset->findAndGetSint32(DCM_NumberOfFrames, frames).bad()) frames = 1;
    OFString photometric;
    dataset->findAndGetOFString(DCM_PhotometricInterpretation, photometric);

    format.rows = rows;
    format.columns = columns;
    format.frames = frames;
    format.samples_per_pixel = samples;
    format.bits_allocated = allocated;
    format.bits_stored = stored;
    format.high_bit = high;
    format.is_signed = repr == 1;
    format.photometric = photometric.c_str();
    if (format.photometric.empty() && samples == 1) format.photometric = "MONOCHROME2";

    if (frames < 1 || frames > readLimits().frames_per_file)
        return damaged(
            fmt::format("NumberOfFrames (0028,0008) is {} (limit {} frames per "
                        "file; raise --max-frames-per-file if this is real)",
                        frames, readLimits().frames_per_file));
    if (format.photometric == "PALETTE COLOR")
        return unsupported(
            "palette colour images (PALETTE COLOR) are not supported: voxseg reads "
            "greyscale (MONOCHROME1/2) images only",
            path);
    if (samples != 1 ||
        (format.photometric != "MONOCHROME1" && format.photometric != "MONOCHROME2"))
        return unsupported(fmt::format("colour images ({}, {} samples per pixel) are not "
                                       "supported: voxseg reads greyscale (MONOCHROME1/2) images "
                                       "only",
                                       format.photometric, samples),
                           path);
    if (allocated != 1 && allocated != 8 && allocated != 16 && allocated != 32)
        return unsupported(
            fmt::format("BitsAllocated {} is not supported (1, 8, 16 or 32)", allocated), path);
    if (stored < 1 || stored > allocated || high < stored - 1 || high >= allocated)
        return damaged(fmt::format("inconsistent BitsAllocated/BitsStored/HighBit ({}/{}/{})",
                                   allocated, stored, high));

    const uint64_t pixels = static_cast<uint64_t>(rows) * columns;
    frame_bytes = (pixels * allocated + 7) / 8;
    if (frame_bytes > readLimits().frame_bytes)
        return unsupported(fmt::format("claims frames of {} x {} pixels at {} bits ({} bytes) > "
                                       "limit {} bytes per frame; raise --max-frame-bytes (at "
                                       "most {}) if this is real",
                                       columns, rows, allocated, frame_bytes,
                                       readLimits().frame_bytes, kMaxFrameBytes),
                           path);

    const auto info = classifySyntax(format.transfer_syntax_uid);
    if (!info) return unsupportedSyntax(format.transfer_syntax_uid, path);
    syntax = *info;

    E_TransferSyntax original = EXS_Unknown;
    const DcmRepresentationParameter* parameter = nullptr;
    pixel_data->getOriginalRepresentationKey(original, parameter);
    // DCMTK 3.6.7 does not know the HTJ2K UIDs: it reads such files as explicit little endian,
    // but still keeps the undefined-length Pixel Data as a fragment sequence, which is all the
    // OpenJPEG path needs. So the fragment sequence is looked up whatever DCMTK thinks.
    if ((syntax.codec == Codec::kNative) && DcmXfer(original).isEncapsulated())
        return damaged(
            fmt::format("the pixel data is encapsulated but the transfer syntax {} "
                        "says it is not",
                        syntaxName(format.transfer_syntax_uid)));
    if (syntax.codec == Codec::kNative) {
        const uint64_t needed = (pixels * frames * allocated + 7) / 8;
        const uint64_t length = pixel_data->getLength();
        if (length < needed)
            return damaged(
                fmt::format("Pixel Data holds {} bytes but {} frame(s) of {}x{} at {} "
                            "bits need {}",
                            length, frames, columns, rows, allocated, needed));
    } else {
        if (pixel_data->getEncapsulatedRepresentation(original, parameter, sequence).bad() ||
            sequence == nullptr)
            return damaged(
                fmt::format("the transfer syntax {} needs encapsulated (fragmented) "
                            "Pixel Data, which the file does not hold",
                            syntaxName(format.transfer_syntax_uid)));
        if (allocated == 1 && syntax.codec != Codec::kJpeg2000)
            return unsupported(fmt::format("BitsAllocated 1 in {} is not supported: convert with "
                                           "`gdcmconv -w {} <out.dcm>`",
                                           syntaxName(format.transfer_syntax_uid), path),
                               path);
    }
    return Status::ok();
}

Status DicomPixelReader::Impl::buildFrameMap() {
    if (frame_map_ready) return Status::ok();
    const unsigned long items = sequence->card();
    if (items < 2) return damaged("the encapsulated Pixel Data holds no fragments");
    std::vector<FragmentInfo> fragments(items - 1);
    for (unsigned long i = 1; i < items; ++i) {
        DcmPixelItem* item = nullptr;
        if (sequence->getItem(item, i).bad() || item == nullptr)
            return damaged(fmt::format("pixel data fragment {} is unreadable", i));
        FragmentInfo& f = fragments[i - 1];
        f.length = item->getLength();
        // Heads are only needed when frame starts must be found by scanning.
        if (format.frames > 1 && static_cast<uint64_t>(format.frames) != items - 1) {
            f.head_size = static_cast<int>(std::min<uint64_t>(sizeof(f.head), f.length));
            if (f.head_size > 0 && item->getPartialValue(f.head, 0, f.head_size).bad())
                return damaged(fmt::format("pixel data fragment {} is unreadable", i));
        }
    }
    std::vector<uint64_t> offsets;
    DcmPixelItem* table = nullptr;
    const Uint64* extended = nullptr;
    unsigned long extended_count = 0;
    if (format.frames > 1 &&
        dataset->findAndGetUint64Array(DCM_ExtendedOffsetTable, extended, &extended_count).good() &&
        extended != nullptr && extended_count > 0) {
        // Extended Offset Table (PS3.5 A.4): 64-bit offsets, used when the basic one is empty.
        offsets.assign(extended, extended + extended_count);
    } else if (format.frames > 1 && sequence->getItem(table, 0).good() && table != nullptr &&
               table->getLength() > 0) {
        Uint8* bytes = nullptr;
        const Uint32 length = table->getLength();
        if (length % 4 != 0 || table->getUint8Array(bytes).bad() || bytes == nullptr)
            return damaged("the Basic Offset Table is unreadable");
        offsets.resize(length / 4);
        for (size_t k = 0; k < offsets.size(); ++k)
            offsets[k] = uint64_t{bytes[4 * k]} | uint64_t{bytes[4 * k + 1]} << 8 |
                         uint64_t{bytes[4 * k + 2]} << 16 | uint64_t{bytes[4 * k + 3]} << 24;
    }
    VOXSEG_ASSIGN_OR_RETURN(frame_map, detail::mapFramesToFragments(
                                           format.frames, offsets, fragments, syntax.marker, path));
    frame_map_ready = true;
    return Status::ok();
}

Status DicomPixelReader::Impl::readNative(int64_t frame, std::span<int32_t> out) {
    if (format.bits_allocated == 1) return readBitPacked(frame, out);
    const size_t need = frame_bytes + (frame_bytes & 1);
    if (scratch.size() < need) scratch.resize(need);
    Uint32 start = 0;
    OFString colour;
    const OFCondition cond =
        pixel_data->getUncompressedFrame(dataset, static_cast<Uint32>(frame), start, scratch.data(),
                                         static_cast<Uint32>(need), colour, &file_cache);
    if (cond.bad())
        return damaged(
            fmt::format("frame {} could not be read ({})", frame + 1, conditionText(cond)));
    const Unpacker unpack{format.high_bit + 1 - format.bits_stored, format.bits_stored,
                          format.is_signed};
    const int64_t n = format.pixelsPerFrame();
    if (format.bits_allocated == 32 && format.transfer_syntax_uid == "1.2.840.10008.1.2.2" &&
        pixel_data->getVR() == EVR_OW) {
        // DCMTK converts big-endian OW as 16-bit words, leaving the halves of each 32-bit sample
        // in big-endian order (rtdose_expb.dcm of pydicom's test files pins this).
        auto* words = reinterpret_cast<uint32_t*>(scratch.data());
        for (int64_t i = 0; i < n; ++i) words[i] = (words[i] << 16) | (words[i] >> 16);
    }
    return unpackFrame(scratch.data(), n, format.bits_allocated, unpack, out, path);
}

Status DicomPixelReader::Impl::readBitPacked(int64_t frame, std::span<int32_t> out) {
    if (packed_bits.empty()) {
        Uint8* bytes = nullptr;
        const OFCondition cond = pixel_data->getUint8Array(bytes);
        if (cond.bad() || bytes == nullptr)
            return damaged("the bit-packed Pixel Data could not be read (" + conditionText(cond) +
                           ")");
        packed_bits.assign(bytes, bytes + pixel_data->getLength());
    }
    const int64_t n = format.pixelsPerFrame();
    const uint64_t first_bit = static_cast<uint64_t>(frame) * static_cast<uint64_t>(n);
    if ((first_bit + n + 7) / 8 > packed_bits.size())
        return damaged(fmt::format("frame {} lies beyond the end of Pixel Data", frame + 1));
    for (int64_t i = 0; i < n; ++i) {
        const uint64_t bit = first_bit + static_cast<uint64_t>(i);
        out[i] = (packed_bits[bit >> 3] >> (bit & 7)) & 1;
    }
    return Status::ok();
}

Status DicomPixelReader::Impl::readDcmtk(int64_t frame, std::span<int32_t> out) {
    VOXSEG_RETURN_IF_ERROR(buildFrameMap());
    const size_t need = frame_bytes + (frame_bytes & 1);
    if (scratch.size() < need) scratch.resize(need);
    Uint32 start = static_cast<Uint32>(frame_map[static_cast<size_t>(frame)].first + 1);
    OFString colour;
    const OFCondition cond =
        pixel_data->getUncompressedFrame(dataset, static_cast<Uint32>(frame), start, scratch.data(),
                                         static_cast<Uint32>(need), colour, &file_cache);
    if (cond.bad()) {
        if (cond == EC_CannotChangeRepresentation)
            return unsupportedSyntax(format.transfer_syntax_uid, path);
        return corruptData(fmt::format("decoding frame {} ({}) failed: {}; the compressed data is "
                                       "damaged or uses an unsupported variant: try "
                                       "`gdcmconv -w {} <out.dcm>`",
                                       frame + 1, syntaxName(format.transfer_syntax_uid),
                                       conditionText(cond), path),
                           path);
    }
    // Decoders deliver the sample value in the low bits; mask garbage and sign-extend.
    const Unpacker unpack{0, format.bits_stored, format.is_signed};
    const int64_t n = format.pixelsPerFrame();
    return unpackFrame(scratch.data(), n, format.bits_allocated, unpack, out, path);
}

// Concatenates the fragments of `frame` into scratch.
Status DicomPixelReader::Impl::gatherFrame(int64_t frame) {
    VOXSEG_RETURN_IF_ERROR(buildFrameMap());
    const FrameFragments range = frame_map[static_cast<size_t>(frame)];
    scratch.clear();
    for (size_t i = range.first; i < range.first + range.count; ++i) {
        DcmPixelItem* item = nullptr;
        Uint8* bytes = nullptr;
        if (sequence->getItem(item, static_cast<unsigned long>(i + 1)).bad() || item == nullptr)
            return damaged(fmt::format("pixel data fragment {} is unreadable", i + 1));
        const Uint32 length = item->getLength();
        if (length == 0) continue;
        if (item->getUint8Array(bytes).bad() || bytes == nullptr)
            return damaged(fmt::format("pixel data fragment {} is unreadable", i + 1));
        scratch.insert(scratch.end(), bytes, bytes + length);
    }
    return Status::ok();
}

Status DicomPixelReader::Impl::readRle(int64_t frame, std::span<int32_t> out) {
    VOXSEG_RETURN_IF_ERROR(gatherFrame(frame));
    const int64_t n = format.pixelsPerFrame();
    std::vector<uint32_t> words(static_cast<size_t>(n));
    VOXSEG_RETURN_IF_ERROR(
        detail::decodeRleFrame(scratch, n, format.bits_allocated / 8, words, path)
            .withContext(fmt::format("frame {}", frame + 1)));
    // RLE reproduces the stored words byte for byte: mask like uncompressed data.
    const Unpacker unpack{format.high_bit + 1 - format.bits_stored, format.bits_stored,
                          format.is_signed};
    bool ok = true;
    for (int64_t i = 0; i < n; ++i) ok &= unpack(words[i], out[i]);
    if (!ok)
        return unsupported("unsigned 32-bit pixel values above 2147483647 are not supported", path);
    return Status::ok();
}

Status DicomPixelReader::Impl::readJ2k(int64_t frame, std::span<int32_t> out) {
    VOXSEG_RETURN_IF_ERROR(gatherFrame(frame));
    detail::J2kFrameInfo info;
    VOXSEG_RETURN_IF_ERROR(
        detail::decodeJ2kFrame(scratch, format.rows, format.columns, out, &info, path)
            .withContext(fmt::format("frame {}", frame + 1)));
    // OpenJPEG returns sign-interpreted values; reinterpret them as BitsStored-wide patterns so
    // PixelRepresentation decides the sign (codestreams that disagree with the header exist).
    const Unpacker unpack{0, format.bits_stored, format.is_signed};
    bool ok = true;
    for (int64_t i = 0, n = format.pixelsPerFrame(); i < n; ++i)
        ok &= unpack(static_cast<uint32_t>(out[i]), out[i]);
    if (!ok)
        return unsupported("unsigned 32-bit pixel values above 2147483647 are not supported", path);
    return Status::ok();
}

DicomPixelReader::DicomPixelReader(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
DicomPixelReader::~DicomPixelReader() = default;
DicomPixelReader::DicomPixelReader(DicomPixelReader&&) noexcept = default;
DicomPixelReader& DicomPixelReader::operator=(DicomPixelReader&&) noexcept = default;

const PixelFormat& DicomPixelReader::format() const { return impl_->format; }

Result<DicomPixelReader> DicomPixelReader::open(const std::string& path) {
    ensureDicomCodecsRegistered();
    std::error_code ec;
    const auto status = std::filesystem::status(path, ec);
    if (ec || !std::filesystem::exists(status)) return notFound("no such file", path);
    if (!std::filesystem::is_regular_file(status)) return invalidArgument("not a file", path);
    try {
        auto impl = std::make_unique<Impl>();
        impl->path = path;
        impl->file = std::make_unique<DcmFileFormat>();
        VOXSEG_RETURN_IF_ERROR(checkInflatedSize(path));
        VOXSEG_RETURN_IF_ERROR(checkDicomNesting(path));
        const OFCondition cond = impl->file->loadFile(OFFilename(path.c_str()));
        if (cond.bad()) {
            if (cond == EC_InvalidFilename)
                return ioError("cannot open the file: " + conditionText(cond), path);
            return corruptData(fmt::format("not a readable DICOM file ({}): the file is truncated, "
                                           "damaged or not DICOM",
                                           conditionText(cond)),
                               path);
        }
        VOXSEG_RETURN_IF_ERROR(impl->parse());
        return DicomPixelReader(std::move(impl));
    } catch (const std::bad_alloc&) {
        return Status(StatusCode::kOutOfMemory, "out of memory while reading the file", path);
    } catch (const std::exception& e) {
        // DCMTK 3.6.7 throws from some malformed values (e.g. std::out_of_range in
        // DcmByteString::verify on a damaged directory record; found by fuzz_dicom_pixels).
        return corruptData(
            fmt::format("DCMTK failed while parsing ({}): the file is damaged", e.what()), path);
    }
}

Result<DicomPixelReader> DicomPixelReader::fromBuffer(std::span<const uint8_t> bytes,
                                                      const std::string& name) {
    ensureDicomCodecsRegistered();
    try {
        auto impl = std::make_unique<Impl>();
        impl->path = name;
        VOXSEG_RETURN_IF_ERROR(checkDicomNestingBytes(bytes.data(), bytes.size(), name));
        impl->memory.assign(bytes.begin(), bytes.end());
        impl->file = std::make_unique<DcmFileFormat>();
        DcmInputBufferStream stream;
        stream.setBuffer(impl->memory.data(), static_cast<offile_off_t>(impl->memory.size()));
        stream.setEos();
        impl->file->transferInit();
        const OFCondition cond = impl->file->read(stream);
        impl->file->transferEnd();
        stream.releaseBuffer();
        if (cond.bad())
            return corruptData(fmt::format("not a readable DICOM object ({}): it is truncated, "
                                           "damaged or not DICOM",
                                           conditionText(cond)),
                               name);
        VOXSEG_RETURN_IF_ERROR(impl->parse());
        return DicomPixelReader(std::move(impl));
    } catch (const std::bad_alloc&) {
        return Status(StatusCode::kOutOfMemory, "out of memory while reading the object", name);
    } catch (const std::exception& e) {
        return corruptData(
            fmt::format("DCMTK failed while parsing ({}): the object is damaged", e.what()), name);
    }
}

Status DicomPixelReader::readFrame(int64_t frame, std::span<int32_t> out) {
    Impl& d = *impl_;
    if (frame < 0 || frame >= d.format.frames)
        return invalidArgument(
            fmt::format("frame {} requested; the file has {} frame(s)", frame, d.format.frames),
            d.path);
    if (static_cast<int64_t>(out.size()) < d.format.pixelsPerFrame())
        return invalidArgument(fmt::format("output holds {} values; a frame has {}", out.size(),
                                           d.format.pixelsPerFrame()),
                               d.path);
    try {
        switch (d.syntax.codec) {
            case Codec::kNative:
                return d.readNative(frame, out);
            case Codec::kRle:
                return d.readRle(frame, out);
            case Codec::kDcmtk:
                return d.readDcmtk(frame, out);
            case Codec::kJpeg2000:
                return d.readJ2k(frame, out);
        }
    } catch (const std::bad_alloc&) {
        return Status(StatusCode::kOutOfMemory, "out of memory while decoding", d.path);
    } catch (const std::exception& e) {
        return corruptData(
            fmt::format("decoding frame {} failed ({}): the file is damaged", frame + 1, e.what()),
            d.path);
    }
    return internalError("unknown codec", d.path);
}

}  // namespace voxseg::io
