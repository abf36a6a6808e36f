// .nii.gz writing throughput: voxseg's parallel libdeflate writer against single-threaded zlib
// level 6 (what ITK, nibabel and most tools use) on the same CT-like volume, side by side.
// MB/s = uncompressed NIfTI bytes / wall seconds. Usage:
//   voxseg_bench_nifti_gz [--size 512x512x500] [--dir /tmp] [--threads N]
#include "bench/ct_phantom.h"
#include "core/process_metrics.h"
#include "io/image_io.h"
#include "io/nifti_gz_writer.h"

#include <itkImageFileWriter.h>
#include <zlib.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <thread>
#include <vector>

namespace {
namespace fs = std::filesystem;
using namespace voxseg;

struct Timing {
    double wall = 0;
    double cpu = 0;  // all threads of the process
};

Timing timed(const std::function<void()>& fn) {
    const double c0 = processCpuSeconds();
    const auto t0 = std::chrono::steady_clock::now();
    fn();
    return {std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(),
            processCpuSeconds() - c0};
}

// Single-threaded zlib, level 6, gzip framing: the baseline every tool without threads gets.
void zlibGzipFile(const std::string& src, const std::string& dst) {
    std::ifstream in(src, std::ios::binary);
    gzFile out = gzopen(dst.c_str(), "wb6");
    std::vector<char> buf(1 << 20);
    while (in.read(buf.data(), static_cast<std::streamsize>(buf.size())) || in.gcount() > 0)
        gzwrite(out, buf.data(), static_cast<unsigned>(in.gcount()));
    gzclose(out);
}

void check(const Status& st) {
    if (!st.isOk()) {
        std::fprintf(stderr, "error: %s\n", st.toString().c_str());
        std::exit(1);
    }
}

}  // namespace

int main(int argc, char** argv) {
    int64_t nx = 512, ny = 512, nz = 500;
    std::string dir = fs::temp_directory_path().string();
    int threads = static_cast<int>(std::thread::hardware_concurrency());
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!std::strcmp(argv[i], "--size")) {
            std::sscanf(argv[i + 1], "%ldx%ldx%ld", &nx, &ny, &nz);
        } else if (!std::strcmp(argv[i], "--dir")) {
            dir = argv[i + 1];
        } else if (!std::strcmp(argv[i], "--threads")) {
            threads = std::atoi(argv[i + 1]);
        }
    }
    const fs::path work = fs::path(dir) / ("voxseg-gz-bench-" + std::to_string(::getpid()));
    fs::create_directories(work);
    const Volume ct = bench::makeCtPhantom(nx, ny, nz);
    const std::string nii = (work / "ct.nii").string();
    check(io::writeImage(ct, nii));
    const double mb = static_cast<double>(fs::file_size(nii)) / 1e6;

    struct Row {
        std::string what;
        Timing t;
        std::string out;
    };
    std::vector<Row> rows;
    auto add = [&](const std::string& what, const std::string& out,
                   const std::function<void()>& f) {
        f();  // warm-up (page cache, allocator)
        Timing best{1e30, 0};
        for (int r = 0; r < 3; ++r) {
            const Timing t = timed(f);
            if (t.wall < best.wall) best = t;
        }
        rows.push_back({what, best, out});
    };

    const std::string z6 = (work / "zlib6.nii.gz").string();
    add("zlib level 6, 1 thread (compress .nii)", z6, [&] { zlibGzipFile(nii, z6); });
    for (int t : {1, threads}) {
        const std::string out = (work / ("deflate6_t" + std::to_string(t) + ".nii.gz")).string();
        io::ParallelGzipOptions o;
        o.threads = t;
        add("libdeflate level 6, " + std::to_string(t) + " thread(s) (compress .nii)", out,
            [&] { check(io::gzipFileParallel(nii, out, o)); });
    }
    const std::string itk_out = (work / "itk.nii.gz").string();
    add("ITK ImageFileWriter .nii.gz (zlib, end to end)", itk_out, [&] {
        auto w = itk::ImageFileWriter<Image3<int16_t>>::New();
        w->SetInput(ct.image<int16_t>());
        w->SetFileName(itk_out);
        w->SetUseCompression(true);
        w->Update();
    });
    for (int t : {1, threads}) {
        const std::string out = (work / ("voxseg_t" + std::to_string(t) + ".nii.gz")).string();
        io::ImageWriteOptions o;
        o.threads = t;
        add("voxseg writeImage .nii.gz, " + std::to_string(t) + " thread(s) (end to end)", out,
            [&] { check(io::writeImage(ct, out, o)); });
    }

    std::printf("volume %ldx%ldx%ld int16, uncompressed NIfTI %.1f MB, %u hardware threads\n\n", nx,
                ny, nz, mb, std::thread::hardware_concurrency());
    // MB/s per CPU-second is what a loaded machine cannot distort much; wall MB/s is what a user
    // waits for on an idle one.
    std::printf(
        "| writer | wall s (best of 3) | MB/s wall | vs zlib 6 | CPU s | MB per CPU-s | output MB "
        "| ratio |\n");
    std::printf("|---|---:|---:|---:|---:|---:|---:|---:|\n");
    const double base = mb / rows[0].t.wall;
    for (const auto& r : rows) {
        const double out_mb = static_cast<double>(fs::file_size(r.out)) / 1e6;
        std::printf("| %s | %.3f | %.0f | %.2fx | %.2f | %.0f | %.1f | %.2f |\n", r.what.c_str(),
                    r.t.wall, mb / r.t.wall, (mb / r.t.wall) / base, r.t.cpu, mb / r.t.cpu, out_mb,
                    mb / out_mb);
    }
    fs::remove_all(work);
    return 0;
}
