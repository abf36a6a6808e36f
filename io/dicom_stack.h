// From frame headers to stackable volumes: grouping into series, splitting each series into
// volumes that can be stacked (matrix size, orientation, pixel spacing, image type, echo, stack,
// then time for repeated positions), sorting slices along the normal, and checking the stack
// (duplicates, gaps, uneven spacing, gantry tilt). Every split and every problem is stated in
// the candidate's split_reason / warnings. Internal to io/. Pure functions; reentrant.
#pragma once

#include "io/dicom_header.h"
#include "io/dicom_series.h"

#include <vector>

namespace voxseg::io {

// Tolerances of the geometry checks, named so tests and messages agree.
inline constexpr double kOrientationTolerance = 1e-3;  // max |difference| of IOP cosines
inline constexpr double kGapFactor = 1.5;              // step > 1.5 x median spacing = gap
inline constexpr double kUnevenFraction = 0.05;        // step off the median by > 5 %
inline constexpr double kDuplicateTolerance = 0.01;    // mm along the normal
inline constexpr double kTiltFractionOfPixel = 0.1;    // in-plane drift > 0.1 pixel = tilt

// Candidates with index set (stable: series number, series, then split order).
std::vector<SeriesCandidate> buildCandidates(const std::vector<FrameHeader>& frames);

}  // namespace voxseg::io
