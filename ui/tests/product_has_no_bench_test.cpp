// Issue 36 item 5: benchmark code stays out of the product. The product rooms (every top-level
// folder with C++ except bench/, tests/, tools/ and the benchmark and test folders inside a room,
// such as ui/bench/ and ui/tests/) hold no benchmark source and include no benchmark
// header (bench/, ui/bench/); voxseg_ui, voxseg-viewer and voxseg are built from those rooms only.
// The viewer's benchmarks are targets of their own (ui/bench/CMakeLists.txt: voxseg_ui_bench,
// voxseg_bench_viewer). No Qt here: it is a walk of the source tree (VOXSEG_SOURCE_DIR).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

namespace fs = std::filesystem;

namespace {

bool isCpp(const fs::path& p) {
    static const std::set<std::string> kExt = {".cpp", ".h", ".cu", ".cuh", ".hpp", ".cc"};
    return kExt.count(p.extension().string()) > 0;
}

// Top-level folders that are not the product, and folder names inside a room that hold tests or
// benchmarks.
bool outsideProduct(const fs::path& rel) {
    static const std::set<std::string> kTop = {"bench", "tests",  "tools", "docs",       "scripts",
                                               "cmake", "deploy", ".git",  "sample_data"};
    auto it = rel.begin();
    if (it == rel.end()) return true;
    const std::string top = it->string();
    if (kTop.count(top) || top.rfind("build", 0) == 0 || top.rfind('.', 0) == 0) return true;
    for (; it != rel.end(); ++it)
        if (*it == "tests" || *it == "bench" || *it == "fuzz") return true;
    return false;
}

}  // namespace

TEST(ProductLayout, NoBenchmarkCodeInProductRooms) {
    const fs::path root = VOXSEG_SOURCE_DIR;
    ASSERT_TRUE(fs::is_directory(root / "ui")) << root;
    std::vector<std::string> problems;
    int scanned = 0;
    for (auto it = fs::recursive_directory_iterator(root); it != fs::recursive_directory_iterator();
         ++it) {
        const fs::path rel = fs::relative(it->path(), root);
        if (it->is_directory()) {
            if (outsideProduct(rel)) it.disable_recursion_pending();
            continue;
        }
        if (!it->is_regular_file() || !isCpp(rel) || outsideProduct(rel)) continue;
        ++scanned;
        if (rel.filename().string().find("bench") != std::string::npos)
            problems.push_back(rel.string() + ": a benchmark source in a product room");
        std::ifstream in(it->path());
        std::string line;
        for (int n = 1; std::getline(in, line); ++n)
            if (line.rfind("#include", 0) == 0 && line.find("bench") != std::string::npos)
                problems.push_back(rel.string() + ":" + std::to_string(n) + ": " + line);
    }
    EXPECT_GT(scanned, 100) << "the walk found too few product sources under " << root;
    for (const auto& p : problems) ADD_FAILURE() << p;
}
