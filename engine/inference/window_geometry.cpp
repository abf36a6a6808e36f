#include "engine/inference/window_geometry.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstddef>

namespace voxseg::engine {

const char* windowConventionName(WindowConvention convention) {
    return convention == WindowConvention::kMonai ? "monai" : "nnunet";
}

const char* accumulationName(Accumulation accumulation) {
    return accumulation == Accumulation::kNnUNetFp16 ? "nnunet-fp16" : "normalized";
}

Result<Accumulation> parseAccumulation(const std::string& name) {
    if (name == "normalized") return Accumulation::kNormalized;
    if (name == "nnunet-fp16") return Accumulation::kNnUNetFp16;
    return invalidArgument("unknown sliding-window accumulation '" + name +
                           "': use \"normalized\" or \"nnunet-fp16\"");
}

Result<WindowConvention> parseWindowConvention(const std::string& name) {
    if (name == "nnunet") return WindowConvention::kNnUNet;
    if (name == "monai") return WindowConvention::kMonai;
    return invalidArgument("unknown sliding-window convention '" + name +
                           "': use \"nnunet\" or \"monai\"");
}

Status validateSlidingWindowOptions(const SlidingWindowOptions& options, const Shape& image_shape) {
    const size_t rank = options.patch_size.size();
    if (rank < 1 || rank > 3)
        return invalidArgument("patch_size must have 1 to 3 spatial axes, got " +
                               shapeToString(options.patch_size));
    for (int64_t p : options.patch_size)
        if (p <= 0)
            return invalidArgument("patch_size must be positive, got " +
                                   shapeToString(options.patch_size));
    if (!(options.overlap >= 0.0 && options.overlap < 1.0))
        return invalidArgument("overlap must be in [0, 1), got " + std::to_string(options.overlap));
    if (!(options.sigma_scale > 0.0))
        return invalidArgument("gaussian sigma scale must be > 0, got " +
                               std::to_string(options.sigma_scale));
    if (options.batch < 1)
        return invalidArgument("batch must be at least 1, got " + std::to_string(options.batch));
    if (options.accumulator != DType::kFloat32 && options.accumulator != DType::kFloat16)
        return invalidArgument(std::string("the sliding-window accumulator is float32 or float16, "
                                           "not ") +
                               dtypeName(options.accumulator));
    if (options.accumulation == Accumulation::kNnUNetFp16 &&
        options.convention != WindowConvention::kNnUNet)
        return invalidArgument(
            "accumulation nnunet-fp16 is nnU-Net's arithmetic and needs the nnunet window "
            "convention, got " +
            std::string(windowConventionName(options.convention)));
    std::vector<bool> seen(rank, false);
    for (int axis : options.mirror_axes) {
        if (axis < 0 || axis >= static_cast<int>(rank))
            return invalidArgument("mirror axis " + std::to_string(axis) +
                                   " is not a spatial axis (0.." + std::to_string(rank - 1) + ")");
        if (seen[static_cast<size_t>(axis)])
            return invalidArgument("mirror axis " + std::to_string(axis) + " is listed twice");
        seen[static_cast<size_t>(axis)] = true;
    }
    if (!image_shape.empty() && image_shape.size() != rank + 1)
        return invalidArgument("image " + shapeToString(image_shape) +
                               " must be [channels, spatial...] with " + std::to_string(rank) +
                               " spatial axes to match patch_size " +
                               shapeToString(options.patch_size));
    return Status::ok();
}

std::vector<int64_t> windowStarts(int64_t image, int64_t patch, double overlap,
                                  WindowConvention convention) {
    assert(image >= patch && patch > 0);
    std::vector<int64_t> starts;
    if (convention == WindowConvention::kNnUNet) {
        // nnunetv2.inference.sliding_window_prediction.compute_steps_for_sliding_window.
        const double target_step = static_cast<double>(patch) * (1.0 - overlap);
        const int64_t num_steps =
            static_cast<int64_t>(std::ceil(static_cast<double>(image - patch) / target_step)) + 1;
        const double actual_step =
            num_steps > 1 ? static_cast<double>(image - patch) / static_cast<double>(num_steps - 1)
                          : 99999999999.0;
        for (int64_t i = 0; i < num_steps; ++i) {
            // np.round rounds half to even, as nearbyint does in the default rounding mode.
            starts.push_back(
                static_cast<int64_t>(std::nearbyint(actual_step * static_cast<double>(i))));
        }
        return starts;
    }
    // monai.inferers.utils._get_scan_interval + monai.data.utils.dense_patch_slices.
    int64_t interval = patch;
    if (patch != image) {
        interval = static_cast<int64_t>(static_cast<double>(patch) * (1.0 - overlap));
        if (interval <= 0) interval = 1;
    }
    const int64_t num = (image + interval - 1) / interval;
    int64_t count = 1;
    for (int64_t d = 0; d < num; ++d) {
        if (d * interval + patch >= image) {
            count = d + 1;
            break;
        }
    }
    for (int64_t i = 0; i < count; ++i) {
        const int64_t start = i * interval;
        starts.push_back(start - std::max<int64_t>(start + patch - image, 0));
    }
    return starts;
}

std::array<int64_t, 3> padTo3D(const std::vector<int64_t>& v) {
    std::array<int64_t, 3> out{1, 1, 1};
    const size_t offset = 3 - v.size();
    for (size_t i = 0; i < v.size(); ++i) out[offset + i] = v[i];
    return out;
}

WindowGrid windowGrid(const SlidingWindowOptions& options, const std::vector<int64_t>& spatial) {
    WindowGrid g;
    g.patch = padTo3D(options.patch_size);
    g.dims = padTo3D(spatial);
    for (size_t a = 0; a < 3; ++a) {
        g.padded[a] = std::max(g.dims[a], g.patch[a]);
        g.pad_before[a] = (g.padded[a] - g.dims[a]) / 2;
        g.needs_pad = g.needs_pad || g.padded[a] != g.dims[a];
    }
    g.voxels = g.padded[0] * g.padded[1] * g.padded[2];
    for (size_t a = 0; a < 3; ++a)
        g.starts[a] = windowStarts(g.padded[a], g.patch[a], options.overlap, options.convention);
    g.num_windows =
        static_cast<int64_t>(g.starts[0].size() * g.starts[1].size() * g.starts[2].size());
    return g;
}

std::array<int64_t, 3> gridOrigin(const WindowGrid& grid, int64_t window) {
    const auto& starts = grid.starts;
    const int64_t nx = static_cast<int64_t>(starts[2].size());
    const int64_t ny = static_cast<int64_t>(starts[1].size());
    return {starts[0][static_cast<size_t>(window / (nx * ny))],
            starts[1][static_cast<size_t>((window / nx) % ny)],
            starts[2][static_cast<size_t>(window % nx)]};
}

std::vector<unsigned> flipSets(const std::vector<int>& mirror_axes, size_t rank,
                               bool nnunet_order) {
    const auto bit = [rank](int axis) { return 1u << (3 - rank + static_cast<size_t>(axis)); };
    std::vector<unsigned> flip_sets;
    if (nnunet_order) {
        flip_sets.push_back(0);
        const size_t n = mirror_axes.size();
        for (size_t size = 1; size <= n; ++size) {
            std::vector<bool> chosen(n, false);
            std::fill(chosen.begin(), chosen.begin() + static_cast<std::ptrdiff_t>(size), true);
            do {  // lexicographic combinations, as itertools.combinations yields them
                unsigned bits = 0;
                for (size_t i = 0; i < n; ++i)
                    if (chosen[i]) bits |= bit(mirror_axes[i]);
                flip_sets.push_back(bits);
            } while (std::prev_permutation(chosen.begin(), chosen.end()));
        }
        return flip_sets;
    }
    unsigned mirror_bits = 0;
    for (int axis : mirror_axes) mirror_bits |= bit(axis);
    for (unsigned s = 0; s < 8; ++s)
        if ((s & ~mirror_bits) == 0) flip_sets.push_back(s);
    return flip_sets;
}

}  // namespace voxseg::engine
