// Encryption at rest of the patient data in the spool (received instances, result files):
// libsodium's secretstream (XChaCha20-Poly1305, 64 KiB authenticated chunks, the last one
// tagged final, so truncation and tampering are detected). Key: 32 bytes from spool_key_file,
// raw or as 64 hex digits. File layout: "VXSEGENC1\n", the 24-byte stream header, the chunks.
//
// Plaintext only ever lives in memory: memory files (memfd) for DCMTK and the senders, and a
// private folder on /dev/shm while a series is segmented. Plain functions: thread-safe.
#pragma once

#include "core/file_io.h"  // readFileBytes, used with the spool files
#include "core/status.h"

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace voxseg::node {

struct SpoolKey {
    std::array<unsigned char, 32> bytes{};
};

Result<SpoolKey> loadSpoolKey(const std::string& path);
std::string encryptBytes(const SpoolKey& key, std::string_view plaintext);
// kCorruptData when the file is not ours, was truncated or altered, or the key is wrong.
Result<std::string> decryptBytes(const SpoolKey& key, std::string_view ciphertext);
bool isEncrypted(std::string_view bytes);

// Encrypts and writes through an AtomicFile (temporary name, fsync, rename).
Status writeEncryptedFile(const SpoolKey& key, const std::string& path, std::string_view plain);

// An anonymous in-memory file holding `bytes`, open until destroyed; path() is
// "/proc/self/fd/<n>", for libraries that want a file name.
class MemoryFile {
  public:
    static Result<MemoryFile> create(const std::string& name, std::string_view bytes);
    MemoryFile() = default;
    MemoryFile(MemoryFile&& other) noexcept;
    MemoryFile& operator=(MemoryFile&& other) noexcept;
    ~MemoryFile();
    std::string path() const { return "/proc/self/fd/" + std::to_string(fd_); }
    Result<std::string> contents() const;
    int fd() const { return fd_; }

  private:
    int fd_ = -1;
};

}  // namespace voxseg::node
