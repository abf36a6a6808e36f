#include "engine/model/model_signature.h"

#include "core/atomic_file.h"
#include "core/file_io.h"
#include "core/sha256.h"

#include <fmt/format.h>
#include <sodium.h>
#include <sys/stat.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <fstream>
#include <map>
#include <sstream>

namespace voxseg::engine {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

constexpr const char* kFormat = "voxseg-model-signature/1";
constexpr const char* kSecretTag = "voxseg-ed25519-secret";

Status initSodium() {
    static const int rc = sodium_init();  // thread-safe, idempotent
    if (rc < 0) return Status(StatusCode::kInternal, "libsodium failed to initialise");
    return Status::ok();
}

std::string toBase64(const std::string& bytes) {
    std::string out(sodium_base64_ENCODED_LEN(bytes.size(), sodium_base64_VARIANT_ORIGINAL), '\0');
    sodium_bin2base64(out.data(), out.size(), reinterpret_cast<const unsigned char*>(bytes.data()),
                      bytes.size(), sodium_base64_VARIANT_ORIGINAL);
    out.resize(out.size() - 1);  // the terminating NUL
    return out;
}

// Decodes base64 that must hold exactly `size` bytes.
bool fromBase64(const std::string& text, size_t size, std::string& out) {
    out.assign(size, '\0');
    size_t length = 0;
    const int rc =
        sodium_base642bin(reinterpret_cast<unsigned char*>(out.data()), out.size(), text.data(),
                          text.size(), nullptr, &length, nullptr, sodium_base64_VARIANT_ORIGINAL);
    return rc == 0 && length == size;
}

// Relative path -> SHA-256 of every regular file under `folder` except signature.json.
Result<std::map<std::string, std::string>> hashFolder(const fs::path& folder) {
    std::error_code ec;
    if (!fs::is_directory(folder, ec))
        return Status(StatusCode::kNotFound, "model package folder does not exist",
                      folder.string());
    std::map<std::string, std::string> digests;
    for (fs::recursive_directory_iterator it(folder, ec), end; !ec && it != end; it.increment(ec)) {
        const fs::path rel = it->path().lexically_relative(folder);
        if (it->is_symlink())
            return Status(StatusCode::kFailedPrecondition,
                          "holds a symbolic link (" + rel.generic_string() +
                              "): signed packages must hold plain files; copy the target in",
                          folder.string());
        if (it->is_directory()) continue;
        if (!it->is_regular_file())
            return Status(StatusCode::kFailedPrecondition,
                          "holds " + rel.generic_string() + ", which is not a regular file",
                          folder.string());
        if (rel == kSignatureFile) continue;
        VOXSEG_ASSIGN_OR_RETURN(std::string digest, sha256File(it->path()));
        digests.emplace(rel.generic_string(), std::move(digest));
    }
    if (ec) return Status(StatusCode::kIoError, "cannot list: " + ec.message(), folder.string());
    return digests;
}

std::string canonicalMessage(const std::map<std::string, std::string>& digests) {
    std::string message = std::string(kFormat) + "\n";
    for (const auto& [path, digest] : digests) message += digest + "  " + path + "\n";
    return message;
}

Result<std::string> readSecretKey(const fs::path& file) {
    VOXSEG_ASSIGN_OR_RETURN(std::string text, readFileBytes(file.string()));
    std::istringstream in(text);
    std::string tag, encoded, key;
    in >> tag >> encoded;
    if (tag != kSecretTag || !fromBase64(encoded, crypto_sign_SECRETKEYBYTES, key))
        return Status(StatusCode::kInvalidArgument,
                      "is not a voxseg secret key (expected \"" + std::string(kSecretTag) +
                          " <base64>\", as `voxseg model keygen` writes)",
                      file.string());
    return key;
}

Status failCheck(const fs::path& folder, const std::string& what) {
    return Status(StatusCode::kFailedPrecondition, "signature check failed: " + what,
                  folder.string());
}

}  // namespace

std::string PublicKey::id() const { return sha256Hex(key).substr(0, 16); }

Result<std::vector<PublicKey>> readTrustedKeys(const fs::path& file) {
    VOXSEG_RETURN_IF_ERROR(initSodium());
    VOXSEG_ASSIGN_OR_RETURN(std::string text, readFileBytes(file.string()));
    std::vector<PublicKey> keys;
    std::istringstream in(text);
    std::string line;
    for (int number = 1; std::getline(in, line); ++number) {
        const auto first = line.find_first_not_of(" \t\r");
        if (first == std::string::npos || line[first] == '#') continue;
        std::istringstream fields(line);
        std::string algorithm, encoded;
        fields >> algorithm >> encoded;
        PublicKey key;
        if (algorithm != "ed25519" || !fromBase64(encoded, crypto_sign_PUBLICKEYBYTES, key.key))
            return Status(StatusCode::kInvalidArgument,
                          fmt::format("line {}: expected \"ed25519 <base64 public key> "
                                      "[comment]\" (a line of a .pub file from `voxseg model "
                                      "keygen`)",
                                      number),
                          file.string());
        std::getline(fields, key.comment);
        key.comment.erase(0, key.comment.find_first_not_of(" \t"));
        while (!key.comment.empty() && (key.comment.back() == '\r' || key.comment.back() == ' '))
            key.comment.pop_back();
        keys.push_back(std::move(key));
    }
    if (keys.empty())
        return Status(StatusCode::kInvalidArgument, "holds no trusted key", file.string());
    return keys;
}

Result<PublicKey> generateKeyPair(const fs::path& stem, const std::string& comment) {
    VOXSEG_RETURN_IF_ERROR(initSodium());
    const fs::path secret_file = fs::path(stem.string() + ".key");
    const fs::path public_file = fs::path(stem.string() + ".pub");
    std::error_code ec;
    for (const auto& f : {secret_file, public_file})
        if (fs::exists(f, ec))
            return Status(StatusCode::kFailedPrecondition,
                          "exists already: voxseg never overwrites a key; choose another name",
                          f.string());
    PublicKey key;
    key.key.assign(crypto_sign_PUBLICKEYBYTES, '\0');
    key.comment = comment;
    std::string secret(crypto_sign_SECRETKEYBYTES, '\0');
    crypto_sign_keypair(reinterpret_cast<unsigned char*>(key.key.data()),
                        reinterpret_cast<unsigned char*>(secret.data()));
    {
        AtomicFile out(secret_file.string());
        VOXSEG_RETURN_IF_ERROR(out.checkWritable());
        {
            std::ofstream f(out.tempPath(), std::ios::binary);
            f << kSecretTag << ' ' << toBase64(secret) << '\n';
            if (!f.flush())
                return Status(StatusCode::kIoError, "cannot write the key", secret_file.string());
        }
        sodium_memzero(secret.data(), secret.size());
        if (::chmod(out.tempPath().c_str(), 0600) != 0)
            return Status(StatusCode::kIoError, "cannot make the key private (chmod 600)",
                          secret_file.string());
        VOXSEG_RETURN_IF_ERROR(out.commit());
    }
    std::string line = "ed25519 " + toBase64(key.key);
    if (!comment.empty()) line += " " + comment;
    VOXSEG_RETURN_IF_ERROR(writeFileAtomically(public_file.string(), line + "\n"));
    return key;
}

Result<std::string> signModelPackage(const fs::path& folder, const fs::path& secret_key_file) {
    VOXSEG_RETURN_IF_ERROR(initSodium());
    VOXSEG_ASSIGN_OR_RETURN(std::string secret, readSecretKey(secret_key_file));
    VOXSEG_ASSIGN_OR_RETURN(auto digests, hashFolder(folder));
    if (!digests.count("model.json"))
        return Status(StatusCode::kNotFound, "has no model.json: not a model package",
                      folder.string());
    const std::string message = canonicalMessage(digests);
    std::string signature(crypto_sign_BYTES, '\0');
    crypto_sign_detached(reinterpret_cast<unsigned char*>(signature.data()), nullptr,
                         reinterpret_cast<const unsigned char*>(message.data()), message.size(),
                         reinterpret_cast<const unsigned char*>(secret.data()));
    PublicKey key;
    key.key.assign(crypto_sign_PUBLICKEYBYTES, '\0');
    crypto_sign_ed25519_sk_to_pk(reinterpret_cast<unsigned char*>(key.key.data()),
                                 reinterpret_cast<const unsigned char*>(secret.data()));
    sodium_memzero(secret.data(), secret.size());
    json doc = {{"format", kFormat},
                {"key_id", key.id()},
                {"files", digests},
                {"signature", toBase64(signature)}};
    VOXSEG_RETURN_IF_ERROR(
        writeFileAtomically((folder / kSignatureFile).string(), doc.dump(2) + "\n"));
    return key.id();
}

Result<SignatureCheck> verifyModelPackage(const fs::path& folder,
                                          const std::vector<PublicKey>& trusted) {
    VOXSEG_RETURN_IF_ERROR(initSodium());
    SignatureCheck check;
    std::error_code ec;
    const fs::path sig_file = folder / kSignatureFile;
    if (!fs::exists(sig_file, ec)) return check;
    check.signed_package = true;
    VOXSEG_ASSIGN_OR_RETURN(std::string text, readFileBytes(sig_file.string()));
    json doc = json::parse(text, nullptr, false);
    std::string signature;
    if (!doc.is_object() || doc.value("format", "") != kFormat || !doc.contains("files") ||
        !doc["files"].is_object() || !doc.contains("signature") || !doc["signature"].is_string() ||
        !fromBase64(doc["signature"].get<std::string>(), crypto_sign_BYTES, signature))
        return failCheck(folder, std::string(kSignatureFile) + " is malformed (expected " +
                                     kFormat + " as `voxseg model sign` writes)");
    check.key_id = doc.value("key_id", "");

    // The files now against the files signed: names first, then digests.
    VOXSEG_ASSIGN_OR_RETURN(auto digests, hashFolder(folder));
    std::map<std::string, std::string> listed;
    for (const auto& [path, digest] : doc["files"].items()) {
        if (!digest.is_string()) return failCheck(folder, "entry " + path + " is not a digest");
        listed.emplace(path, digest.get<std::string>());
    }
    for (const auto& [path, digest] : digests)
        if (!listed.count(path))
            return failCheck(folder, path + " was added after signing (remove it or re-sign)");
    for (const auto& [path, digest] : listed) {
        const auto it = digests.find(path);
        if (it == digests.end()) return failCheck(folder, path + " is missing");
        if (it->second != digest) return failCheck(folder, path + " was changed after signing");
    }

    const std::string message = canonicalMessage(listed);
    for (const auto& key : trusted) {
        if (crypto_sign_verify_detached(
                reinterpret_cast<const unsigned char*>(signature.data()),
                reinterpret_cast<const unsigned char*>(message.data()), message.size(),
                reinterpret_cast<const unsigned char*>(key.key.data())) == 0) {
            check.key_id = key.id();
            check.signer = key.comment;
            check.files = listed.size();
            return check;
        }
    }
    return failCheck(folder, "not signed by a trusted key (signature key id " +
                                 (check.key_id.empty() ? std::string("unknown") : check.key_id) +
                                 "; add its .pub line to the trusted-keys file if you trust it)");
}

Result<std::string> checkModelTrust(const fs::path& folder, const ModelTrustPolicy& policy) {
    if (policy.trusted_keys.empty()) {
        if (policy.require_signed)
            return Status(StatusCode::kInvalidArgument,
                          "--require-signed needs --trusted-keys FILE (the public keys you trust)");
        return std::string("signature not checked");
    }
    VOXSEG_ASSIGN_OR_RETURN(auto keys, readTrustedKeys(policy.trusted_keys));
    VOXSEG_ASSIGN_OR_RETURN(SignatureCheck check, verifyModelPackage(folder, keys));
    if (!check.signed_package) {
        if (policy.require_signed)
            return Status(StatusCode::kFailedPrecondition,
                          "is not signed and --require-signed is set: sign it with `voxseg "
                          "model sign " +
                              folder.string() + " --key <name>.key`",
                          folder.string());
        return std::string("not signed");
    }
    std::string summary = "signed by key " + check.key_id;
    if (!check.signer.empty()) summary += " (" + check.signer + ")";
    return summary + fmt::format(", {} files verified", check.files);
}

}  // namespace voxseg::engine
