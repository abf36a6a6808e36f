// Resource limits of voxseg's readers, in one place (ITK-free: the pixel reader and its fuzz
// target include it). A header that claims more is refused with a message that names the file,
// the claim, the limit and the option that raises it, before anything of that size is
// allocated: a corrupt or hostile file must not end in an allocation failure.
//
// The constants are the defaults; ReadLimits holds the values in force for the process, set
// once from the command line (app/limit_options.cpp: --max-frames-per-file, ...) before any
// reading starts and read by every parser through readLimits().
#pragma once

#include <cstddef>
#include <cstdint>

namespace voxseg {

// Largest volume loadSeries() or readImage() decodes (voxels, before and after resampling):
// 2e9 int16 voxels are 4 GB. loadSeries() takes another limit (DicomLoadOptions::max_voxels,
// --max-voxels).
inline constexpr int64_t kDefaultMaxVoxels = 2'000'000'000;

// Most frames one file may claim (enhanced CT/MR and 4D series hold thousands): the scan skips a
// file that claims more before it builds a per-frame list.
inline constexpr int64_t kMaxFramesPerFile = 100'000;

// Largest frame one DICOM file may claim, in bytes as stored uncompressed (rows x columns x
// BitsAllocated / 8): DCMTK's frame API takes a 32-bit buffer size.
inline constexpr uint64_t kMaxFrameBytes = uint64_t{1} << 31;

// Most bytes a Deflated Explicit VR Little Endian file may inflate to (dataset, pixel data
// included). DCMTK inflates the whole file into memory as it parses; deflate is used for small
// objects (SR, presentation states), not for volumes, so 1 GiB is generous.
inline constexpr uint64_t kMaxInflatedBytesPerFile = uint64_t{1} << 30;
// Most bytes the compressed voxels of one image file (.nii.gz, gzip NRRD, compressed MetaImage)
// may inflate to. They inflate into the buffer the header's claim sized, never past it, and the
// claim is checked against the file size, --max-voxels and the memory limit first; so the default
// stays out of the way of real images (kDefaultMaxVoxels of float64 is 16 GB; a float32 CT of
// 512x512x1200 is 1.2 GB, past the DICOM default above). --max-inflated-bytes sets both.
inline constexpr uint64_t kMaxInflatedImageBytes = uint64_t{16} << 30;

// Deepest nesting of sequences one DICOM data set may have (files, network, DICOMDIR, SEG,
// RTSTRUCT). DCMTK's parser recurses once per sequence and item and has no limit of its own: a
// 212 KB file nested 5,600 deep overflowed its stack. Real objects nest a few levels (enhanced
// multi-frame functional groups 3, structured reports rarely past 20); each level counts the
// sequence and its item once.
inline constexpr int kMaxNestingDepth = 128;

// Most files one DICOM scan (a folder, a file list, a DICOMDIR) reads headers from: a study of
// 100000 instances is large (a 4D cardiac CT); more is a wrong folder (a PACS archive's root).
inline constexpr int64_t kMaxFilesPerScan = 1'000'000;

// Model packages (engine import, model.json). Largest ONNX file read (protobuf's own ceiling is
// 2 GiB; nnU-Net and TotalSegmentator networks are 30-500 MB): checked before reading.
inline constexpr uint64_t kMaxModelFileBytes = 2'000'000'000;
// Most nodes one ONNX graph may hold (a 3D nnU-Net ResEnc L has about 300, a SwinUNETR about
// 3000): checked right after parsing, before any node is imported.
inline constexpr int64_t kMaxGraphNodes = 100'000;
// Most bytes of constants one ONNX import may compute by folding (Expand, Tile, Cast, ... of the
// file's constants), counted over the whole import: a 157 KB model made the importer hold more
// than 2 GB (fuzz_onnx_import). MONAI's SwinUNETR at 96^3 folds 540 MiB (its shifted-window
// masks and their intermediates; measured), about 3x that at 128^3: the 512 MiB of session 12
// refused it. The fuzz target sets 256 MiB (libFuzzer's 2 GB memory limit).
inline constexpr uint64_t kMaxFoldedConstantBytes = uint64_t{4} << 30;
// Most labels model.json may list (TotalSegmentator has 117; label values are 1..32767).
inline constexpr size_t kMaxLabels = 4096;
// Most ONNX files one "models" list (an ensemble) may name (nnU-Net ensembles have 5 folds).
inline constexpr size_t kMaxModelFiles = 64;
// Most stages a format_version 2 package may chain (TotalSegmentator's pipelines use 2-3; each
// stage is a network compiled at load).
inline constexpr size_t kMaxStages = 16;

// Batch manifests: most cases one manifest lists (a million rows hold about 300 MB as cases;
// shard larger runs over several manifests) and its largest file, checked before reading.
inline constexpr size_t kMaxManifestRows = 1'000'000;
inline constexpr uint64_t kMaxManifestBytes = uint64_t{1} << 30;

// The limits in force; the comment beside each field names the command-line option that sets it.
struct ReadLimits {
    int64_t frames_per_file = kMaxFramesPerFile;  // --max-frames-per-file
    uint64_t frame_bytes = kMaxFrameBytes;        // --max-frame-bytes (at most 2^31)
    uint64_t inflated_bytes_per_file = kMaxInflatedBytesPerFile;  // --max-inflated-bytes
    uint64_t inflated_image_bytes = kMaxInflatedImageBytes;       // --max-inflated-bytes
    int64_t files_per_scan = kMaxFilesPerScan;                    // --max-files
    int nesting_depth = kMaxNestingDepth;                         // --max-nesting-depth
    uint64_t model_file_bytes = kMaxModelFileBytes;               // --max-model-bytes
    int64_t graph_nodes = kMaxGraphNodes;                         // --max-graph-nodes
    size_t labels = kMaxLabels;                                   // --max-labels
    size_t manifest_rows = kMaxManifestRows;                      // --max-manifest-rows
};

// The process's limits (the defaults until setReadLimits). Not synchronised: set them before
// threads that read start.
const ReadLimits& readLimits();
void setReadLimits(const ReadLimits& limits);

}  // namespace voxseg
