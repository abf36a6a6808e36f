// Running the built `voxseg` (VOXSEG_BIN, tests/test_paths.h) as a child process from CLI
// tests: stdout and stderr captured through files in the test's temporary folder.
#pragma once

#include "tests/test_data.h"

#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace voxseg::app::clitest {

struct RunResult {
    int exit_code = -1;  // 128 + signal number when killed by a signal, as a shell reports it
    std::string out;
    std::string err;
};

inline std::string quote(const std::string& s) {
    std::string q = "'";
    for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return q + "'";
}

inline std::string slurp(const std::filesystem::path& p) {
    std::ifstream in(p);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

// Runs a shell command line with stdout/stderr captured.
inline RunResult runShell(const std::string& command, const voxseg::testing::TempDir& dir) {
    const std::filesystem::path out = dir.path() / ".stdout", err = dir.path() / ".stderr";
    const std::string cmd = command + " >" + quote(out.string()) + " 2>" + quote(err.string());
    const int status = std::system(cmd.c_str());
    RunResult r;
    r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    r.out = slurp(out);
    r.err = slurp(err);
    std::filesystem::remove(out);
    std::filesystem::remove(err);
    return r;
}

// Runs `voxseg args...`, after `prefix` (e.g. "ulimit -f 16;") in the same shell.
inline RunResult runVoxseg(const std::vector<std::string>& args,
                           const voxseg::testing::TempDir& dir, const std::string& prefix = {}) {
    std::string cmd = quote(VOXSEG_BIN);
    for (const auto& a : args) cmd += " " + quote(a);
    return runShell(prefix + " " + cmd, dir);
}

}  // namespace voxseg::app::clitest
