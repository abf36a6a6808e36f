#include "io/nifti_gz_writer.h"

#include <fcntl.h>
#include <libdeflate.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

namespace voxseg::io {
namespace {

class Fd {
  public:
    explicit Fd(int fd) : fd_(fd) {}
    ~Fd() {
        if (fd_ >= 0) ::close(fd_);
    }
    Fd(const Fd&) = delete;
    Fd& operator=(const Fd&) = delete;
    int get() const { return fd_; }
    int release() {
        const int fd = fd_;
        fd_ = -1;
        return fd;
    }

  private:
    int fd_;
};

// Reads exactly `n` bytes at `offset` (the file does not change underneath us).
bool preadAll(int fd, uint8_t* dst, size_t n, int64_t offset) {
    while (n > 0) {
        const ssize_t r = ::pread(fd, dst, n, offset);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return false;
        dst += r;
        n -= static_cast<size_t>(r);
        offset += r;
    }
    return true;
}

bool writeAll(int fd, const uint8_t* src, size_t n) {
    while (n > 0) {
        const ssize_t r = ::write(fd, src, n);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return false;
        src += r;
        n -= static_cast<size_t>(r);
    }
    return true;
}

struct Slot {
    std::vector<uint8_t> in;
    std::vector<uint8_t> out;
    size_t out_size = 0;
    int64_t chunk = -1;
    bool ready = false;
};

}  // namespace

Status gzipFileParallel(const std::string& src_path, const std::string& dst_path,
                        const ParallelGzipOptions& options, const Progress& progress) {
    if (options.level < 1 || options.level > 12)
        return invalidArgument("gzip level must be 1..12, got " + std::to_string(options.level),
                               dst_path);
    if (options.chunk_bytes == 0) return invalidArgument("gzip chunk size must be > 0", dst_path);

    Fd in(::open(src_path.c_str(), O_RDONLY | O_CLOEXEC));
    if (in.get() < 0)
        return ioError(std::string("cannot open for compression: ") + std::strerror(errno),
                       src_path);
    struct stat st {};
    if (::fstat(in.get(), &st) != 0)
        return ioError(std::string("cannot stat: ") + std::strerror(errno), src_path);
    const auto total = static_cast<int64_t>(st.st_size);
    const auto chunk = static_cast<int64_t>(options.chunk_bytes);
    const int64_t n_chunks = std::max<int64_t>(1, (total + chunk - 1) / chunk);

    Fd out(::open(dst_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
    if (out.get() < 0)
        return ioError(std::string("cannot create: ") + std::strerror(errno), dst_path);

    int threads = options.threads > 0 ? options.threads
                                      : static_cast<int>(std::thread::hardware_concurrency());
    threads = static_cast<int>(std::clamp<int64_t>(threads, 1, n_chunks));
    // Two slots per worker keep every worker busy while the writer drains finished members.
    const int64_t window = 2 * static_cast<int64_t>(threads);
    std::vector<Slot> slots(static_cast<size_t>(window));

    std::mutex mutex;
    std::condition_variable worker_cv;
    std::condition_variable writer_cv;
    int64_t next_chunk = 0;
    int64_t written = 0;
    bool stop = false;
    Status worker_error;

    auto worker = [&] {
        libdeflate_compressor* compressor = libdeflate_alloc_compressor(options.level);
        if (compressor == nullptr) {
            std::lock_guard lock(mutex);
            if (worker_error.isOk())
                worker_error = Status(StatusCode::kOutOfMemory,
                                      "cannot allocate a deflate compressor", dst_path);
            stop = true;
            writer_cv.notify_all();
            return;
        }
        for (;;) {
            int64_t c = 0;
            {
                std::unique_lock lock(mutex);
                worker_cv.wait(lock, [&] {
                    return stop || next_chunk >= n_chunks || next_chunk < written + window;
                });
                if (stop || next_chunk >= n_chunks) break;
                c = next_chunk++;
            }
            Slot& slot = slots[static_cast<size_t>(c % window)];
            const int64_t offset = c * chunk;
            const auto n = static_cast<size_t>(std::min(chunk, total - offset));
            slot.in.resize(n);
            Status err;
            if (!preadAll(in.get(), slot.in.data(), n, offset)) {
                err = ioError("short read while compressing (file changed?)", src_path);
            } else {
                slot.out.resize(libdeflate_gzip_compress_bound(compressor, n));
                slot.out_size = libdeflate_gzip_compress(compressor, slot.in.data(), n,
                                                         slot.out.data(), slot.out.size());
                if (slot.out_size == 0) err = internalError("gzip bound too small", dst_path);
            }
            std::lock_guard lock(mutex);
            if (!err.isOk()) {
                if (worker_error.isOk()) worker_error = err;
                stop = true;
            } else {
                slot.chunk = c;
                slot.ready = true;
            }
            writer_cv.notify_all();
        }
        libdeflate_free_compressor(compressor);
    };

    std::vector<std::thread> pool;
    pool.reserve(static_cast<size_t>(threads));
    for (int t = 0; t < threads; ++t) pool.emplace_back(worker);

    Status status;
    for (int64_t c = 0; c < n_chunks && status.isOk(); ++c) {
        Slot& slot = slots[static_cast<size_t>(c % window)];
        {
            std::unique_lock lock(mutex);
            writer_cv.wait(lock, [&] { return stop || (slot.ready && slot.chunk == c); });
            if (!(slot.ready && slot.chunk == c)) {
                status = worker_error;
                break;
            }
        }
        if (!writeAll(out.get(), slot.out.data(), slot.out_size)) {
            status = ioError(std::string("write failed: ") + std::strerror(errno), dst_path);
        } else if (progress.isCancelled()) {
            status = Status(StatusCode::kCancelled, "cancelled while compressing", dst_path);
        }
        {
            std::lock_guard lock(mutex);
            slot.ready = false;
            ++written;
            if (!status.isOk()) stop = true;
        }
        worker_cv.notify_all();
        progress.report(static_cast<size_t>(c + 1), static_cast<size_t>(n_chunks), "compressing");
    }
    {
        std::lock_guard lock(mutex);
        stop = true;
    }
    worker_cv.notify_all();
    for (auto& t : pool) t.join();
    if (status.isOk() && !worker_error.isOk()) status = worker_error;
    if (!status.isOk()) return status;
    if (::close(out.release()) != 0)
        return ioError(std::string("close failed: ") + std::strerror(errno), dst_path);
    return Status::ok();
}

}  // namespace voxseg::io
