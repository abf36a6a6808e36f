#include "node/spool_crypto.h"

#include "core/atomic_file.h"

#include <sodium.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

namespace voxseg::node {
namespace {

constexpr std::string_view kMagic = "VXSEGENC1\n";
constexpr size_t kChunk = 64 * 1024;

bool sodiumReady() {
    static const bool ok = sodium_init() >= 0;
    return ok;
}

}  // namespace

Result<SpoolKey> loadSpoolKey(const std::string& path) {
    VOXSEG_ASSIGN_OR_RETURN(std::string raw, readFileBytes(path, "the spool key"));
    SpoolKey key;
    std::string hex = raw;
    while (!hex.empty() && (hex.back() == '\n' || hex.back() == '\r' || hex.back() == ' '))
        hex.pop_back();
    size_t bin_len = 0;
    if (hex.size() == 64 &&
        sodium_hex2bin(key.bytes.data(), key.bytes.size(), hex.data(), hex.size(), nullptr,
                       &bin_len, nullptr) == 0 &&
        bin_len == 32)
        return key;
    if (raw.size() == 32) {
        std::memcpy(key.bytes.data(), raw.data(), 32);
        return key;
    }
    return invalidArgument(
        "spool key must be 32 bytes, or 64 hex digits (e.g. `openssl rand -hex 32`)", path);
}

bool isEncrypted(std::string_view bytes) { return bytes.substr(0, kMagic.size()) == kMagic; }

std::string encryptBytes(const SpoolKey& key, std::string_view plain) {
    if (!sodiumReady()) return {};
    crypto_secretstream_xchacha20poly1305_state st;
    unsigned char header[crypto_secretstream_xchacha20poly1305_HEADERBYTES];
    crypto_secretstream_xchacha20poly1305_init_push(&st, header, key.bytes.data());
    std::string out(kMagic);
    out.append(reinterpret_cast<const char*>(header), sizeof header);
    size_t pos = 0;
    do {
        const size_t n = std::min(kChunk, plain.size() - pos);
        const bool last = pos + n == plain.size();
        std::string c(n + crypto_secretstream_xchacha20poly1305_ABYTES, '\0');
        unsigned long long clen = 0;
        crypto_secretstream_xchacha20poly1305_push(
            &st, reinterpret_cast<unsigned char*>(c.data()), &clen,
            reinterpret_cast<const unsigned char*>(plain.data() + pos), n, nullptr, 0,
            last ? crypto_secretstream_xchacha20poly1305_TAG_FINAL : 0);
        out.append(c.data(), clen);
        pos += n;
    } while (pos < plain.size());
    return out;
}

Result<std::string> decryptBytes(const SpoolKey& key, std::string_view c) {
    if (!sodiumReady()) return internalError("libsodium could not be initialised");
    constexpr size_t kHeader = crypto_secretstream_xchacha20poly1305_HEADERBYTES;
    constexpr size_t kAbytes = crypto_secretstream_xchacha20poly1305_ABYTES;
    if (!isEncrypted(c) || c.size() < kMagic.size() + kHeader)
        return corruptData("not an encrypted spool file");
    crypto_secretstream_xchacha20poly1305_state st;
    if (crypto_secretstream_xchacha20poly1305_init_pull(
            &st, reinterpret_cast<const unsigned char*>(c.data() + kMagic.size()),
            key.bytes.data()) != 0)
        return corruptData("bad encryption header");
    std::string out;
    size_t pos = kMagic.size() + kHeader;
    unsigned char tag = 0;
    while (pos < c.size()) {
        const size_t n = std::min(kChunk + kAbytes, c.size() - pos);
        std::string m(n, '\0');
        unsigned long long mlen = 0;
        if (crypto_secretstream_xchacha20poly1305_pull(
                &st, reinterpret_cast<unsigned char*>(m.data()), &mlen, &tag,
                reinterpret_cast<const unsigned char*>(c.data() + pos), n, nullptr, 0) != 0)
            return corruptData("spool file altered, or encrypted with another key");
        out.append(m.data(), mlen);
        pos += n;
        if (tag == crypto_secretstream_xchacha20poly1305_TAG_FINAL) break;
    }
    if (tag != crypto_secretstream_xchacha20poly1305_TAG_FINAL || pos != c.size())
        return corruptData("spool file truncated");
    return out;
}

Status writeEncryptedFile(const SpoolKey& key, const std::string& path, std::string_view plain) {
    return writeFileAtomically(path, encryptBytes(key, plain));
}

Result<MemoryFile> MemoryFile::create(const std::string& name, std::string_view bytes) {
    MemoryFile f;
    f.fd_ = ::memfd_create(name.c_str(), MFD_CLOEXEC);
    if (f.fd_ < 0) return ioError(std::string("memfd_create: ") + std::strerror(errno), name);
    if (const int err = writeAllBytes(f.fd_, bytes.data(), bytes.size()))
        return ioError(std::string("memory file: ") + std::strerror(err), name);
    return f;
}

MemoryFile::MemoryFile(MemoryFile&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
MemoryFile& MemoryFile::operator=(MemoryFile&& o) noexcept {
    if (this != &o) {
        if (fd_ >= 0) ::close(fd_);
        fd_ = o.fd_;
        o.fd_ = -1;
    }
    return *this;
}
MemoryFile::~MemoryFile() {
    if (fd_ >= 0) ::close(fd_);
}

Result<std::string> MemoryFile::contents() const { return readFileBytes(path()); }

}  // namespace voxseg::node
