// Label surfaces for the 3D view: per label, marching cubes on the label's mask (ITK's
// itk::BinaryMask3DMeshSource, on the label's bounding box only) followed by Taubin smoothing
// (lambda/mu, which smooths stair steps without shrinking) and per-vertex normals. Vertices are
// in LPS millimetres through the label map's full geometry (direction cosines included). Masks
// larger than `max_voxels` are downsampled by an integer factor first so a whole-body label map
// stays interactive. Qt-free; plain function, reentrant; cancellable through `progress`.
#pragma once

#include "core/progress.h"
#include "core/status.h"
#include "core/volume.h"
#include "pipeline/labels.h"

#include <array>
#include <cstdint>
#include <vector>

namespace voxseg::ui {

struct SurfaceMesh {
    int label = 0;
    std::array<uint8_t, 3> color{255, 0, 0};
    std::vector<float> positions;  // x, y, z per vertex (LPS mm)
    std::vector<float> normals;  // unit, per vertex (orientation not guaranteed: light both sides)
    std::vector<uint32_t> triangles;  // 3 vertex indices each
    size_t vertexCount() const { return positions.size() / 3; }
    size_t triangleCount() const { return triangles.size() / 3; }
};

struct SurfaceOptions {
    int smoothing_iterations = 15;  // Taubin steps (each one lambda and one mu pass); 0 = none
    double lambda = 0.5;
    double mu = -0.53;
    int64_t max_voxels = 24 << 20;  // per label bounding box, before downsampling
    // Only these label values (empty: every label): the 3D view re-meshes an edited label
    // without the others.
    std::vector<int> only_labels;
    // Where those labels' voxels can be (inclusive index box; lo > hi: the whole volume): an
    // edit's re-mesh scans only there instead of the whole label map.
    std::array<int64_t, 3> search_lo{0, 0, 0};
    std::array<int64_t, 3> search_hi{-1, -1, -1};
};

// One mesh per label value in `labels` that has voxels (and per other nonzero value found, with
// pipeline::labelColor's palette colour). Empty label map: no meshes.
Result<std::vector<SurfaceMesh>> buildLabelSurfaces(const Volume& label_map,
                                                    const std::vector<pipeline::LabelInfo>& labels,
                                                    const SurfaceOptions& options = {},
                                                    const Progress& progress = {});

// Taubin smoothing in place (exposed for tests): positions move, connectivity stays.
void taubinSmooth(std::vector<float>& positions, const std::vector<uint32_t>& triangles,
                  int iterations, double lambda, double mu);
// A coarser copy of `mesh` by vertex clustering: vertices in the same cube of `cell_mm` (LPS
// axes) merge into their mean, triangles that collapse are dropped, normals are recomputed.
// Used for the 3D view while it is rotated (software OpenGL draws ~3 M triangles/s); the full
// mesh is drawn when the interaction ends. Written here: ITK has no decimation for these
// meshes and VTK is not a dependency; clustering is 40 lines and keeps the shape within a cell.
SurfaceMesh decimateMesh(const SurfaceMesh& mesh, double cell_mm);
// Decimated copies of `meshes` with at most about `max_triangles` in all (one cell size for all
// meshes, grown until the total fits); meshes already under 1/50 of the budget are kept whole.
std::vector<SurfaceMesh> decimateMeshes(const std::vector<SurfaceMesh>& meshes,
                                        size_t max_triangles);
// Area-weighted vertex normals.
std::vector<float> vertexNormals(const std::vector<float>& positions,
                                 const std::vector<uint32_t>& triangles);

}  // namespace voxseg::ui
