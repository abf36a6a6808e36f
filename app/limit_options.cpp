#include "app/limit_options.h"

#include <fmt/format.h>

namespace voxseg::app {

ReadLimits LimitOptions::toReadLimits() const {
    ReadLimits r;
    r.frames_per_file = static_cast<int64_t>(frames_per_file);
    r.frame_bytes = static_cast<uint64_t>(frame_bytes);
    if (inflated_bytes > 0)
        r.inflated_bytes_per_file = r.inflated_image_bytes = static_cast<uint64_t>(inflated_bytes);
    r.files_per_scan = static_cast<int64_t>(files_per_scan);
    r.nesting_depth = static_cast<int>(nesting_depth);
    r.model_file_bytes = static_cast<uint64_t>(model_file_bytes);
    r.graph_nodes = static_cast<int64_t>(graph_nodes);
    r.labels = static_cast<size_t>(labels);
    r.manifest_rows = static_cast<size_t>(manifest_rows);
    return r;
}

void addLimitOptions(CLI::App& cli, LimitOptions& o) {
    const char* group = "Input limits (refuse inputs that claim more, before reading them)";
    auto add = [&](const char* name, double& value, const std::string& what, double most) {
        cli.add_option(name, value, what)
            ->group(group)
            ->check(CLI::Range(1.0, most))
            ->default_str(fmt::format("{:g}", value));
    };
    add("--max-frames-per-file", o.frames_per_file, "Frames one DICOM file may claim", 1e12);
    add("--max-frame-bytes", o.frame_bytes,
        "Bytes one uncompressed DICOM frame may claim (at most 2^31: DCMTK's frame API)",
        static_cast<double>(kMaxFrameBytes));
    add("--max-inflated-bytes", o.inflated_bytes,
        "Bytes compressed data may inflate to: a deflated DICOM file, the voxels of a .nii.gz, "
        "gzip NRRD or compressed MetaImage (from the header, before inflating)",
        1e15);
    cli.get_option("--max-inflated-bytes")
        ->default_str(fmt::format("{:g} (deflated DICOM), {:g} (image files)",
                                  static_cast<double>(kMaxInflatedBytesPerFile),
                                  static_cast<double>(kMaxInflatedImageBytes)));
    add("--max-files", o.files_per_scan, "Files one DICOM scan (folder, DICOMDIR) may hold", 1e12);
    // DCMTK recurses once per level: 1000 levels take about a quarter of a thread's 8 MB stack
    // (it overflowed near 5600), so the option cannot raise the limit to where it crashes again.
    add("--max-nesting-depth", o.nesting_depth,
        "Levels of nested sequences one DICOM data set may have (at most 1000: DCMTK's parser "
        "recurses per level)",
        1000);
    add("--max-model-bytes", o.model_file_bytes, "Bytes of one ONNX model file", 1e15);
    add("--max-graph-nodes", o.graph_nodes, "Nodes of one ONNX graph", 1e12);
    add("--max-labels", o.labels, "Labels a model.json may list", 32767);
    add("--max-manifest-rows", o.manifest_rows, "Cases one batch manifest may list", 1e12);
}

}  // namespace voxseg::app
