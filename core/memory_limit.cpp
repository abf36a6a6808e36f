#include "core/memory_limit.h"

#include <fmt/format.h>

#include <unistd.h>

#include <algorithm>
#include <fstream>

namespace voxseg {
namespace {

uint64_t physicalMemoryBytes() {
    const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
    if (pages <= 0 || page <= 0) return 0;
    return static_cast<uint64_t>(pages) * static_cast<uint64_t>(page);
}

// The first line of `file` as a byte count; 0 for "max", a missing file or anything else.
// cgroup v1 writes "no limit" as a number near 2^63 (rounded down to a page).
uint64_t limitIn(const std::filesystem::path& file) {
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

uint64_t cgroupLimit(const std::filesystem::path& root) {
    if (const uint64_t v2 = limitIn(root / "memory.max")) return v2;
    return limitIn(root / "memory" / "memory.limit_in_bytes");
}

}  // namespace

uint64_t memoryLimitBytes(const std::filesystem::path& cgroup_root, uint64_t physical) {
    const uint64_t cgroup = cgroupLimit(cgroup_root);
    if (cgroup == 0) return physical;
    return physical == 0 ? cgroup : std::min(physical, cgroup);
}

uint64_t memoryLimitBytes() {
    static const uint64_t limit = memoryLimitBytes("/sys/fs/cgroup", physicalMemoryBytes());
    return limit;
}

std::string describeMemoryLimit() {
    const uint64_t limit = memoryLimitBytes();
    const uint64_t physical = physicalMemoryBytes();
    return fmt::format("{:.1f} GiB of memory ({})", static_cast<double>(limit) / (1 << 30),
                       limit < physical ? "the container's limit" : "the machine's");
}

}  // namespace voxseg
