// Order-3 B-spline resampling of a float32 volume onto a grid with the same direction, one axis
// at a time (resample.h uses it for images).
//
// A tensor-product B-spline is separable: the prefilter (recursive, pole sqrt(3) - 2, mirror
// boundaries) and the evaluation along one axis commute with those along the others, so filtering
// and evaluating axis by axis gives the 3D result of itk::BSplineInterpolateImageFunction (same
// boundary rules, float rounding aside) with 4 taps per output value instead of 64 and without a
// coefficient image of the input's size. Axes that shrink most go first, so the later passes run
// on the smaller data. Written by hand because ITK has no separable spline resampler: the ITK
// resampler took 0.55 of the 0.75 s pre-processing of a 256x256x150 CT study; the ITK filter
// remains the oracle in tests/pipeline/spline_resample_test.cpp.
//
// Per axis: kSpline (order 3), kNearest (order 0, ITK's round-half-up), or skipped when the
// output samples are the input samples. Positions outside [-0.5, size - 0.5) of the input get 0
// (ResampleImageFilter's default pixel). Reentrant; `threads` = 0 uses every core.
//
// Boundary (what the spline sees beyond the ends of a line): kMirror, ITK's whole-sample
// symmetric extension; kEdge, the end sample repeated, as scipy.ndimage.zoom(mode="nearest")
// computes it for scikit-image's resize(mode="edge"), which nnU-Net resamples images with: scipy
// pads each line with 12 copies of its end samples, prefilters the padded line and evaluates
// inside it; voxseg does the same (its prefilter's initial values differ from scipy's by
// 0.268^13 of the signal, below float32 rounding).
#pragma once

#include "core/geometry.h"
#include "core/status.h"
#include "core/volume.h"

#include <array>

namespace voxseg::pipeline {

enum class AxisInterpolation { kSpline, kNearest };
enum class SplineBoundary { kMirror, kEdge };

// Where output index o along `axis` reads the input (a continuous input index). On a grid that
// keeps the field of view (resample.h resampledGeometry) it is computed as numpy computes it for
// nnU-Net and scikit-image, (o + 0.5) * (in / out) - 0.5, so that order-0 ties at exactly .5
// (24 slices -> 25: output 12 reads 11.5) round the same way (up, as scipy's order 0); on any
// other grid from the geometry, first + o * step.
struct AxisSampling {
    double first = 0, step = 1, scale = 1;
    bool field_of_view = false;
    double at(int64_t o) const {
        return field_of_view ? scale * (static_cast<double>(o) + 0.5) - 0.5
                             : first + static_cast<double>(o) * step;
    }
};
AxisSampling axisSampling(const Geometry& source, const Geometry& target, int axis);

// `volume`: float32. `target`: same direction as the volume (checked).
Result<Volume> splineResample(const Volume& volume, const Geometry& target,
                              const std::array<AxisInterpolation, 3>& per_axis, int threads = 0,
                              SplineBoundary boundary = SplineBoundary::kMirror);

}  // namespace voxseg::pipeline
