// Helpers for tests: locating ../shared/data (tests labelled "data" skip when it is absent) and
// per-test temporary folders (tests never write anywhere else).
#pragma once

#include <gtest/gtest.h>

#include <unistd.h>
#include <filesystem>
#include <string>

namespace voxseg::testing {

inline std::filesystem::path sharedData(const std::string& relative = {}) {
    const char* env = std::getenv("VOXSEG_SHARED_DATA");
    std::filesystem::path root = env ? env : VOXSEG_SHARED_DATA_DIR;
    return relative.empty() ? root : root / relative;
}

// Usage: VOXSEG_REQUIRE_DATA("dcm_qa_ge/05_3D_Ax_T1_MP_RAGE_R22");
#define VOXSEG_REQUIRE_DATA(rel)                                                       \
    do {                                                                               \
        if (!std::filesystem::exists(::voxseg::testing::sharedData(rel)))              \
            GTEST_SKIP() << "test data absent: " << ::voxseg::testing::sharedData(rel) \
                         << " (set VOXSEG_SHARED_DATA to ../shared/data)";             \
    } while (0)

// A fresh temporary folder removed when the object goes out of scope.
class TempDir {
  public:
    TempDir() {
        auto base = std::filesystem::temp_directory_path();
        const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
        std::string name = std::string("voxseg-") + (info ? info->name() : "test") + "-" +
                           std::to_string(::getpid()) + "-" + std::to_string(counter()++);
        path_ = base / name;
        std::filesystem::remove_all(path_);
        std::filesystem::create_directories(path_);
    }
    ~TempDir() {
        std::error_code ec;
        std::filesystem::remove_all(path_, ec);
    }
    const std::filesystem::path& path() const { return path_; }
    std::string operator/(const std::string& rel) const { return (path_ / rel).string(); }

  private:
    static int& counter() {
        static int c = 0;
        return c;
    }
    std::filesystem::path path_;
};

}  // namespace voxseg::testing
