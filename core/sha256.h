// SHA-256 (FIPS 180-4) of byte buffers and files: model package checks (model.json names its
// ONNX files' digests) and run.json's digest of the input files.
//
// sha256Hex / sha256File hash with OpenSSL (libcrypto's EVP, SHA-NI where the CPU has it: about
// 2 GB/s here) when the build found it, which every build with DCMTK does (libdcmtk-dev depends
// on libssl-dev). Sha256 below is the portable reference (about 100 lines, FIPS vectors, 300
// MB/s): what an engine-only build without OpenSSL hashes with, and the oracle the OpenSSL path
// is tested against. Pure functions: thread-safe.
#pragma once

#include "core/status.h"

#include <array>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

namespace voxseg {

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
// The same with the portable Sha256 whatever the build (tests compare the two).
std::string sha256HexPortable(std::string_view bytes);
// Streams the file; kNotFound / kIoError name the path.
Result<std::string> sha256File(const std::filesystem::path& path);

}  // namespace voxseg
