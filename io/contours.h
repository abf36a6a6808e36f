// Planar contours of label planes, and their scan conversion back to pixels: what RTSTRUCT
// (io/rtstruct_writer.h, io/rtstruct_reader.h) is written from and read into. DCMTK-free.
//
// Coordinates are PIXEL coordinates of one plane: x = column index, y = row index, pixel centres
// at integers (pixel (i, j) has its centre at (i, j)). Mapping to patient space (LPS, mm) is the
// caller's: AcquiredPlanes::pixelToPhysical (io/acquired_labels.h).
//
// Extraction is marching squares at iso level 0.5 on the grid of pixel centres: every vertex is
// the midpoint between a pixel centre inside the label and a 4-neighbour outside it, i.e.
// (i + 0.5, j) or (i, j + 0.5); the plane is padded with background, so a label touching the
// border gets vertices on the image edge (-0.5 or columns - 0.5). Connectivity: the label is
// 8-connected (two pixels touching only at a corner belong to the same polygon; the saddle cell
// between them is always resolved towards the label), the background 4-connected. The result
// is a set of disjoint simple polygons (no self-intersections, no shared vertices) with
// collinear vertices merged. Orientation: the label lies on the left of every edge, so outer
// boundaries have positive signed (shoelace) area in (x, y) and holes negative:
// counter-clockwise and clockwise about the plane normal row_dir x col_dir in patient space
// (on screen, with rows drawn downwards, outer boundaries run clockwise).
//
// Holes are separate polygons; the set is read with the EVEN-ODD rule: a pixel is inside when a
// ray from its centre crosses the set's boundary an odd number of times. Every label pixel
// centre lies strictly inside the set, every other centre strictly outside (at least 0.35
// pixels from any edge), so rasterizeContours() of the extracted set reproduces the plane
// exactly. Thread safety: all functions are reentrant.
#pragma once

#include "core/volume.h"

#include <cstdint>
#include <vector>

namespace voxseg::io {

struct ContourPoint {
    double x = 0;  // column (pixel coordinates, see above)
    double y = 0;  // row
};

struct PlanarContour {
    std::vector<ContourPoint> points;  // closed: the last point connects to the first
    bool hole = false;                 // a hole boundary (negative signed area)
};

// Shoelace area in pixel units, positive for outer boundaries (see orientation above).
double signedArea(const std::vector<ContourPoint>& points);

// Contours of the pixels equal to `label` in one plane (`columns` x `rows`, row-major), found
// inside the label's bounding box only. Returns outer boundaries and holes, in scan order of
// their first vertex. T: uint8_t or uint16_t.
template <typename T>
std::vector<PlanarContour> extractContours(const T* plane, int columns, int rows, T label);

// The contours of every label of one plane.
struct LabelContours {
    int label = 0;
    std::vector<PlanarContour> contours;
};
template <typename T>
std::vector<LabelContours> extractPlaneContours(const T* plane, int columns, int rows);

// Every plane k (third index) of a uint8 or uint16 label volume, labels ascending within a plane;
// planes run in parallel (threads: 0 = all cores). Other pixel types give an empty result.
std::vector<std::vector<LabelContours>> extractVolumeContours(const Volume& labels,
                                                              int threads = 0);

// A run of inside pixels of one row: pixels begin .. end-1.
struct PixelSpan {
    int row = 0;
    int begin = 0;
    int end = 0;
};

// Scan conversion of a polygon set by pixel centres with the even-odd rule (orientation and the
// `hole` flags are ignored): pixel (i, j) is inside when the horizontal ray from (i, j) to -x
// crosses an odd number of edges. Edges are half-open in y and a centre exactly on an edge
// counts as right of it (top-left rule), so adjacent polygons never both claim a pixel.
// Polygons may extend beyond the plane (clipped) and may be open or degenerate (a closing edge
// is implied; fewer than 3 points contributes nothing). Spans come sorted by row, then begin.
std::vector<PixelSpan> rasterizeContours(const std::vector<PlanarContour>& contours, int columns,
                                         int rows);

// The same as a columns x rows mask (1 inside, 0 outside).
std::vector<uint8_t> rasterizeContoursToMask(const std::vector<PlanarContour>& contours,
                                             int columns, int rows);

}  // namespace voxseg::io
