// SHA-256 (FIPS 180-4) of byte buffers and files, used to check that a model package's ONNX
// files are the ones its model.json names.
//
// Written here (about 100 lines, tested against the FIPS vectors and Python's hashlib) rather than
// taken from OpenSSL so that the engine-only build (GPU machines without ITK/DCMTK) gains no
// dependency; it hashes about 300 MB/s, once per model load. Pure functions: thread-safe.
#pragma once

#include "core/status.h"

#include <array>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

namespace voxseg::engine {

class Sha256 {
  public:
    Sha256();
    void update(const void* data, size_t size);
    // Finishes the hash; the object must not be updated afterwards.
    std::array<uint8_t, 32> finish();

  private:
    void block(const uint8_t* p);
    std::array<uint32_t, 8> h_;
    std::array<uint8_t, 64> buffer_{};
    size_t buffered_ = 0;
    uint64_t total_bytes_ = 0;
};

// Lower-case hex of 32 bytes (64 characters).
std::string toHex(const std::array<uint8_t, 32>& digest);
std::string sha256Hex(std::string_view bytes);
// Streams the file; kNotFound / kIoError name the path.
Result<std::string> sha256File(const std::filesystem::path& path);

}  // namespace voxseg::engine
