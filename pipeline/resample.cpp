#include "pipeline/resample.h"

#include "core/log.h"
#include "pipeline/pixel_dispatch.h"
#include "pipeline/spline_resample.h"

#include <itkIdentityTransform.h>
#include <itkLinearInterpolateImageFunction.h>
#include <itkNearestNeighborInterpolateImageFunction.h>
#include <itkResampleImageFilter.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

namespace voxseg::pipeline {

std::array<int64_t, 3> resampledSize(const Geometry& geometry, const Vec3& target_spacing) {
    std::array<int64_t, 3> size{};
    for (int a = 0; a < 3; ++a) {
        const double n =
            static_cast<double>(geometry.size[a]) * geometry.spacing[a] / target_spacing[a];
        size[a] = std::max<int64_t>(1, static_cast<int64_t>(std::llround(n)));
    }
    return size;
}

Geometry resampledGeometry(const Geometry& geometry, const std::array<int64_t, 3>& new_size) {
    Geometry out = geometry;
    Vec3 first_centre{};  // continuous input index of output voxel 0
    for (int a = 0; a < 3; ++a) {
        const double scale =
            static_cast<double>(geometry.size[a]) / static_cast<double>(new_size[a]);
        out.size[a] = new_size[a];
        out.spacing[a] = geometry.spacing[a] * scale;
        first_centre[a] = 0.5 * scale - 0.5;
    }
    out.origin = geometry.indexToPhysical(first_centre);
    return out;
}

namespace {

int coarsestAxis(const Vec3& spacing, double threshold) {
    const double mx = *std::max_element(spacing.begin(), spacing.end());
    const double mn = *std::min_element(spacing.begin(), spacing.end());
    if (!(mx / mn > threshold)) return -1;
    int axis = -1;
    for (int a = 0; a < 3; ++a) {
        if (spacing[a] == mx) {
            if (axis >= 0) return -1;  // two equally coarse axes: nnU-Net does not separate
            axis = a;
        }
    }
    return axis;
}

// Nearest-neighbour resampling (labels) with ITK, any pixel type.
// ITK's resampler onto `target` in patient space (identity transform, 0 outside) with the
// interpolator `Interpolator<ImageT, double>`.
template <typename T, template <class, class> class Interpolator>
typename Image3<T>::Pointer itkResample(const typename Image3<T>::Pointer& input,
                                        const Geometry& target) {
    using ImageT = Image3<T>;
    using Filter = itk::ResampleImageFilter<ImageT, ImageT, double, double>;
    auto filter = Filter::New();
    filter->SetInput(input);
    filter->SetTransform(itk::IdentityTransform<double, 3>::New());
    filter->SetInterpolator(Interpolator<ImageT, double>::New());
    auto reference = ImageT::New();
    reference->SetRegions(Volume::toItkRegion(target));
    Volume::applyGeometry(target, *reference);
    filter->SetUseReferenceImage(true);
    filter->SetReferenceImage(reference);
    filter->SetDefaultPixelValue(0);
    filter->Update();
    typename ImageT::Pointer out = filter->GetOutput();
    out->DisconnectPipeline();
    return out;
}

// scikit-image's resize clips its result to the value range of the image it is given
// (clip=True); nnU-Net gives it the whole volume, or, when one axis is resampled separately, one
// slice along that axis at a time, whose in-plane result the order-0 pass then copies.
void clipToInputRange(const Volume& input, Volume& out, int axis) {
    const Geometry in_g = input.geometry(), out_g = out.geometry();
    const float* src = input.data<float>();
    float* dst = out.data<float>();
    if (axis < 0) {
        const auto [lo, hi] = std::minmax_element(src, src + in_g.voxelCount());
        const float a = *lo, b = *hi;
        for (int64_t i = 0, n = out_g.voxelCount(); i < n; ++i) dst[i] = std::clamp(dst[i], a, b);
        return;
    }
    const auto n_in = in_g.size[static_cast<size_t>(axis)];
    std::vector<float> lo(static_cast<size_t>(n_in), std::numeric_limits<float>::max());
    std::vector<float> hi(static_cast<size_t>(n_in), std::numeric_limits<float>::lowest());
    const auto& d = in_g.size;
    for (int64_t k = 0, v = 0; k < d[2]; ++k)
        for (int64_t j = 0; j < d[1]; ++j)
            for (int64_t i = 0; i < d[0]; ++i, ++v) {
                const auto s = static_cast<size_t>(axis == 0 ? i : axis == 1 ? j : k);
                lo[s] = std::min(lo[s], src[v]);
                hi[s] = std::max(hi[s], src[v]);
            }
    // The input slice each output slice copies: the order-0 rule of spline_resample.h.
    const AxisSampling map = axisSampling(in_g, out_g, axis);
    const auto& e = out_g.size;
    for (int64_t k = 0, v = 0; k < e[2]; ++k)
        for (int64_t j = 0; j < e[1]; ++j)
            for (int64_t i = 0; i < e[0]; ++i, ++v) {
                const int64_t o = axis == 0 ? i : axis == 1 ? j : k;
                const auto s = static_cast<size_t>(std::clamp<int64_t>(
                    static_cast<int64_t>(std::floor(map.at(o) + 0.5)), 0, n_in - 1));
                dst[v] = std::clamp(dst[v], lo[s], hi[s]);
            }
}

}  // namespace

int separateAxis(const Vec3& from_spacing, const Vec3& to_spacing, double threshold) {
    const int axis = coarsestAxis(from_spacing, threshold);
    if (axis >= 0) return axis;
    return coarsestAxis(to_spacing, threshold);
}

Result<Volume> resampleLinearOnto(const Volume& volume, const Geometry& grid) {
    try {
        const Volume f =
            volume.pixelType() == PixelType::kFloat32 ? volume : volume.castTo(PixelType::kFloat32);
        auto out = itkResample<float, itk::LinearInterpolateImageFunction>(f.image<float>(), grid);
        return Volume::fromImage<float>(out, volume.info());
    } catch (const std::exception& e) {
        return Status(StatusCode::kInternal, std::string("resampling failed: ") + e.what(),
                      volume.info().source);
    }
}

Result<Volume> resampleToGrid(const Volume& volume, const Geometry& target, ResampleKind kind,
                              const Progress& progress, int threads) {
    if (volume.empty()) return invalidArgument("resample: empty volume");
    const Geometry source = volume.geometry();
    bool same_direction = true;
    for (int e = 0; e < 9; ++e)
        same_direction &= std::abs(source.direction[e] - target.direction[e]) < 1e-5;
    if (!same_direction)
        return invalidArgument(
            "resample: target grid has another direction than the volume; reorient first",
            volume.info().source);
    try {
        if (kind == ResampleKind::kLabel) {
            if (source.size == target.size) return volume;
            return withPixelType(volume.pixelType(), [&](auto tag) -> Result<Volume> {
                using T = decltype(tag);
                auto out = itkResample<T, itk::NearestNeighborInterpolateImageFunction>(
                    volume.image<T>(), target);
                return Volume::fromImage<T>(out, volume.info());
            });
        }
        Volume input =
            volume.pixelType() == PixelType::kFloat32 ? volume : volume.castTo(PixelType::kFloat32);
        if (source.size == target.size) return input;
        // In-plane order 3; an anisotropic axis with order 0 (nnU-Net's separate z).
        const int axis = separateAxis(source.spacing, target.spacing);
        std::array<AxisInterpolation, 3> per_axis;
        per_axis.fill(AxisInterpolation::kSpline);
        if (axis >= 0) per_axis[axis] = AxisInterpolation::kNearest;
        progress.report(0.0, "resampling (order 3)");
        Result<Volume> out =
            splineResample(input, target, per_axis, threads, SplineBoundary::kEdge);
        if (out.isOk()) clipToInputRange(input, *out, axis);
        progress.report(1.0, "resampling (order 3)");
        if (axis >= 0)
            log::debug("pipeline.resample", "axis {} resampled separately with order 0", axis);
        return out;
    } catch (const std::exception& e) {
        return Status(StatusCode::kInternal, std::string("resampling failed: ") + e.what(),
                      volume.info().source);
    }
}

Result<Volume> resampleToSpacing(const Volume& volume, const Vec3& target_spacing,
                                 ResampleKind kind, const Progress& progress, int threads) {
    if (volume.empty()) return invalidArgument("resample: empty volume");
    for (double s : target_spacing)
        if (!(s > 0) || !std::isfinite(s))
            return invalidArgument("resample: target spacing must be positive and finite");
    const Geometry source = volume.geometry();
    return resampleToGrid(volume, resampledGeometry(source, resampledSize(source, target_spacing)),
                          kind, progress, threads);
}

}  // namespace voxseg::pipeline
