// libFuzzer target for the DICOM header + pixel reader and its codecs (native, deflate, RLE,
// JPEG, JPEG-LS, JPEG 2000): the input is written to a file and read with
// DicomPixelReader::open(), the entry point real files take (DCMTK checks element lengths
// against the file size there, which an in-memory stream does not), then the first four frames
// and the last are decoded. Frames above 2^22 pixels are opened but not decoded, so the fuzzer
// explores parsing instead of spending its memory limit on legitimately huge (valid) frames.
#include "io/dicom_pixels.h"
#include "tests/fuzz/fuzz_support.h"

#include <algorithm>
#include <cstdint>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    voxseg::fuzz::quietLogs();
    auto reader =
        voxseg::io::DicomPixelReader::open(voxseg::fuzz::writeInputFile(data, size, "input.dcm"));
    if (!reader.isOk()) return 0;
    const auto& format = reader->format();
    if (format.pixelsPerFrame() > (int64_t{1} << 22)) return 0;
    std::vector<int32_t> out(static_cast<size_t>(format.pixelsPerFrame()));
    for (int64_t frame = 0; frame < std::min<int64_t>(format.frames, 4); ++frame)
        (void)reader->readFrame(frame, out);
    (void)reader->readFrame(format.frames - 1, out);
    return 0;
}
