#include "tests/fuzz/fuzz_support.h"

#include "core/log.h"

#include <dcmtk/config/osconfig.h>
#include <dcmtk/oflog/oflog.h>

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>

namespace voxseg::fuzz {

namespace fs = std::filesystem;

void quietLogs() {
    static const bool done = [] {
        OFLog::configure(OFLogger::FATAL_LOG_LEVEL);
        log::setSink(nullptr);
        return true;
    }();
    (void)done;
}

const std::string& scratchDir() {
    // Never destroyed: the exit handler that removes the folder runs after static destructors.
    static const std::string* dir = [] {
        const fs::path base =
            fs::exists("/dev/shm") ? fs::path("/dev/shm") : fs::temp_directory_path();
        const fs::path d = base / ("voxseg-fuzz-" + std::to_string(::getpid()));
        std::error_code ec;
        fs::create_directories(d, ec);
        if (ec) std::abort();
        std::atexit([] {
            std::error_code ignored;
            fs::remove_all(scratchDir(), ignored);
        });
        return new std::string(d.string());
    }();
    return *dir;
}

std::string writeInputFile(const uint8_t* data, size_t size, const std::string& file_name) {
    const std::string path = scratchDir() + "/" + file_name;
    FILE* f = std::fopen(path.c_str(), "wb");
    if (f == nullptr) std::abort();
    if (size > 0 && std::fwrite(data, 1, size, f) != size) std::abort();
    if (std::fclose(f) != 0) std::abort();
    return path;
}

std::string seedDir() {
    const char* dir = std::getenv("VOXSEG_FUZZ_SEED_DIR");
    return dir != nullptr ? std::string(dir) : std::string();
}

}  // namespace voxseg::fuzz
