// Byte-identity check of voxseg's NIfTI writer against ITK's: io::writeImage writes large .nii and
// .nii.gz volumes with ITK's header and its own voxel write (io/image_io.cpp); the files must be
// exactly what ITK's ImageFileWriter writes for the whole volume (.nii.gz: once decompressed).
// Every voxel type, oblique and flipped directions, odd sizes, above and below the size where the
// direct path starts. Exit status 0 = identical, 1 = a difference (printed). Registered as a ctest
// (voxseg_nifti_identity_check); also: voxseg_nifti_identity_check [--dir /tmp]
#include "core/file_io.h"
#include "core/volume.h"
#include "io/image_io.h"

#include <itkImageFileWriter.h>
#include <unistd.h>
#include <zlib.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

namespace {
namespace fs = std::filesystem;
using namespace voxseg;

std::vector<char> readAll(const std::string& path) {
    const auto bytes = readFileBytes(path);
    return bytes.isOk() ? std::vector<char>(bytes->begin(), bytes->end()) : std::vector<char>{};
}

std::vector<char> gunzipAll(const std::string& path) {
    std::vector<char> out;
    gzFile f = gzopen(path.c_str(), "rb");
    if (f == nullptr) return out;
    std::vector<char> buf(1 << 20);
    int n = 0;
    while ((n = gzread(f, buf.data(), static_cast<unsigned>(buf.size()))) > 0)
        out.insert(out.end(), buf.data(), buf.data() + n);
    gzclose(f);
    return out;
}

template <typename T>
Volume makeVolume(const Geometry& g, unsigned seed) {
    Volume v = Volume::allocate<T>(g);
    std::mt19937 rng(seed);
    T* p = v.data<T>();
    for (int64_t i = 0; i < g.voxelCount(); ++i)
        p[i] = static_cast<T>(static_cast<int>(rng() % 251) - 7);
    return v;
}

template <typename T>
bool checkOne(const Geometry& g, const fs::path& dir, const std::string& name) {
    const Volume v = makeVolume<T>(g, 42);
    const std::string itk_path = (dir / (name + ".itk.nii")).string();
    auto writer = itk::ImageFileWriter<Image3<T>>::New();
    writer->SetFileName(itk_path);
    writer->SetInput(v.image<T>());
    writer->SetUseCompression(false);
    writer->Update();
    const std::vector<char> ref = readAll(itk_path);
    bool ok = true;
    for (const char* ext : {".nii", ".nii.gz"}) {
        const std::string out = (dir / (name + ".voxseg" + ext)).string();
        const Status st = io::writeImage(v, out);
        if (!st.isOk()) {
            std::printf("FAIL %s%s: %s\n", name.c_str(), ext, st.toString().c_str());
            ok = false;
            continue;
        }
        const std::vector<char> got = std::strcmp(ext, ".nii") == 0 ? readAll(out) : gunzipAll(out);
        size_t first = 0;
        while (first < std::min(got.size(), ref.size()) && got[first] == ref[first]) ++first;
        if (got != ref) {
            std::printf("FAIL %s%s: %zu vs %zu bytes, first difference at byte %zu\n", name.c_str(),
                        ext, got.size(), ref.size(), first);
            ok = false;
        } else {
            std::printf("ok   %s%s (%zu bytes)\n", name.c_str(), ext, ref.size());
        }
    }
    return ok;
}

Geometry oblique(int64_t nx, int64_t ny, int64_t nz) {
    Geometry g;
    g.size = {nx, ny, nz};
    g.spacing = {0.7031249, 0.81, 1.25};
    g.origin = {-180.3, 12.5, -1033.75};
    const double a = 0.3, b = -0.2;  // rotations about z, then x
    const double ca = std::cos(a), sa = std::sin(a), cb = std::cos(b), sb = std::sin(b);
    // Columns are the axis directions: R = Rx(b) * Rz(a), last axis flipped (a descending stack).
    const double r[9] = {ca, -sa, 0, cb * sa, cb * ca, -sb, sb * sa, sb * ca, cb};
    for (int row = 0; row < 3; ++row)
        for (int col = 0; col < 3; ++col)
            g.direction[row * 3 + col] = r[row * 3 + col] * (col == 2 ? -1.0 : 1.0);
    return g;
}

}  // namespace

int main(int argc, char** argv) {
    std::string dir = fs::temp_directory_path().string();
    for (int i = 1; i + 1 < argc; i += 2)
        if (!std::strcmp(argv[i], "--dir")) dir = argv[i + 1];
    const fs::path work = fs::path(dir) / ("voxseg-nifti-identity-" + std::to_string(::getpid()));
    fs::create_directories(work);
    bool ok = true;
    Geometry axial;
    axial.size = {512, 512, 9};
    axial.spacing = {0.68, 0.68, 2.5};
    axial.origin = {-174.1, -170.0, 20.0};
    ok &= checkOne<int16_t>(axial, work, "int16_axial_512x512x9");
    ok &= checkOne<int16_t>(oblique(333, 271, 31), work, "int16_oblique_333x271x31");
    ok &= checkOne<int16_t>(oblique(1024, 1024, 3), work, "int16_oblique_1024x1024x3");
    ok &= checkOne<int16_t>(oblique(1024, 1024, 2), work, "int16_two_slices_1024x1024x2");
    ok &= checkOne<int16_t>(oblique(64, 64, 40), work, "int16_small");
    ok &= checkOne<uint8_t>(oblique(1001, 997, 7), work, "uint8_1001x997x7");
    ok &= checkOne<int8_t>(oblique(1024, 640, 8), work, "int8_1024x640x8");
    ok &= checkOne<uint16_t>(oblique(257, 259, 61), work, "uint16_257x259x61");
    ok &= checkOne<int32_t>(oblique(200, 190, 33), work, "int32_200x190x33");
    ok &= checkOne<uint32_t>(oblique(200, 190, 33), work, "uint32_200x190x33");
    ok &= checkOne<float>(oblique(301, 211, 23), work, "float32_301x211x23");
    ok &= checkOne<double>(oblique(129, 130, 41), work, "float64_129x130x41");
    std::error_code ec;
    fs::remove_all(work, ec);
    std::printf(ok ? "all identical\n" : "DIFFERENCES FOUND\n");
    return ok ? 0 : 1;
}
