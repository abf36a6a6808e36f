// Reading and writing NIfTI (.nii, .nii.gz), NRRD (.nrrd, .nhdr) and MetaImage (.mha, .mhd)
// through ITK, with exact geometry round trips (LPS inside voxseg; ITK converts to RAS for NIfTI).
// Writes are atomic: to a temporary name in the target folder, then renamed, so an existing file
// is never half-overwritten (fsync, then rename). .nii.gz is compressed in parallel (libdeflate),
// not by single-threaded zlib. For .nii/.nii.gz volumes of 4 MiB and more, ITK writes only the
// header (of a two-slice copy) and voxseg writes the voxels from memory: the same bytes as ITK's
// whole-volume output, without ITK's copy or an uncompressed temporary file. Thread safety:
// reentrant.
#pragma once

#include "core/limits.h"
#include "core/progress.h"
#include "core/status.h"
#include "core/volume.h"

#include <string>
#include <vector>

namespace voxseg::io {

enum class ImageFormat { kUnknown, kNifti, kNiftiGz, kNrrd, kMetaImage };

// The file name extensions of image files, the one list (lower case; matched without regard to
// case, the longest first): .nii.gz .nii .nrrd .nhdr .mha .mhd. .nhdr and .mhd are detached
// headers naming a separate data file.
const std::vector<std::string>& imageExtensions();
// The extension of `path` from imageExtensions(), as spelled there ("" when none).
std::string imageExtension(const std::string& path);

// From the file name's extension.
ImageFormat imageFormatFromPath(const std::string& path);
bool isImageFile(const std::string& path);

// A header that claims more than max_voxels voxels (core/limits.h; --max-voxels) is refused
// before anything is allocated.
Result<Volume> readImage(const std::string& path, const Progress& progress = {},
                         int64_t max_voxels = kDefaultMaxVoxels);

// What readImage() would return, from the header only (no voxel data is read).
struct ImageHeader {
    Geometry geometry;
    PixelType pixel_type = PixelType::kFloat32;
    ImageFormat format = ImageFormat::kUnknown;
};
Result<ImageHeader> readImageHeader(const std::string& path);

const char* imageFormatName(ImageFormat format);  // "NIfTI", "NIfTI (gzip)", "NRRD", "MetaImage"

struct ImageWriteOptions {
    int compression_level = 6;  // deflate level for .nii.gz / compressed NRRD/MHA
    int threads = 0;            // 0 = all cores
    bool overwrite = true;      // false: fail if the file exists
};

Status writeImage(const Volume& volume, const std::string& path,
                  const ImageWriteOptions& options = {}, const Progress& progress = {});

}  // namespace voxseg::io
