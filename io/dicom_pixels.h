// Decoding the pixel data of one DICOM object (DCMTK; JPEG 2000 through OpenJPEG).
//
// Handles every transfer syntax voxseg reads: implicit/explicit little endian, explicit big
// endian, deflate, RLE, JPEG baseline/extended/lossless, JPEG-LS, JPEG 2000 (and HTJ2K), with
// frames split over any number of fragments. Values come out as stored integers after
// BitsStored/HighBit masking and sign extension; modality rescale is the caller's job
// (slope/intercept may vary per frame). Monochrome only: colour and palette images are
// kUnsupported. Errors name the file and the problem and say what to do.
//
// Ownership: a reader owns the parsed file (large values stay on disk until a frame is read).
// Thread safety: one reader per thread; different readers may decode concurrently (codec
// registration is process-wide and done once, see ensureDicomCodecsRegistered()).
#pragma once

#include "core/status.h"

#include <cstdint>
#include <memory>
#include <span>
#include <string>

namespace voxseg::io {

struct PixelFormat {
    int64_t rows = 0;
    int64_t columns = 0;
    int64_t frames = 1;
    int samples_per_pixel = 1;
    int bits_allocated = 16;
    int bits_stored = 16;
    int high_bit = 15;
    bool is_signed = false;
    std::string photometric;  // "MONOCHROME2", ...
    std::string transfer_syntax_uid;

    int64_t pixelsPerFrame() const { return rows * columns; }
};

class DicomPixelReader {
  public:
    ~DicomPixelReader();
    DicomPixelReader(DicomPixelReader&&) noexcept;
    DicomPixelReader& operator=(DicomPixelReader&&) noexcept;

    // Loads the file (header; pixel data is read lazily per frame). Monochrome images only;
    // colour is kUnsupported.
    static Result<DicomPixelReader> open(const std::string& path);
    // Same as open() for a file held in memory (fuzzing, network input). `name` is used in
    // messages. The bytes are copied.
    static Result<DicomPixelReader> fromBuffer(std::span<const uint8_t> bytes,
                                               const std::string& name);

    const PixelFormat& format() const;
    // Writes rows*columns stored values of `frame`, row-major, into `out`.
    // Frames may be read in any order; each call decodes only that frame.
    Status readFrame(int64_t frame, std::span<int32_t> out);

  private:
    struct Impl;
    explicit DicomPixelReader(std::unique_ptr<Impl> impl);
    std::unique_ptr<Impl> impl_;
};

// Registers the DCMTK decoders (RLE, JPEG, JPEG-LS) once per process; thread-safe, idempotent.
// Readers call it themselves; call it before using DCMTK decoding elsewhere in io/.
void ensureDicomCodecsRegistered();

}  // namespace voxseg::io
