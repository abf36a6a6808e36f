#include "core/memory_limit.h"

#include "core/file_io.h"

#include <fmt/format.h>

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <vector>

namespace voxseg {
namespace {

namespace fs = std::filesystem;

uint64_t physicalMemoryBytes() {
    const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
    if (pages <= 0 || page <= 0) return 0;
    return static_cast<uint64_t>(pages) * static_cast<uint64_t>(page);
}

// The first line of `file` as a byte count; 0 for "max", a missing file or anything else.
// cgroup v1 writes "no limit" as a number near 2^63 (rounded down to a page).
uint64_t limitIn(const fs::path& file) {
    std::ifstream in(file);
    std::string line;
    if (!in || !std::getline(in, line) || line.empty() || line == "max") return 0;
    uint64_t v = 0;
    for (char c : line) {
        if (c < '0' || c > '9') return 0;
        if (v > (UINT64_MAX - 9) / 10) return 0;
        v = v * 10 + static_cast<uint64_t>(c - '0');
    }
    return v >= (uint64_t{1} << 62) ? 0 : v;
}

// The lower of two limits where 0 means none.
uint64_t lower(uint64_t a, uint64_t b) {
    if (a == 0) return b;
    if (b == 0) return a;
    return std::min(a, b);
}

// The lowest `file` limit from `base`/`rel` up to `base` (a relative path with no "..").
uint64_t lowestOnPath(const fs::path& base, const std::string& rel, const char* file) {
    uint64_t limit = limitIn(base / file);
    fs::path dir = base;
    std::vector<fs::path> dirs;
    for (const auto& part : fs::path(rel).relative_path()) {
        if (part == ".." || part == ".") return limit;
        dir /= part;
        dirs.push_back(dir);
    }
    std::error_code ec;
    if (dirs.empty() || !fs::is_directory(dirs.back(), ec)) return limit;
    for (const auto& d : dirs) limit = lower(limit, limitIn(d / file));
    return limit;
}

uint64_t cgroupLimit(const fs::path& root, const std::string& self_cgroup) {
    std::string v2_path, v1_path;
    std::istringstream in(self_cgroup);
    for (std::string line; std::getline(in, line);) {
        const size_t a = line.find(':');
        const size_t b = a == std::string::npos ? a : line.find(':', a + 1);
        if (b == std::string::npos) continue;
        const std::string controllers = line.substr(a + 1, b - a - 1);
        const std::string path = line.substr(b + 1);
        if (line.compare(0, a, "0") == 0 && controllers.empty()) v2_path = path;
        std::istringstream list(controllers);
        for (std::string c; std::getline(list, c, ',');)
            if (c == "memory") v1_path = path;
    }
    return lower(lowestOnPath(root, v2_path, "memory.max"),
                 lowestOnPath(root / "memory", v1_path, "memory.limit_in_bytes"));
}

std::string selfCgroup() {
    auto text = readFileBytes("/proc/self/cgroup");
    return text.isOk() ? *text : std::string();
}

// RLIMIT_AS (ulimit -v): 0 when unlimited.
uint64_t addressSpaceLimit() {
    rlimit r{};
    if (getrlimit(RLIMIT_AS, &r) != 0 || r.rlim_cur == RLIM_INFINITY) return 0;
    return static_cast<uint64_t>(r.rlim_cur);
}

uint64_t cgroupLimitOfThisProcess() {
    static const uint64_t limit = cgroupLimit("/sys/fs/cgroup", selfCgroup());
    return limit;
}

}  // namespace

uint64_t memoryLimitBytes(const fs::path& cgroup_root, uint64_t physical,
                          const std::string& self_cgroup) {
    return lower(physical, cgroupLimit(cgroup_root, self_cgroup));
}

uint64_t memoryLimitBytes() {
    static const uint64_t physical = physicalMemoryBytes();
    // RLIMIT_AS is read each time: a process may lower it after start (tests do).
    return lower(lower(physical, cgroupLimitOfThisProcess()), addressSpaceLimit());
}

std::string describeMemoryLimit() {
    const uint64_t limit = memoryLimitBytes();
    const uint64_t physical = physicalMemoryBytes();
    const uint64_t as = addressSpaceLimit();
    const char* whose = as != 0 && limit == as && as < physical
                            ? "the address-space limit, ulimit -v"
                        : limit < physical ? "the container's limit"
                                           : "the machine's";
    return fmt::format("{:.1f} GiB of memory ({})", static_cast<double>(limit) / (1 << 30), whose);
}

}  // namespace voxseg
