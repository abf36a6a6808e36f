#include "core/sha256.h"

#include "tests/test_data.h"

#include <gtest/gtest.h>

#include <fstream>
#include <random>

namespace voxseg {
namespace {

// FIPS 180-2 appendix B vectors (also `printf ... | sha256sum`).
TEST(Sha256, FipsVectors) {
    EXPECT_EQ(sha256Hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    EXPECT_EQ(sha256Hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    EXPECT_EQ(sha256Hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
              "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    EXPECT_EQ(sha256Hex(std::string(1000000, 'a')),
              "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
    // 55/56/64 bytes: the padding edge cases (length field in the same or the next block);
    // expected values from Python's hashlib.sha256.
    EXPECT_EQ(sha256Hex(std::string(55, 'x')),
              "d5e285683cd4efc02d021a5c62014694958901005d6f71e89e0989fac77e4072");
    EXPECT_EQ(sha256Hex(std::string(56, 'y')),
              "4877e564e5e36e367c7c8d59670774becd3350610b6df4c399c9fa9b66da5813");
    EXPECT_EQ(sha256Hex(std::string(64, 'z')),
              "72996563049cc84daa2c3f31fd5c3d10770e69d6ebbb8da5b6d76db303dbae43");
}

TEST(Sha256, ChunkedUpdatesMatchOneShot) {
    std::mt19937 rng(1);
    std::string data(10007, '\0');
    for (char& c : data) c = static_cast<char>(rng());
    const std::string expected = sha256Hex(data);
    for (size_t chunk : {1u, 3u, 63u, 64u, 65u, 1000u}) {
        Sha256 h;
        for (size_t i = 0; i < data.size(); i += chunk)
            h.update(data.data() + i, std::min(chunk, data.size() - i));
        EXPECT_EQ(toHex(h.finish()), expected) << "chunk " << chunk;
    }
}

TEST(Sha256, LibraryPathAgreesWithThePortableReference) {
    // sha256Hex is OpenSSL's EVP in builds that have it; the portable class is the reference.
    std::mt19937 rng(7);
    for (size_t size : {0u, 1u, 55u, 56u, 63u, 64u, 65u, 1000u, 10007u, 3u << 20}) {
        std::string data(size, '\0');
        for (char& c : data) c = static_cast<char>(rng());
        EXPECT_EQ(sha256Hex(data), sha256HexPortable(data)) << size << " bytes";
    }
}

TEST(Sha256, FileMatchesBytesAndMissingFileIsNotFound) {
    voxseg::testing::TempDir dir;
    const std::string path = dir / "blob.bin";
    std::string data(3 << 20, 'q');  // larger than the 1 MiB read chunk
    data[12345] = 'z';
    std::ofstream(path, std::ios::binary) << data;
    auto h = sha256File(path);
    ASSERT_TRUE(h.isOk()) << h.status().toString();
    EXPECT_EQ(*h, sha256Hex(data));
    auto missing = sha256File(dir / "nope.onnx");
    EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
    EXPECT_EQ(missing.status().subject(), dir / "nope.onnx");
}

}  // namespace
}  // namespace voxseg
