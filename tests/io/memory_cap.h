// Running a reader under a memory cap, so that a bomb test that fails (a reader that allocates
// what a hostile header claims) is stopped by the kernel in its own process instead of taking
// the machine down (issue 35). The strongest confinement available is used:
//   1. a memory cgroup of our own: a child of this process's cgroup with memory.max (v2, where
//      the memory controller is delegated to it) or memory.limit_in_bytes (v1), which needs write
//      access to the cgroup tree (root, or a delegated subtree as systemd gives a user session);
//   2. `systemd-run --user --scope -p MemoryMax=` (CLI runs only; a user session's systemd);
//   3. RLIMIT_AS (ulimit -v) in the child: no privileges needed; not under AddressSanitizer,
//      which reserves terabytes of address space (there the cap is the cgroup or nothing, and
//      the test says so). In-process runs (runCapped) set it beside a cgroup too: it makes an
//      allocation of the claim fail at once, where the kernel lets an untouched one stand.
// core/memory_limit.h sees each of them (the process's own cgroup path, RLIMIT_AS), so the
// readers refuse a claim over the cap with kOutOfMemory before allocating. Thread safety: call
// from the test's main thread.
#pragma once

#include <gtest/gtest.h>

#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <sstream>
#include <string>

namespace voxseg::testing {

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define VOXSEG_MEMORY_CAP_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define VOXSEG_MEMORY_CAP_ASAN 1
#endif

inline bool underAddressSanitizer() {
#ifdef VOXSEG_MEMORY_CAP_ASAN
    return true;
#else
    return false;
#endif
}

// A memory cgroup created for the cap, removed (with nothing left in it) by the destructor.
class MemoryCgroup {
  public:
    // Empty path() when no cgroup could be made; why() says what was tried.
    explicit MemoryCgroup(uint64_t bytes) {
        namespace fs = std::filesystem;
        std::ifstream in("/proc/self/cgroup");
        std::string line, v2, v1;
        while (std::getline(in, line)) {
            if (line.rfind("0::", 0) == 0) v2 = line.substr(3);
            const size_t a = line.find(':'), b = line.find(':', a + 1);
            if (a != std::string::npos && b != std::string::npos) {
                std::stringstream list(line.substr(a + 1, b - a - 1));
                for (std::string c; std::getline(list, c, ',');)
                    if (c == "memory") v1 = line.substr(b + 1);
            }
        }
        const std::string name =
            "voxseg-memcap-" + std::to_string(::getpid()) + "-" + std::to_string(counter()++);
        // v2: the memory controller must be enabled for the children of our cgroup.
        const fs::path v2_parent = fs::path("/sys/fs/cgroup") / fs::path(v2).relative_path();
        if (!v2.empty() && fs::exists(v2_parent / "cgroup.subtree_control") &&
            try_make(v2_parent / name, "memory.max", bytes))
            return;
        const fs::path v1_parent = fs::path("/sys/fs/cgroup/memory") / fs::path(v1).relative_path();
        if (!v1.empty() && fs::exists(v1_parent) &&
            try_make(v1_parent / name, "memory.limit_in_bytes", bytes))
            return;
        why_ = "no writable memory cgroup (v2 " + (v2.empty() ? "absent" : v2_parent.string()) +
               ", v1 " + (v1.empty() ? "absent" : v1) + ")";
    }
    ~MemoryCgroup() {
        if (!path_.empty()) ::rmdir(path_.c_str());
    }
    MemoryCgroup(const MemoryCgroup&) = delete;
    MemoryCgroup& operator=(const MemoryCgroup&) = delete;

    const std::string& path() const { return path_; }
    const std::string& why() const { return why_; }
    // Moves the calling process into the cgroup (its children follow).
    bool join() const {
        std::ofstream procs(path_ + "/cgroup.procs");
        procs << ::getpid() << "\n";
        procs.flush();
        return static_cast<bool>(procs);
    }

  private:
    static int& counter() {
        static int c = 0;
        return c;
    }
    bool try_make(const std::filesystem::path& dir, const char* file, uint64_t bytes) {
        if (::mkdir(dir.c_str(), 0755) != 0) return false;
        std::ofstream limit(dir / file);
        limit << bytes << "\n";
        limit.flush();
        std::ifstream check(dir / file);
        uint64_t got = 0;
        if (!limit || !(check >> got) || got == 0 || got > bytes + (1 << 20)) {
            ::rmdir(dir.c_str());
            return false;
        }
        path_ = dir.string();
        return true;
    }
    std::string path_, why_;
};

// Whether a cap of `bytes` can be applied here at all (a cgroup, or RLIMIT_AS outside
// AddressSanitizer): tests whose refusal depends on the cap skip without one.
inline bool memoryCapAvailable(uint64_t bytes) {
    return !underAddressSanitizer() || !MemoryCgroup(bytes).path().empty();
}

struct CappedRun {
    int exit_code = -1;    // the child's exit status, 128 + signal when killed
    int64_t peak_rss = 0;  // bytes (the child's ru_maxrss)
    double seconds = 0;    // wall time
    std::string how;       // "cgroup v1 /sys/fs/cgroup/memory/...", "RLIMIT_AS", "none (...)"
};

// Runs `fn` in a forked child capped at `bytes` (cgroup, else RLIMIT_AS); the child's exit status
// is fn()'s return value. Prints how the cap was applied once per run.
inline CappedRun runCapped(uint64_t bytes, const std::function<int()>& fn) {
    CappedRun run;
    MemoryCgroup cgroup(bytes);
    if (!cgroup.path().empty()) {
        run.how = "memory cgroup " + cgroup.path();
    } else if (underAddressSanitizer()) {
        run.how = "none: AddressSanitizer build and " + cgroup.why();
    } else {
        run.how = cgroup.why();
    }
    // RLIMIT_AS as well (outside AddressSanitizer): an allocation of the claim fails at once even
    // where the kernel would let it stand untouched (a reader that allocates, then finds the data
    // short, leaves no trace in RSS).
    if (!underAddressSanitizer()) run.how += "; RLIMIT_AS";
    std::cerr << "[memory cap " << (bytes >> 20) << " MiB: " << run.how << "]\n";
    std::cout.flush();
    std::cerr.flush();
    const auto start = std::chrono::steady_clock::now();
    const pid_t pid = ::fork();
    if (pid == 0) {
        if (!cgroup.path().empty() && !cgroup.join()) ::_exit(120);
        if (!underAddressSanitizer()) {
            const rlimit r{bytes, bytes};
            if (::setrlimit(RLIMIT_AS, &r) != 0) ::_exit(121);
        }
        const int rc = fn();
        std::cout.flush();
        std::cerr.flush();
        ::_exit(rc);
    }
    int status = 0;
    rusage usage{};
    while (::wait4(pid, &status, 0, &usage) < 0 && errno == EINTR) {
    }
    run.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    run.peak_rss = static_cast<int64_t>(usage.ru_maxrss) * 1024;
    return run;
}

// A shell prefix that caps what follows at `bytes` for CLI runs (tests/app/run_voxseg.h's
// runVoxseg prefix): the shell joins `cgroup` (when it was made), else `ulimit -v`. `how` says
// which.
inline std::string cappedShellPrefix(const MemoryCgroup& cgroup, uint64_t bytes, std::string* how) {
    if (!cgroup.path().empty()) {
        *how = "memory cgroup " + cgroup.path();
        return "echo $$ > '" + cgroup.path() + "/cgroup.procs' &&";
    }
    if (std::system("systemd-run --user --scope --quiet -p MemoryMax=64M true >/dev/null 2>&1") ==
        0) {
        *how = "systemd-run --user --scope -p MemoryMax";
        return "systemd-run --user --scope --quiet -p MemoryMax=" + std::to_string(bytes) + " ";
    }
    if (underAddressSanitizer()) {
        *how = "none: AddressSanitizer build and " + cgroup.why() + ", no systemd user scope";
        return "";
    }
    *how = "ulimit -v (" + cgroup.why() + ", no systemd user scope)";
    return "ulimit -v " + std::to_string(bytes >> 10) + ";";
}

}  // namespace voxseg::testing
