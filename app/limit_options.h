// The input limits of core/limits.h as command-line options, for every command at once (global
// options, also accepted after the subcommand): --max-frames-per-file, --max-frame-bytes,
// --max-inflated-bytes, --max-files, --max-nesting-depth, --max-model-bytes, --max-graph-nodes,
// --max-labels, --max-manifest-rows. Each refusal of an input that claims more names its option.
// (--max-voxels is the commands' own: it is a load option.)
#pragma once

#include "core/limits.h"

#include <CLI/CLI.hpp>

namespace voxseg::app {

// What the options parse into: doubles, so that 2e9 may be written; defaults from core/limits.h.
struct LimitOptions {
    double frames_per_file = static_cast<double>(kMaxFramesPerFile);
    double frame_bytes = static_cast<double>(kMaxFrameBytes);
    double inflated_bytes = 0;  // 0: the defaults (DICOM and image files differ); else both
    double files_per_scan = static_cast<double>(kMaxFilesPerScan);
    double nesting_depth = static_cast<double>(kMaxNestingDepth);
    double model_file_bytes = static_cast<double>(kMaxModelFileBytes);
    double graph_nodes = static_cast<double>(kMaxGraphNodes);
    double labels = static_cast<double>(kMaxLabels);
    double manifest_rows = static_cast<double>(kMaxManifestRows);

    ReadLimits toReadLimits() const;
};

void addLimitOptions(CLI::App& cli, LimitOptions& options);

}  // namespace voxseg::app
