#include "engine/model/model_signature.h"

#include "core/sha256.h"

#include "tests/test_data.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <nlohmann/json.hpp>

#include <fstream>

namespace voxseg::engine {
namespace {

namespace fs = std::filesystem;
using voxseg::testing::TempDir;

void writeFile(const fs::path& path, const std::string& text) {
    fs::create_directories(path.parent_path());
    std::ofstream(path, std::ios::binary) << text;
}

std::string readFile(const fs::path& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
}

// A package-shaped folder: the signature does not parse model.json, it covers its bytes.
fs::path makePackage(const TempDir& dir) {
    const fs::path folder = dir.path() / "pkg";
    writeFile(folder / "model.json", R"({"format_version": 1, "name": "demo"})");
    writeFile(folder / "fold_0.onnx", std::string(4096, '\x42'));
    writeFile(folder / "docs" / "LICENSE", "MIT\n");
    return folder;
}

struct Signed {
    fs::path folder;
    PublicKey key;
    std::vector<PublicKey> trusted;
};

Signed signedPackage(const TempDir& dir) {
    Signed s;
    s.folder = makePackage(dir);
    auto key = generateKeyPair(dir.path() / "release", "release key 2026");
    EXPECT_TRUE(key.isOk()) << key.status().toString();
    s.key = key.value();
    auto id = signModelPackage(s.folder, dir.path() / "release.key");
    EXPECT_TRUE(id.isOk()) << id.status().toString();
    EXPECT_EQ(id.value(), s.key.id());
    auto trusted = readTrustedKeys(dir.path() / "release.pub");
    EXPECT_TRUE(trusted.isOk()) << trusted.status().toString();
    s.trusted = trusted.value();
    return s;
}

TEST(ModelSignature, SignedPackageVerifiesWithEveryFileCovered) {
    TempDir dir;
    const Signed s = signedPackage(dir);
    ASSERT_EQ(s.trusted.size(), 1u);
    EXPECT_EQ(s.trusted[0].comment, "release key 2026");
    EXPECT_EQ(s.trusted[0].key, s.key.key);
    auto check = verifyModelPackage(s.folder, s.trusted);
    ASSERT_TRUE(check.isOk()) << check.status().toString();
    EXPECT_TRUE(check.value().signed_package);
    EXPECT_EQ(check.value().files, 3u);  // model.json, fold_0.onnx, docs/LICENSE
    EXPECT_EQ(check.value().key_id, s.key.id());
    EXPECT_EQ(check.value().signer, "release key 2026");
    // The secret key is private to its owner.
    struct stat st {};
    ASSERT_EQ(::stat((dir.path() / "release.key").c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0600);
}

TEST(ModelSignature, ChangedAddedOrRemovedFilesAreRefusedByName) {
    TempDir dir;
    const Signed s = signedPackage(dir);
    auto expectRefused = [&](const std::string& what) {
        auto check = verifyModelPackage(s.folder, s.trusted);
        ASSERT_FALSE(check.isOk()) << what;
        EXPECT_EQ(check.status().code(), StatusCode::kFailedPrecondition);
        EXPECT_NE(check.status().toString().find(what), std::string::npos)
            << check.status().toString();
    };
    // One byte of the network changed.
    std::string onnx = readFile(s.folder / "fold_0.onnx");
    onnx[100] ^= 1;
    writeFile(s.folder / "fold_0.onnx", onnx);
    expectRefused("fold_0.onnx was changed after signing");
    onnx[100] ^= 1;
    writeFile(s.folder / "fold_0.onnx", onnx);
    ASSERT_TRUE(verifyModelPackage(s.folder, s.trusted).isOk());

    writeFile(s.folder / "docs" / "extra.onnx", "x");
    expectRefused("docs/extra.onnx was added after signing");
    fs::remove(s.folder / "docs" / "extra.onnx");

    fs::remove(s.folder / "docs" / "LICENSE");
    expectRefused("docs/LICENSE is missing");
}

TEST(ModelSignature, AnEditedFileListDoesNotVerify) {
    // Someone changes model.json and writes its new digest into signature.json: the list then
    // matches the files, but the signature no longer matches the list.
    TempDir dir;
    const Signed s = signedPackage(dir);
    writeFile(s.folder / "model.json", R"({"format_version": 1, "name": "evil"})");
    auto doc = nlohmann::json::parse(readFile(s.folder / kSignatureFile));
    doc["files"]["model.json"] = sha256File(s.folder / "model.json").value();
    writeFile(s.folder / kSignatureFile, doc.dump());
    auto check = verifyModelPackage(s.folder, s.trusted);
    ASSERT_FALSE(check.isOk());
    EXPECT_NE(check.status().toString().find("not signed by a trusted key"), std::string::npos)
        << check.status().toString();
}

TEST(ModelSignature, AnotherKeyIsNotTrusted) {
    TempDir dir;
    const Signed s = signedPackage(dir);
    auto other = generateKeyPair(dir.path() / "other", "");
    ASSERT_TRUE(other.isOk());
    auto check = verifyModelPackage(s.folder, {other.value()});
    ASSERT_FALSE(check.isOk());
    // The message names the signing key's id so that an operator can decide to trust it.
    EXPECT_NE(check.status().toString().find(s.key.id()), std::string::npos)
        << check.status().toString();
    // With both keys trusted it verifies, by the right one.
    auto both = verifyModelPackage(s.folder, {other.value(), s.key});
    ASSERT_TRUE(both.isOk()) << both.status().toString();
    EXPECT_EQ(both.value().key_id, s.key.id());
}

TEST(ModelSignature, PolicyRefusesUnsignedOnlyWhenRequired) {
    TempDir dir;
    const fs::path folder = makePackage(dir);
    ASSERT_TRUE(generateKeyPair(dir.path() / "k", "ops").isOk());
    ModelTrustPolicy policy;
    EXPECT_EQ(checkModelTrust(folder, policy).value(), "signature not checked");
    policy.trusted_keys = dir.path() / "k.pub";
    EXPECT_EQ(checkModelTrust(folder, policy).value(), "not signed");
    policy.require_signed = true;
    auto refused = checkModelTrust(folder, policy);
    ASSERT_FALSE(refused.isOk());
    EXPECT_EQ(refused.status().code(), StatusCode::kFailedPrecondition);
    EXPECT_NE(refused.status().toString().find("voxseg model sign"), std::string::npos);
    ASSERT_TRUE(signModelPackage(folder, dir.path() / "k.key").isOk());
    auto ok = checkModelTrust(folder, policy);
    ASSERT_TRUE(ok.isOk()) << ok.status().toString();
    EXPECT_NE(ok.value().find("(ops), 3 files verified"), std::string::npos) << ok.value();
    // --require-signed without keys cannot check anything: a usage error.
    policy.trusted_keys.clear();
    EXPECT_EQ(checkModelTrust(folder, policy).status().code(), StatusCode::kInvalidArgument);
}

TEST(ModelSignature, SymbolicLinksAreRefused) {
    TempDir dir;
    const fs::path folder = makePackage(dir);
    writeFile(dir.path() / "outside.onnx", "y");
    fs::create_symlink(dir.path() / "outside.onnx", folder / "fold_1.onnx");
    ASSERT_TRUE(generateKeyPair(dir.path() / "k", "").isOk());
    auto id = signModelPackage(folder, dir.path() / "k.key");
    ASSERT_FALSE(id.isOk());
    EXPECT_NE(id.status().toString().find("symbolic link (fold_1.onnx)"), std::string::npos)
        << id.status().toString();
}

TEST(ModelSignature, BadKeyFilesAreNamed) {
    TempDir dir;
    writeFile(dir.path() / "keys.txt", "# ours\ned25519 AAAA short\n");
    auto keys = readTrustedKeys(dir.path() / "keys.txt");
    ASSERT_FALSE(keys.isOk());
    EXPECT_NE(keys.status().toString().find("line 2"), std::string::npos)
        << keys.status().toString();
    EXPECT_NE(keys.status().toString().find("keys.txt"), std::string::npos);
    // The secret key is not a trusted key, and a key is never overwritten.
    ASSERT_TRUE(generateKeyPair(dir.path() / "k", "").isOk());
    EXPECT_FALSE(readTrustedKeys(dir.path() / "k.key").isOk());
    EXPECT_EQ(generateKeyPair(dir.path() / "k", "").status().code(),
              StatusCode::kFailedPrecondition);
    const fs::path folder = makePackage(dir);
    auto id = signModelPackage(folder, dir.path() / "k.pub");
    ASSERT_FALSE(id.isOk());
    EXPECT_NE(id.status().toString().find("is not a voxseg secret key"), std::string::npos);
}

}  // namespace
}  // namespace voxseg::engine
