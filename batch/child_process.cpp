#include "batch/child_process.h"

#include "core/file_io.h"

#include <fmt/format.h>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>

extern char** environ;

namespace voxseg::batch {
namespace {

constexpr const char* kParentPidVariable = "VOXSEG_INTERNAL_PARENT_PID";
constexpr int kChildFd = 3;

std::string errnoText() { return std::strerror(errno); }

}  // namespace

std::string signalName(int sig) {
    switch (sig) {
        case SIGSEGV:
            return "SIGSEGV";
        case SIGBUS:
            return "SIGBUS";
        case SIGABRT:
            return "SIGABRT";
        case SIGFPE:
            return "SIGFPE";
        case SIGILL:
            return "SIGILL";
        case SIGKILL:
            return "SIGKILL";
        case SIGTERM:
            return "SIGTERM";
        case SIGINT:
            return "SIGINT";
        case SIGTRAP:
            return "SIGTRAP";
        case SIGSYS:
            return "SIGSYS";
        case SIGPIPE:
            return "SIGPIPE";
        case SIGXCPU:
            return "SIGXCPU";
        case SIGXFSZ:
            return "SIGXFSZ";
    }
    return fmt::format("signal {}", sig);
}

std::string ChildExit::describe() const {
    if (signaled) return fmt::format("died of signal {} ({})", signal, signalName(signal));
    return fmt::format("exited with code {}", code);
}

ChildProcess::~ChildProcess() {
    if (pid_ > 0 && !reaped_) {
        ::kill(pid_, SIGKILL);
        wait();
    }
    if (fd_ >= 0) ::close(fd_);
}

Result<std::unique_ptr<ChildProcess>> ChildProcess::spawn(const std::vector<std::string>& args,
                                                          const std::vector<std::string>& env) {
    int sv[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
        return ioError("cannot create the socket to a worker process: " + errnoText());
    // dup2 onto fd 3 clears close-on-exec, except when the socket already is fd 3.
    if (sv[1] == kChildFd) {
        const int moved = ::fcntl(sv[1], F_DUPFD_CLOEXEC, 10);
        ::close(sv[1]);
        sv[1] = moved;
    }
    std::vector<std::string> argv_s = {"voxseg"};
    argv_s.insert(argv_s.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (auto& a : argv_s) argv.push_back(a.data());
    argv.push_back(nullptr);
    std::vector<std::string> env_s;
    for (char** e = environ; e && *e; ++e)
        if (std::strncmp(*e, kParentPidVariable, std::strlen(kParentPidVariable)) != 0)
            env_s.emplace_back(*e);
    env_s.insert(env_s.end(), env.begin(), env.end());
    env_s.push_back(fmt::format("{}={}", kParentPidVariable, ::getpid()));
    std::vector<char*> envp;
    for (auto& e : env_s) envp.push_back(e.data());
    envp.push_back(nullptr);

    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, sv[1], kChildFd);
    // Nothing else of the parent's reaches the worker: DCMTK's listening socket and the open
    // associations are not close-on-exec, and a worker holding them after a kill -9 of the node
    // kept the port busy, so the restarted node could not listen (node_poison).
    posix_spawn_file_actions_addclosefrom_np(&actions, kChildFd + 1);
    pid_t pid = -1;
    const int rc = posix_spawn(&pid, "/proc/self/exe", &actions, nullptr, argv.data(), envp.data());
    posix_spawn_file_actions_destroy(&actions);
    ::close(sv[1]);
    if (rc != 0) {
        ::close(sv[0]);
        return ioError(std::string("cannot start a worker process: ") + std::strerror(rc),
                       "/proc/self/exe");
    }
    std::unique_ptr<ChildProcess> child(new ChildProcess());
    child->pid_ = pid;
    child->fd_ = sv[0];
    return child;
}

Status ChildProcess::send(const std::string& line) { return sendLine(fd_, line); }

ChildProcess::Read ChildProcess::readLine(std::string& line, int timeout_ms) {
    for (;;) {
        const size_t nl = buffer_.find('\n');
        if (nl != std::string::npos) {
            line = buffer_.substr(0, nl);
            buffer_.erase(0, nl + 1);
            return Read::kLine;
        }
        pollfd p{fd_, POLLIN, 0};
        const int n = ::poll(&p, 1, timeout_ms);
        if (n < 0 && errno == EINTR) return Read::kTimeout;
        if (n == 0) return Read::kTimeout;
        char chunk[4096];
        const ssize_t got = ::recv(fd_, chunk, sizeof chunk, 0);
        if (got < 0 && errno == EINTR) return Read::kTimeout;
        if (got <= 0) return Read::kClosed;
        buffer_.append(chunk, static_cast<size_t>(got));
    }
}

void ChildProcess::signal(int sig) {
    if (pid_ > 0 && !reaped_) ::kill(pid_, sig);
}

ChildExit ChildProcess::wait() {
    if (reaped_ || pid_ <= 0) return exit_;
    int status = 0;
    pid_t r;
    do {
        r = ::waitpid(pid_, &status, 0);
    } while (r < 0 && errno == EINTR);
    reaped_ = true;
    if (r == pid_ && WIFSIGNALED(status)) {
        exit_.signaled = true;
        exit_.signal = WTERMSIG(status);
    } else if (r == pid_ && WIFEXITED(status)) {
        exit_.code = WEXITSTATUS(status);
    } else {
        exit_.code = 1;
    }
    return exit_;
}

int connectToParent() {
    const char* parent = std::getenv(kParentPidVariable);
    if (parent == nullptr || *parent == '\0') return -1;
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    // The parent may have died before the line above: then nobody would kill this process.
    if (::getppid() != static_cast<pid_t>(std::atol(parent))) return -1;
    if (::fcntl(kChildFd, F_GETFD) < 0) return -1;
    ::fcntl(kChildFd, F_SETFD, FD_CLOEXEC);
    ::unsetenv(kParentPidVariable);  // the child's own children are not its workers
    return kChildFd;
}

Status sendLine(int fd, const std::string& line) {
    const std::string text = line + "\n";
    size_t sent = 0;
    while (sent < text.size()) {
        const ssize_t n = ::send(fd, text.data() + sent, text.size() - sent, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return ioError("the worker's socket is closed: " + errnoText());
        sent += static_cast<size_t>(n);
    }
    return Status::ok();
}

bool readLineBlocking(int fd, std::string& buffer, std::string& line) {
    for (;;) {
        const size_t nl = buffer.find('\n');
        if (nl != std::string::npos) {
            line = buffer.substr(0, nl);
            buffer.erase(0, nl + 1);
            return true;
        }
        char chunk[4096];
        const ssize_t got = ::recv(fd, chunk, sizeof chunk, 0);
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) return false;
        buffer.append(chunk, static_cast<size_t>(got));
    }
}

std::vector<std::string> ownArguments() {
    const auto cmdline = readFileBytes("/proc/self/cmdline");
    const std::string all = cmdline.isOk() ? *cmdline : std::string();
    std::vector<std::string> args;
    size_t start = 0;
    while (start < all.size()) {
        size_t end = all.find('\0', start);
        if (end == std::string::npos) end = all.size();
        args.push_back(all.substr(start, end - start));
        start = end + 1;
    }
    if (!args.empty()) args.erase(args.begin());
    return args;
}

void crashIfTestPoisoned(const std::vector<std::string>& names) {
    // TEST ONLY: tests of crash isolation set this to make one case or job crash its worker the
    // way a parser's stack overflow would. Unset (always, in production) it does nothing.
    const char* poison = std::getenv("VOXSEG_TEST_CRASH_ON");
    if (poison == nullptr || *poison == '\0') return;
    for (const auto& n : names)
        if (!n.empty() && n.find(poison) != std::string::npos) {
            // The default action, set with the system call itself: a sanitizer's sigaction
            // interceptor would keep its own SIGSEGV handler, which exits instead of dying of it.
            // (An all-zero kernel sigaction is SIG_DFL, no flags, no mask, on every ABI.)
            unsigned long kernel_sigaction[8] = {};
            ::syscall(SYS_rt_sigaction, SIGSEGV, kernel_sigaction, nullptr, sizeof(unsigned long));
            ::prctl(PR_SET_DUMPABLE, 0);  // no core file for a test's crash
            ::syscall(SYS_tgkill, ::getpid(), ::syscall(SYS_gettid), SIGSEGV);
        }
}

}  // namespace voxseg::batch
