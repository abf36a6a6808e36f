// libFuzzer target for the DICOM header + pixel reader: the input is written to a file in /dev/shm
// (or $TMPDIR) and read with DicomPixelReader::open(), the entry point real files take (DCMTK
// checks element lengths against the file size there, which an in-memory stream does not), then
// up to five frames are decoded. Built only with -DVOXSEG_FUZZ=ON and clang; ctest runs it briefly
// on a seed corpus of small files from ../shared/data (scripts/fuzz-short.sh).
#include "core/log.h"
#include "io/dicom_pixels.h"

#include <dcmtk/config/osconfig.h>
#include <dcmtk/oflog/oflog.h>

#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

namespace {

// Frames above this many pixels are opened but not decoded, so the fuzzer explores parsing
// instead of spending its memory limit on legitimately huge (and valid) frames.
constexpr int64_t kMaxFuzzPixels = int64_t{1} << 22;

bool quiet() {
    OFLog::configure(OFLogger::FATAL_LOG_LEVEL);
    voxseg::log::setSink(nullptr);
    return true;
}

std::string scratchPath() {
    const std::filesystem::path dir =
        std::filesystem::exists("/dev/shm") ? "/dev/shm" : std::filesystem::temp_directory_path();
    return (dir / ("voxseg-fuzz-" + std::to_string(::getpid()) + ".dcm")).string();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    static const bool initialised = quiet();
    (void)initialised;
    static const std::string path = scratchPath();
    {
        FILE* f = std::fopen(path.c_str(), "wb");
        if (f == nullptr) std::abort();  // the harness, not the code under test, failed
        if (size > 0 && std::fwrite(data, 1, size, f) != size) std::abort();
        std::fclose(f);
    }
    auto reader = voxseg::io::DicomPixelReader::open(path);
    if (!reader.isOk()) return 0;
    const auto& format = reader->format();
    if (format.pixelsPerFrame() > kMaxFuzzPixels) return 0;
    std::vector<int32_t> out(static_cast<size_t>(format.pixelsPerFrame()));
    for (int64_t frame = 0; frame < std::min<int64_t>(format.frames, 4); ++frame)
        (void)reader->readFrame(frame, out);
    (void)reader->readFrame(format.frames - 1, out);
    return 0;
}
