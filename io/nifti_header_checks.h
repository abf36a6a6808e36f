// Checks of a NIfTI-1 header (.nii, .nii.gz) made before ITK's reader sees it: finite geometry
// (ITK 5.2 aborts or hangs on some non-finite or huge matrices), the bytes it claims against
// the file (issue 35: a 1,376-byte .nii claiming 1250^3 float64 held 15.4 GB for 40 s), and a
// .nii.gz stream that really holds them. Internal to io/ (image_io.cpp). Thread safety:
// reentrant (checkNiftiComplete runs on a second thread while ITK reads).
#pragma once

#include "core/status.h"

#include <string>

namespace voxseg::io {

// The spacing, quaternion and affine rows in use finite and within 1e9; ok when the header is
// not one ITK reads (ITK says what is wrong).
Status checkNiftiHeaderFinite(const std::string& path);
// A .nii holds vox_offset + voxels bytes; a .nii.gz's stream can inflate to them (1032:1).
Status checkNiftiClaim(const std::string& path);
// A .nii.gz's gzip stream inflates to what the header promises (CRC checked); ok for a .nii.
Status checkNiftiComplete(const std::string& path);

}  // namespace voxseg::io
