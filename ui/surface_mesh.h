// Label surfaces for the 3D view: per label, marching cubes on the label's mask (ITK's
// itk::BinaryMask3DMeshSource, on the label's bounding box only) followed by Taubin smoothing
// (lambda/mu, which smooths stair steps without shrinking) and per-vertex normals. Vertices are
// in LPS millimetres through the label map's full geometry (direction cosines included). Masks
// larger than `max_voxels` are downsampled by an integer factor first so a whole-body label map
// stays interactive. Qt-free; plain function, reentrant; cancellable through `progress`.
// An edit re-meshes only around the voxels it changed (patchLabelSurface): the mesh keeps, per
// vertex, where marching cubes put it before smoothing, so the re-meshed patch is welded onto the
// rest of the surface at exactly those vertices (closed, no cracks) and its cost follows the
// edit, not the size of the label it cut into.
#pragma once

#include "core/progress.h"
#include "core/status.h"
#include "core/volume.h"
#include "pipeline/labels.h"
#include "ui/index_box.h"

#include <array>
#include <cstdint>
#include <vector>

namespace voxseg::ui {

// Where a label's mask was sampled: grid point g is the label map's voxel origin + g * step.
struct SurfaceGrid {
    std::array<int64_t, 3> origin{0, 0, 0};
    int64_t step = 1;
};

struct SurfaceMesh {
    int label = 0;
    SurfaceGrid grid;
    std::array<uint8_t, 3> color{255, 0, 0};
    std::vector<float> positions;  // x, y, z per vertex (LPS mm)
    std::vector<float> normals;  // unit, per vertex (orientation not guaranteed: light both sides)
    std::vector<uint32_t> triangles;  // 3 vertex indices each
    // Per vertex, its marching-cubes position on the grid before smoothing (twice the grid
    // coordinate per axis, packed; surfaceKeyCoord unpacks): identifies the vertex across
    // re-meshes. Empty on meshes that cannot be patched (decimated copies).
    std::vector<uint64_t> keys;
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
                                                    const std::vector<LabelInfo>& labels,
                                                    const SurfaceOptions& options = {},
                                                    const Progress& progress = {});

// Re-meshes `mesh` (a surface of buildLabelSurfaces, label mesh.label) where the label map's
// voxels in the index boxes `changed` changed: the marching cubes touching each box (plus a seam
// of 2 cubes) are rebuilt from a window with a 10-cube margin, smoothed there, and replace the
// old ones; vertices on the seams are shared with the unchanged rest (same grid, same step), so
// the result is the surface a full rebuild on that grid would have before smoothing, closed.
// Returns false, leaving `mesh` alone, when a patch is not worth it (the windows hold more grid
// points than the label's grid box, or the mesh has no keys): build the label again instead.
// A label edited away leaves a mesh without triangles.
Result<bool> patchLabelSurface(const Volume& label_map, const std::vector<IndexBox>& changed,
                               SurfaceMesh& mesh, const SurfaceOptions& options = {});
// Twice the grid coordinate of `key` along `axis` (0-2).
int64_t surfaceKeyCoord(uint64_t key, int axis);

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
