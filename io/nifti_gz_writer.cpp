#include "io/nifti_gz_writer.h"

#include "core/file_io.h"

#include <fcntl.h>
#include <libdeflate.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <functional>
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

struct Slot {
    std::vector<uint8_t> in;
    std::vector<uint8_t> out;
    size_t out_size = 0;
    int64_t chunk = -1;
    bool ready = false;
};

}  // namespace

namespace {

// Where the uncompressed bytes come from: fetch(offset, n, scratch, error) returns a pointer to
// bytes [offset, offset + n) of the stream, into the source or into `scratch` after filling it,
// or sets `error`.
using Fetch = std::function<const uint8_t*(int64_t offset, size_t n, std::vector<uint8_t>& scratch,
                                           Status& error)>;

Status gzipParallel(int64_t total, const Fetch& fetch, const std::string& dst_path,
                    const ParallelGzipOptions& options, const Progress& progress) {
    if (options.level < 1 || options.level > 12)
        return invalidArgument("gzip level must be 1..12, got " + std::to_string(options.level),
                               dst_path);
    if (options.chunk_bytes == 0) return invalidArgument("gzip chunk size must be > 0", dst_path);
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
            Status err;
            const uint8_t* in = fetch(offset, n, slot.in, err);
            if (err.isOk()) {
                slot.out.resize(libdeflate_gzip_compress_bound(compressor, n));
                slot.out_size =
                    libdeflate_gzip_compress(compressor, in, n, slot.out.data(), slot.out.size());
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
        if (const int err = writeAllBytes(out.get(), slot.out.data(), slot.out_size)) {
            status = ioError(std::string("write failed: ") + std::strerror(err), dst_path);
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

}  // namespace

Status gzipFileParallel(const std::string& src_path, const std::string& dst_path,
                        const ParallelGzipOptions& options, const Progress& progress) {
    Fd in(::open(src_path.c_str(), O_RDONLY | O_CLOEXEC));
    if (in.get() < 0)
        return ioError(std::string("cannot open for compression: ") + std::strerror(errno),
                       src_path);
    struct stat st {};
    if (::fstat(in.get(), &st) != 0)
        return ioError(std::string("cannot stat: ") + std::strerror(errno), src_path);
    const Fetch fetch = [&](int64_t offset, size_t n, std::vector<uint8_t>& scratch,
                            Status& error) -> const uint8_t* {
        scratch.resize(n);
        if (preadAll(in.get(), scratch.data(), n, offset)) return scratch.data();
        error = ioError("short read while compressing (file changed?)", src_path);
        return nullptr;
    };
    return gzipParallel(static_cast<int64_t>(st.st_size), fetch, dst_path, options, progress);
}

Status gzipBuffersParallel(std::span<const std::span<const uint8_t>> parts,
                           const std::string& dst_path, const ParallelGzipOptions& options,
                           const Progress& progress) {
    std::vector<int64_t> starts;  // stream offset of each part
    int64_t total = 0;
    for (const auto& p : parts) {
        starts.push_back(total);
        total += static_cast<int64_t>(p.size());
    }
    const Fetch fetch = [&](int64_t offset, size_t n, std::vector<uint8_t>& scratch,
                            Status&) -> const uint8_t* {
        static const uint8_t kNothing = 0;
        if (n == 0) return &kNothing;
        // The part holding `offset`; a chunk inside one part is compressed in place.
        size_t i = static_cast<size_t>(std::upper_bound(starts.begin(), starts.end(), offset) -
                                       starts.begin()) -
                   1;
        const auto in_part = static_cast<size_t>(offset - starts[i]);
        if (in_part + n <= parts[i].size()) return parts[i].data() + in_part;
        scratch.resize(n);
        size_t filled = 0;
        for (size_t skip = in_part; filled < n; ++i, skip = 0) {
            const size_t take = std::min(n - filled, parts[i].size() - skip);
            std::memcpy(scratch.data() + filled, parts[i].data() + skip, take);
            filled += take;
        }
        return scratch.data();
    };
    return gzipParallel(total, fetch, dst_path, options, progress);
}

}  // namespace voxseg::io
