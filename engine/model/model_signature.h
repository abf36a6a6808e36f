// Signed model packages: Ed25519 signatures (libsodium) over every file of a package folder.
//
// A package's model.json already names its ONNX files' SHA-256 digests; a signature extends that
// to the whole folder and to who made it. `signature.json` in the package folder holds
//   {"format": "voxseg-model-signature/1", "key_id": "<16 hex>",
//    "files": {"model.json": "<sha256>", "fold_0.onnx": "<sha256>", ...},
//    "signature": "<base64 Ed25519 over the canonical message>"}
// where the canonical message is "voxseg-model-signature/1\n" followed by "<sha256>  <path>\n"
// per file in byte order of the relative paths ('/'-separated). Every regular file under the
// folder except signature.json is covered: a file added, removed or changed after signing makes
// verification fail, naming the file. Symbolic links are refused (they could point outside).
//
// Keys: a trusted-keys file holds one public key per line, "ed25519 <base64 32 bytes> [comment]";
// '#' starts a comment line. A secret key file holds "voxseg-ed25519-secret <base64 64 bytes>".
// key_id = the first 8 bytes (16 hex) of SHA-256 of the public key, printed in every message so
// an operator can tell keys apart without printing them.
//
// Thread-safe (libsodium is initialised once).
#pragma once

#include "core/status.h"

#include <filesystem>
#include <string>
#include <vector>

namespace voxseg::engine {

inline constexpr const char* kSignatureFile = "signature.json";

struct PublicKey {
    std::string key;         // 32 raw bytes
    std::string comment;     // free text after the key ("release key 2026")
    std::string id() const;  // 16 hex
};

// Parses a trusted-keys file; a malformed line is an error naming the file and line.
Result<std::vector<PublicKey>> readTrustedKeys(const std::filesystem::path& file);

// Writes a new key pair: <stem>.key (secret, mode 0600, refused if it exists) and <stem>.pub
// (one trusted-keys line). Returns the public key.
Result<PublicKey> generateKeyPair(const std::filesystem::path& stem, const std::string& comment);

// Signs every file of `folder` with the secret key in `secret_key_file`; writes signature.json
// (temporary name, fsync, rename). Returns the key id.
Result<std::string> signModelPackage(const std::filesystem::path& folder,
                                     const std::filesystem::path& secret_key_file);

struct SignatureCheck {
    bool signed_package = false;  // signature.json exists
    std::string key_id;           // of the signature (empty when unsigned)
    std::string signer;           // comment of the trusted key that verified it
    size_t files = 0;             // files covered
};

// Verifies the package against `trusted`. An unsigned package returns signed_package = false
// (the caller decides whether that is acceptable); a signature by an unknown key, a bad
// signature, a changed, missing or added file is kFailedPrecondition naming the package and what
// is wrong.
Result<SignatureCheck> verifyModelPackage(const std::filesystem::path& folder,
                                          const std::vector<PublicKey>& trusted);

// What segment, batch and serve ask for (their --require-signed / --trusted-keys).
struct ModelTrustPolicy {
    bool require_signed = false;
    std::filesystem::path trusted_keys;  // empty: signatures are not checked
    bool active() const { return require_signed || !trusted_keys.empty(); }
};

// Applies the policy: with trusted keys, a signed package must verify; with require_signed, an
// unsigned one is refused (kFailedPrecondition, saying how to sign it) and trusted keys are
// required (kInvalidArgument without them). Returns a one-line summary
// for the log and run.json ("signed by <id> (<comment>), 3 files verified" / "not signed").
Result<std::string> checkModelTrust(const std::filesystem::path& folder,
                                    const ModelTrustPolicy& policy);

}  // namespace voxseg::engine
