// Spool encryption (libsodium secretstream): round trip over chunk boundaries, and every way a
// file can be wrong (another key, a flipped byte, truncation, not ours) is an error.
#include "node/spool_crypto.h"

#include "tests/test_data.h"

#include <gtest/gtest.h>

#include <fstream>
#include <random>

namespace voxseg::node {
namespace {

SpoolKey key(unsigned char seed) {
    SpoolKey k;
    for (size_t i = 0; i < k.bytes.size(); ++i) k.bytes[i] = static_cast<unsigned char>(seed + i);
    return k;
}

TEST(SpoolCrypto, RoundTripsAnySize) {
    std::mt19937 rng(7);
    for (size_t n : {size_t{0}, size_t{1}, size_t{65536}, size_t{65537}, size_t{300000}}) {
        std::string plain(n, '\0');
        for (auto& c : plain) c = static_cast<char>(rng());
        const std::string c = encryptBytes(key(1), plain);
        EXPECT_TRUE(isEncrypted(c));
        auto back = decryptBytes(key(1), c);
        ASSERT_TRUE(back.isOk()) << n << ": " << back.status().toString();
        EXPECT_EQ(*back, plain) << n;
    }
}

TEST(SpoolCrypto, WrongKeyTamperingAndTruncationAreErrors) {
    const std::string plain(200000, 'x');
    const std::string c = encryptBytes(key(1), plain);
    EXPECT_FALSE(decryptBytes(key(2), c).isOk());
    std::string flipped = c;
    flipped[flipped.size() / 2] ^= 1;
    EXPECT_FALSE(decryptBytes(key(1), flipped).isOk());
    // Cut at a chunk boundary: every remaining chunk authenticates, the final tag is missing.
    EXPECT_FALSE(decryptBytes(key(1), c.substr(0, 10 + 24 + 65536 + 17)).isOk());
    EXPECT_FALSE(decryptBytes(key(1), c.substr(0, c.size() - 1)).isOk());
    EXPECT_FALSE(decryptBytes(key(1), "DICM plain file").isOk());
    // The plaintext does not appear in the ciphertext.
    const std::string name = "ZZTESTPATIENT^VOXSEG";
    EXPECT_EQ(encryptBytes(key(1), "header " + name + " trailer").find(name), std::string::npos);
}

TEST(SpoolCrypto, KeysFromHexOrRawFiles) {
    testing::TempDir dir;
    std::ofstream(dir / "hex.key") << std::string(64, 'a') << "\n";
    auto hex = loadSpoolKey(dir / "hex.key");
    ASSERT_TRUE(hex.isOk()) << hex.status().toString();
    EXPECT_EQ(hex->bytes[0], 0xaa);
    std::ofstream(dir / "raw.key", std::ios::binary) << std::string(32, '\x07');
    auto raw = loadSpoolKey(dir / "raw.key");
    ASSERT_TRUE(raw.isOk());
    EXPECT_EQ(raw->bytes[31], 7);
    std::ofstream(dir / "short.key") << "abc";
    auto bad = loadSpoolKey(dir / "short.key");
    ASSERT_FALSE(bad.isOk());
    EXPECT_NE(bad.status().toString().find("openssl rand -hex 32"), std::string::npos);
    auto mem = MemoryFile::create("t", "in memory");
    ASSERT_TRUE(mem.isOk());
    EXPECT_EQ(*mem->contents(), "in memory");
}

}  // namespace
}  // namespace voxseg::node
