// Test helpers: reading the grid of a reference NIfTI (ITK, so already LPS) and comparing two
// grids that may order or flip their axes differently (dcm2niix flips rows; voxseg stacks along
// the slice normal): same sizes and spacings per matched axis, same 8 corner voxel centres.
#pragma once

#include "core/geometry.h"

#include <gtest/gtest.h>
#include <itkImageFileReader.h>  // also registers the IO factories (ITK_USE_FILE)
#include <itkImageIOBase.h>
#include <itkImageIOFactory.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

namespace voxseg::testing {

// Grid of the first 3 dimensions of an image file; size[2] = 1 for 2D files.
inline bool readGrid(const std::string& path, Geometry& g, int& dims) {
    auto io = itk::ImageIOFactory::CreateImageIO(path.c_str(), itk::IOFileModeEnum::ReadMode);
    if (!io) return false;
    io->SetFileName(path);
    io->ReadImageInformation();
    dims = static_cast<int>(io->GetNumberOfDimensions());
    for (int a = 0; a < 3; ++a) {
        g.size[a] = a < dims ? static_cast<int64_t>(io->GetDimensions(a)) : 1;
        g.spacing[a] = a < dims ? io->GetSpacing(a) : 1.0;
        g.origin[a] = a < dims ? io->GetOrigin(a) : 0.0;
        std::vector<double> d = a < dims ? io->GetDirection(a) : std::vector<double>{};
        for (int r = 0; r < 3; ++r)
            g.direction[r * 3 + a] = r < static_cast<int>(d.size()) ? d[r] : (r == a);
    }
    return true;
}

inline std::vector<Vec3> cornerCentres(const Geometry& g) {
    std::vector<Vec3> out;
    for (int c = 0; c < 8; ++c) {
        Vec3 idx{(c & 1) ? double(g.size[0] - 1) : 0.0, (c & 2) ? double(g.size[1] - 1) : 0.0,
                 (c & 4) ? double(g.size[2] - 1) : 0.0};
        out.push_back(g.indexToPhysical(idx));
    }
    return out;
}

inline void expectSameGrid(const Geometry& mine, const Geometry& ref, double mm_tol, double cos_tol,
                           const std::string& what) {
    for (int a = 0; a < 3; ++a) {
        int match = -1;
        for (int b = 0; b < 3; ++b)
            if (std::abs(std::abs(dot(mine.axisDirection(a), ref.axisDirection(b))) - 1) < cos_tol)
                match = b;
        ASSERT_GE(match, 0) << what << ": axis " << a
                            << " of voxseg has no parallel reference axis";
        EXPECT_EQ(mine.size[a], ref.size[match]) << what << ": size of axis " << a;
        EXPECT_NEAR(mine.spacing[a], ref.spacing[match], 1e-3 * ref.spacing[match])
            << what << ": spacing of axis " << a;
    }
    std::vector<Vec3> ours = cornerCentres(mine);
    std::vector<Vec3> theirs = cornerCentres(ref);
    for (const Vec3& p : ours) {
        double best = 1e30;
        for (const Vec3& q : theirs)
            best = std::min(best, norm({p[0] - q[0], p[1] - q[1], p[2] - q[2]}));
        EXPECT_LT(best, mm_tol) << what << ": corner (" << p[0] << ", " << p[1] << ", " << p[2]
                                << ") is not a reference corner";
    }
}

// Runs Debian's dcm2niix on `dicom_dir` into `out_dir`; returns the .nii paths it wrote (empty
// when dcm2niix is not installed).
inline std::vector<std::string> runDcm2niix(const std::string& dicom_dir,
                                            const std::string& out_dir) {
    if (!std::filesystem::exists("/usr/bin/dcm2niix")) return {};
    std::string cmd =
        "/usr/bin/dcm2niix -z n -f %s_%e -o '" + out_dir + "' '" + dicom_dir + "' > /dev/null 2>&1";
    if (std::system(cmd.c_str()) != 0) return {};
    std::vector<std::string> out;
    for (const auto& e : std::filesystem::directory_iterator(out_dir))
        if (e.path().extension() == ".nii") out.push_back(e.path().string());
    std::sort(out.begin(), out.end());
    return out;
}

}  // namespace voxseg::testing
