// NRRD reading: voxseg's readImage (ITK parses the header, voxseg reads raw and gzip data itself:
// io/nrrd_data.h) against ITK's ImageFileReader reading everything, gzip-encoded (3D Slicer's
// default) and raw, on the same CT-like volume, alternating reps so that both see the same
// machine. Usage:
//   voxseg_bench_nrrd_read [--size 512x512x300] [--dir /tmp] [--reps 5]
#include "bench/ct_phantom.h"
#include "core/file_io.h"
#include "core/volume.h"
#include "io/image_io.h"

#include <itkImageFileReader.h>
#include <itkNrrdImageIO.h>

#include <zlib.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

namespace {
namespace fs = std::filesystem;
using namespace voxseg;

double seconds(const std::function<void()>& fn) {
    const auto t0 = std::chrono::steady_clock::now();
    fn();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

void check(const Status& st) {
    if (!st.isOk()) {
        std::fprintf(stderr, "error: %s\n", st.toString().c_str());
        std::exit(1);
    }
}

// The raw NRRD voxseg wrote, re-encoded as gzip (zlib level 6, as Slicer and teem write it).
void gzipNrrd(const std::string& raw, const std::string& dst) {
    const auto read = readFileBytes(raw);
    const std::string bytes = read.isOk() ? *read : std::string();
    const size_t end = bytes.find("\n\n") + 2;
    std::string head = bytes.substr(0, end);
    head.replace(head.find("encoding: raw"), 13, "encoding: gzip");
    std::ofstream(dst, std::ios::binary) << head;
    gzFile out = gzopen(dst.c_str(), "ab6");
    gzwrite(out, bytes.data() + end, static_cast<unsigned>(bytes.size() - end));
    gzclose(out);
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
    int64_t nx = 512, ny = 512, nz = 300;
    std::string dir = fs::temp_directory_path().string();
    int reps = 5;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!std::strcmp(argv[i], "--size")) {
            std::sscanf(argv[i + 1], "%ldx%ldx%ld", &nx, &ny, &nz);
        } else if (!std::strcmp(argv[i], "--dir")) {
            dir = argv[i + 1];
        } else if (!std::strcmp(argv[i], "--reps")) {
            reps = std::max(1, std::atoi(argv[i + 1]));
        }
    }
    const fs::path work = fs::path(dir) / ("voxseg-nrrd-bench-" + std::to_string(::getpid()));
    fs::create_directories(work);
    const std::string raw = (work / "ct-raw.nrrd").string(), gz = (work / "ct-gzip.nrrd").string();
    const Volume ct = bench::makeCtPhantom(nx, ny, nz);
    check(io::writeImage(ct, raw));
    gzipNrrd(raw, gz);
    const double bytes = static_cast<double>(ct.geometry().voxelCount()) * 2;
    std::printf("volume %ldx%ldx%ld int16 (%.0f MB); gzip file %.0f MB; %d reps, medians\n", nx, ny,
                nz, bytes / 1e6, static_cast<double>(fs::file_size(gz)) / 1e6, reps);
    for (const std::string& path : {gz, raw}) {
        std::vector<double> voxseg_s, itk_s;
        for (int r = 0; r < reps; ++r) {
            voxseg_s.push_back(seconds([&] { check(io::readImage(path).status()); }));
            itk_s.push_back(seconds([&] {
                auto reader = itk::ImageFileReader<Image3<int16_t>>::New();
                reader->SetFileName(path);
                reader->SetImageIO(itk::NrrdImageIO::New());
                reader->Update();
            }));
        }
        const double v = median(voxseg_s), t = median(itk_s);
        std::printf("%-5s voxseg readImage %.3f s, ITK ImageFileReader %.3f s: %.2fx\n",
                    path == gz ? "gzip" : "raw", v, t, t / v);
    }
    fs::remove_all(work);
    return 0;
}
