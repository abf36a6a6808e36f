// Crash isolation for `voxseg batch` and `voxseg serve`: the work that parses untrusted data
// (DICOM, images) and runs the model is done in a child process of the same executable
// (/proc/self/exe, started with posix_spawn: no fork of a process whose OpenMP and DCMTK threads
// already run), so that a crash in a library (a stack overflow in a parser, SIGSEGV, an escaping
// exception) costs one case or job, not the batch or the node, and the parent knows how the
// child ended (waitpid) instead of guessing. Parent and child talk over one AF_UNIX stream
// socket, fd 3 in the child, in lines (JSON); the child dies with the thread that started it
// (PR_SET_PDEATHSIG), so a killed parent leaves no worker behind.
//
// Thread safety: a ChildProcess belongs to one thread, the one that spawned it (the child is
// killed when that thread ends). sendLine may be called from several threads of the child.
#pragma once

#include "core/status.h"

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

namespace voxseg::batch {

// How a child process ended.
struct ChildExit {
    bool signaled = false;
    int signal = 0;  // when signaled
    int code = 0;    // exit code otherwise
    // "died of signal 11 (SIGSEGV)" or "exited with code 1"
    std::string describe() const;
};

// "SIGSEGV" for 11, "signal 42" for a number without a name.
std::string signalName(int signal);

class ChildProcess {
  public:
    ~ChildProcess();  // a child still running is killed (SIGKILL) and reaped
    ChildProcess(const ChildProcess&) = delete;
    ChildProcess& operator=(const ChildProcess&) = delete;

    // Starts this executable with `args` (argv[1...]) and the variables `env` ("NAME=value")
    // added to this process's environment; the child's fd 3 is its end of the socket.
    static Result<std::unique_ptr<ChildProcess>> spawn(const std::vector<std::string>& args,
                                                       const std::vector<std::string>& env);

    pid_t pid() const { return pid_; }
    // Sends `line` and a newline; fails when the child is gone (never raises SIGPIPE).
    Status send(const std::string& line);
    enum class Read { kLine, kTimeout, kClosed };
    // The next line from the child (without its newline), waiting up to `timeout_ms`.
    Read readLine(std::string& line, int timeout_ms);
    void signal(int sig);
    // Waits for the child to end (reaps it once; later calls return the same).
    ChildExit wait();

  private:
    ChildProcess() = default;
    pid_t pid_ = -1;
    int fd_ = -1;
    std::string buffer_;
    bool reaped_ = false;
    ChildExit exit_;
};

// In a child started by ChildProcess::spawn: the socket to the parent (fd 3), after asking the
// kernel to kill this process when the parent's thread ends. -1 when this process was not
// started by spawn (the variable VOXSEG_INTERNAL_PARENT_PID is absent) or the parent is gone.
int connectToParent();
// Sends one line (and a newline) on `fd` with one send(); thread-safe, never raises SIGPIPE.
Status sendLine(int fd, const std::string& line);
// Blocking line reader of the child's end: false at the end of the stream.
bool readLineBlocking(int fd, std::string& buffer, std::string& line);

// This process's own arguments (argv[1...], from /proc/self/cmdline).
std::vector<std::string> ownArguments();

// Test-only: raises SIGSEGV (default action: the process dies of it) when the environment
// variable VOXSEG_TEST_CRASH_ON is set, not empty, and one of `names` contains its value. The
// one place where the tests of crash isolation make a case or job crash its worker
// (tests/app/batch_crash_test.sh, tests/node/node_poison_test.sh); off unless set.
void crashIfTestPoisoned(const std::vector<std::string>& names);

}  // namespace voxseg::batch
