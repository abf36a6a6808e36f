// Decoding the pixel data of one DICOM object (DCMTK; JPEG 2000 through OpenJPEG).
//
// Handles every transfer syntax voxseg reads: implicit/explicit little endian, explicit big
// endian, deflate, RLE, JPEG baseline/extended/lossless, JPEG-LS, JPEG 2000, with frames split
// over any number of fragments. Values come out as stored integers after BitsStored/HighBit
// masking and sign extension; modality rescale is the caller's job (slope/intercept may vary per
// frame). Errors name the file and the problem. One reader per thread.
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
};

class DicomPixelReader {
  public:
    ~DicomPixelReader();
    DicomPixelReader(DicomPixelReader&&) noexcept;
    DicomPixelReader& operator=(DicomPixelReader&&) noexcept;

    // Loads the file (header and pixel data). Monochrome images only; colour is kUnsupported.
    static Result<DicomPixelReader> open(const std::string& path);

    const PixelFormat& format() const;
    // Writes rows*columns stored values of `frame`, row-major, into `out`.
    Status readFrame(int64_t frame, std::span<int32_t> out);

  private:
    struct Impl;
    explicit DicomPixelReader(std::unique_ptr<Impl> impl);
    std::unique_ptr<Impl> impl_;
};

}  // namespace voxseg::io
