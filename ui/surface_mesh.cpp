#include "ui/surface_mesh.h"

#include <itkBinaryMask3DMeshSource.h>
#include <itkMesh.h>
#include <itkTriangleCell.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <unordered_map>

namespace voxseg::ui {
namespace {

using MaskImage = itk::Image<uint8_t, 3>;
using MeshType = itk::Mesh<double, 3>;

constexpr int kKeyBits = 21;
constexpr int64_t kKeyOffset = int64_t{1} << 20;
constexpr uint64_t kKeyMask = (uint64_t{1} << kKeyBits) - 1;

int64_t floorDiv(int64_t a, int64_t b) { return a / b - (a % b != 0 && (a < 0) != (b < 0)); }
int64_t ceilDiv(int64_t a, int64_t b) { return -floorDiv(-a, b); }

uint64_t packKey(const std::array<int64_t, 3>& twice) {
    uint64_t key = 0;
    for (int a = 0; a < 3; ++a)
        key = key << kKeyBits | (static_cast<uint64_t>(twice[a] + kKeyOffset) & kKeyMask);
    return key;
}

// Grid points, inclusive, on each axis.
struct GridBox {
    std::array<int64_t, 3> lo{0, 0, 0};
    std::array<int64_t, 3> hi{-1, -1, -1};
};

// Marching cubes (ITK) of label `value`'s mask sampled at the grid points of `window` (points
// off the volume are background), vertices in LPS mm with their keys; not smoothed, no normals.
Result<SurfaceMesh> meshGridWindow(const Volume& label_map, int value, const SurfaceGrid& grid,
                                   const GridBox& window) {
    const Geometry g = label_map.geometry();
    std::array<int64_t, 3> size{};
    // Per axis, the voxel index of each grid point of the window, -1 off the volume.
    std::array<std::vector<int64_t>, 3> voxel;
    for (int a = 0; a < 3; ++a) {
        size[a] = window.hi[a] - window.lo[a] + 1;
        voxel[a].resize(static_cast<size_t>(size[a]));
        for (int64_t q = 0; q < size[a]; ++q) {
            const int64_t x = grid.origin[a] + (window.lo[a] + q) * grid.step;
            voxel[a][q] = x >= 0 && x < g.size[a] ? x : -1;
        }
    }
    auto mask = MaskImage::New();
    MaskImage::RegionType region;
    region.SetSize({static_cast<itk::SizeValueType>(size[0]),
                    static_cast<itk::SizeValueType>(size[1]),
                    static_cast<itk::SizeValueType>(size[2])});
    mask->SetRegions(region);
    mask->Allocate(true);
    uint8_t* m = mask->GetBufferPointer();
    visitPixels(label_map, [&](const auto* p) {
        for (int64_t k = 0; k < size[2]; ++k) {
            if (voxel[2][k] < 0) continue;
            for (int64_t j = 0; j < size[1]; ++j) {
                if (voxel[1][j] < 0) continue;
                const auto* row = p + (voxel[2][k] * g.size[1] + voxel[1][j]) * g.size[0];
                uint8_t* out = m + (k * size[1] + j) * size[0];
                for (int64_t i = 0; i < size[0]; ++i) {
                    const int64_t x = voxel[0][i];
                    if (x >= 0 && static_cast<int>(row[x]) == value) out[i] = 1;
                }
            }
        }
    });
    auto source = itk::BinaryMask3DMeshSource<MaskImage, MeshType>::New();
    source->SetInput(mask);
    source->SetObjectValue(1);
    try {
        source->Update();
    } catch (const itk::ExceptionObject& e) {
        return internalError(std::string("marching cubes failed: ") + e.GetDescription(),
                             "label " + std::to_string(value));
    }
    MeshType::Pointer mesh = source->GetOutput();
    SurfaceMesh s;
    s.label = value;
    s.grid = grid;
    s.positions.reserve(mesh->GetNumberOfPoints() * 3);
    s.keys.reserve(mesh->GetNumberOfPoints());
    for (auto it = mesh->GetPoints()->Begin(); it != mesh->GetPoints()->End(); ++it) {
        const auto& q = it.Value();
        // Window index -> grid coordinate (marching cubes puts vertices on cube edges, at half
        // steps) -> label map index -> LPS.
        std::array<int64_t, 3> twice{};
        Vec3 index{};
        for (int a = 0; a < 3; ++a) {
            const double t = static_cast<double>(window.lo[a]) + q[a];
            twice[a] = std::llround(2 * t);
            index[a] = static_cast<double>(grid.origin[a]) + t * static_cast<double>(grid.step);
        }
        const Vec3 p = g.indexToPhysical(index);
        for (int c = 0; c < 3; ++c) s.positions.push_back(static_cast<float>(p[c]));
        s.keys.push_back(packKey(twice));
    }
    s.triangles.reserve(mesh->GetNumberOfCells() * 3);
    for (auto it = mesh->GetCells()->Begin(); it != mesh->GetCells()->End(); ++it) {
        const auto* cell = it.Value();
        if (cell->GetNumberOfPoints() != 3) continue;
        auto ids = cell->PointIdsBegin();
        for (int k = 0; k < 3; ++k) s.triangles.push_back(static_cast<uint32_t>(ids[k]));
    }
    return s;
}

struct Box {
    std::array<int64_t, 3> lo{INT64_MAX, INT64_MAX, INT64_MAX};
    std::array<int64_t, 3> hi{-1, -1, -1};
    int64_t voxels = 0;
};

// Bounding boxes of every nonzero label value (of those in `only` when not empty), one pass.
std::map<int, Box> labelBoxes(const Volume& v, const std::vector<int>& only,
                              const std::array<int64_t, 3>& lo_in,
                              const std::array<int64_t, 3>& hi_in) {
    std::map<int, Box> boxes;
    std::vector<bool> wanted;
    for (int l : only) {
        if (l < 0) continue;
        if (static_cast<size_t>(l) >= wanted.size()) wanted.resize(static_cast<size_t>(l) + 1);
        wanted[static_cast<size_t>(l)] = true;
    }
    const Geometry g = v.geometry();
    std::array<int64_t, 3> lo{0, 0, 0}, hi{g.size[0] - 1, g.size[1] - 1, g.size[2] - 1};
    if (lo_in[0] <= hi_in[0] && lo_in[1] <= hi_in[1] && lo_in[2] <= hi_in[2])
        for (int a = 0; a < 3; ++a) {
            lo[a] = std::clamp<int64_t>(lo_in[a], 0, g.size[a] - 1);
            hi[a] = std::clamp<int64_t>(hi_in[a], 0, g.size[a] - 1);
        }
    visitPixels(v, [&](const auto* p) {
        for (int64_t k = lo[2]; k <= hi[2]; ++k)
            for (int64_t j = lo[1]; j <= hi[1]; ++j)
                for (int64_t i = lo[0]; i <= hi[0]; ++i) {
                    const int64_t idx = (k * g.size[1] + j) * g.size[0] + i;
                    const int l = static_cast<int>(p[idx]);
                    if (l == 0) continue;
                    if (!only.empty() &&
                        (l < 0 || static_cast<size_t>(l) >= wanted.size() || !wanted[l]))
                        continue;
                    Box& b = boxes[l];
                    const std::array<int64_t, 3> x{i, j, k};
                    for (int a = 0; a < 3; ++a) {
                        b.lo[a] = std::min(b.lo[a], x[a]);
                        b.hi[a] = std::max(b.hi[a], x[a]);
                    }
                    ++b.voxels;
                }
    });
    return boxes;
}

}  // namespace

void taubinSmooth(std::vector<float>& pos, const std::vector<uint32_t>& tri, int iterations,
                  double lambda, double mu) {
    const size_t n = pos.size() / 3;
    if (n == 0 || iterations <= 0) return;
    // Unique neighbour lists from the triangle edges (CSR).
    std::vector<std::pair<uint32_t, uint32_t>> edges;
    edges.reserve(tri.size() * 2);
    for (size_t t = 0; t + 2 < tri.size(); t += 3)
        for (int e = 0; e < 3; ++e) {
            const uint32_t a = tri[t + e], b = tri[t + (e + 1) % 3];
            edges.emplace_back(a, b);
            edges.emplace_back(b, a);
        }
    std::sort(edges.begin(), edges.end());
    edges.erase(std::unique(edges.begin(), edges.end()), edges.end());
    std::vector<uint32_t> start(n + 1, 0);
    for (const auto& e : edges) ++start[e.first + 1];
    for (size_t i = 0; i < n; ++i) start[i + 1] += start[i];
    std::vector<float> next(pos.size());
    auto pass = [&](double factor) {
        for (size_t v = 0; v < n; ++v) {
            const uint32_t b = start[v], e = start[v + 1];
            for (int c = 0; c < 3; ++c) {
                double mean = 0;
                for (uint32_t k = b; k < e; ++k) mean += pos[edges[k].second * 3 + c];
                const double x = pos[v * 3 + c];
                next[v * 3 + c] =
                    e > b ? static_cast<float>(x + factor * (mean / (e - b) - x)) : pos[v * 3 + c];
            }
        }
        pos.swap(next);
    };
    for (int it = 0; it < iterations; ++it) {
        pass(lambda);
        pass(mu);
    }
}

namespace {

// Area-weighted normals into `nrm` of the vertices flagged in `fresh` (all when null); the
// others keep what `nrm` holds.
void accumulateNormals(const std::vector<float>& pos, const std::vector<uint32_t>& tri,
                       std::vector<float>& nrm, const std::vector<uint8_t>* fresh) {
    auto is_fresh = [&](uint32_t v) { return !fresh || (*fresh)[v]; };
    for (size_t v = 0; v < nrm.size() / 3; ++v)
        if (is_fresh(static_cast<uint32_t>(v))) nrm[v * 3] = nrm[v * 3 + 1] = nrm[v * 3 + 2] = 0;
    for (size_t t = 0; t + 2 < tri.size(); t += 3) {
        if (fresh && !is_fresh(tri[t]) && !is_fresh(tri[t + 1]) && !is_fresh(tri[t + 2])) continue;
        const float* a = &pos[tri[t] * 3];
        const float* b = &pos[tri[t + 1] * 3];
        const float* c = &pos[tri[t + 2] * 3];
        const float u[3] = {b[0] - a[0], b[1] - a[1], b[2] - a[2]};
        const float v[3] = {c[0] - a[0], c[1] - a[1], c[2] - a[2]};
        const float n[3] = {u[1] * v[2] - u[2] * v[1], u[2] * v[0] - u[0] * v[2],
                            u[0] * v[1] - u[1] * v[0]};  // length = 2 * area
        for (int k = 0; k < 3; ++k)
            if (is_fresh(tri[t + k]))
                for (int c2 = 0; c2 < 3; ++c2) nrm[tri[t + k] * 3 + c2] += n[c2];
    }
    for (size_t v = 0; v + 2 < nrm.size(); v += 3) {
        if (!is_fresh(static_cast<uint32_t>(v / 3))) continue;
        const float len =
            std::sqrt(nrm[v] * nrm[v] + nrm[v + 1] * nrm[v + 1] + nrm[v + 2] * nrm[v + 2]);
        if (len > 0)
            for (int c = 0; c < 3; ++c) nrm[v + c] /= len;
    }
}

}  // namespace

std::vector<float> vertexNormals(const std::vector<float>& pos, const std::vector<uint32_t>& tri) {
    std::vector<float> nrm(pos.size(), 0.f);
    accumulateNormals(pos, tri, nrm, nullptr);
    return nrm;
}

Result<std::vector<SurfaceMesh>> buildLabelSurfaces(const Volume& label_map,
                                                    const std::vector<LabelInfo>& labels,
                                                    const SurfaceOptions& options,
                                                    const Progress& progress) {
    std::vector<SurfaceMesh> out;
    if (label_map.empty()) return out;
    const auto boxes =
        labelBoxes(label_map, options.only_labels, options.search_lo, options.search_hi);
    size_t done = 0;
    for (const auto& [value, box] : boxes) {
        VOXSEG_RETURN_IF_ERROR(progress.checkCancelled());
        // The box on a grid of `step` voxels (coarser when the box is large), plus one grid
        // point of background on each side so surfaces close at the volume's edge.
        int64_t box_voxels = 1;
        for (int a = 0; a < 3; ++a) box_voxels *= box.hi[a] - box.lo[a] + 1;
        SurfaceGrid grid;
        grid.origin = box.lo;
        while (box_voxels / (grid.step * grid.step * grid.step) > options.max_voxels) ++grid.step;
        GridBox window;
        for (int a = 0; a < 3; ++a) {
            window.lo[a] = -1;
            window.hi[a] = (box.hi[a] - box.lo[a] + grid.step) / grid.step;
        }
        VOXSEG_ASSIGN_OR_RETURN(SurfaceMesh s, meshGridWindow(label_map, value, grid, window));
        s.color = pipeline::labelColor(labels, value);
        taubinSmooth(s.positions, s.triangles, options.smoothing_iterations, options.lambda,
                     options.mu);
        s.normals = vertexNormals(s.positions, s.triangles);
        if (!s.triangles.empty()) out.push_back(std::move(s));
        progress.report(++done, boxes.size(), "surfaces");
    }
    return out;
}

int64_t surfaceKeyCoord(uint64_t key, int axis) {
    return static_cast<int64_t>((key >> (kKeyBits * (2 - axis))) & kKeyMask) - kKeyOffset;
}

Result<bool> patchLabelSurface(const Volume& label_map, const std::vector<IndexBox>& changed,
                               SurfaceMesh& mesh, const SurfaceOptions& options) {
    if (label_map.empty() || mesh.keys.size() != mesh.vertexCount() || mesh.keys.empty())
        return false;
    const SurfaceGrid& grid = mesh.grid;
    const int64_t step = grid.step;
    const Geometry g = label_map.geometry();
    // The mesh's grid box, from its vertices (twice the grid coordinates).
    std::array<int64_t, 3> key_lo{INT64_MAX, INT64_MAX, INT64_MAX};
    std::array<int64_t, 3> key_hi{INT64_MIN, INT64_MIN, INT64_MIN};
    for (const uint64_t key : mesh.keys)
        for (int a = 0; a < 3; ++a) {
            const int64_t c = surfaceKeyCoord(key, a);
            key_lo[a] = std::min(key_lo[a], c);
            key_hi[a] = std::max(key_hi[a], c);
        }
    int64_t mesh_points = 1;
    for (int a = 0; a < 3; ++a) mesh_points *= (key_hi[a] - key_lo[a]) / 2 + 2;
    // Per changed box: the cubes re-meshed (cube c spans the grid points c and c + 1) and the
    // window of grid points they are meshed from.
    constexpr int64_t kSeam = 2, kMargin = 10;
    std::vector<GridBox> cubes, windows;
    int64_t window_points = 0;
    for (const IndexBox& box : changed) {
        if (box.empty()) continue;
        GridBox c, w;
        int64_t points = 1;
        for (int a = 0; a < 3; ++a) {
            c.lo[a] = floorDiv(box.lo[a] - grid.origin[a], step) - 1 - kSeam;
            c.hi[a] = ceilDiv(box.hi[a] - grid.origin[a], step) + kSeam;
            // Grid points off the volume are background: one of them on each side is enough.
            w.lo[a] = std::max(c.lo[a] - kMargin, ceilDiv(-grid.origin[a], step) - 1);
            w.hi[a] =
                std::min(c.hi[a] + 1 + kMargin, floorDiv(g.size[a] - 1 - grid.origin[a], step) + 1);
            points *= std::max<int64_t>(0, w.hi[a] - w.lo[a] + 1);
        }
        if (points == 0) continue;  // off the volume
        cubes.push_back(c);
        windows.push_back(w);
        window_points += points;
    }
    if (window_points > mesh_points) return false;
    // A triangle belongs to the cube that holds its unsmoothed centroid, and a cube to the first
    // changed box whose cubes hold it: the same rule for the old mesh and the patches, so each
    // cube's triangles come from exactly one of them.
    auto cube_of = [](const SurfaceMesh& m, size_t t) {
        std::array<int64_t, 3> c{};
        for (int a = 0; a < 3; ++a) {
            int64_t sum = 0;
            for (int k = 0; k < 3; ++k) sum += surfaceKeyCoord(m.keys[m.triangles[t + k]], a);
            c[a] = floorDiv(sum, 6);
        }
        return c;
    };
    auto owner = [&](const std::array<int64_t, 3>& c) {
        for (size_t i = 0; i < cubes.size(); ++i)
            if (c[0] >= cubes[i].lo[0] && c[0] <= cubes[i].hi[0] && c[1] >= cubes[i].lo[1] &&
                c[1] <= cubes[i].hi[1] && c[2] >= cubes[i].lo[2] && c[2] <= cubes[i].hi[2])
                return static_cast<int>(i);
        return -1;
    };
    auto near_patch = [&](uint64_t key) {
        for (const GridBox& c : cubes) {
            bool inside = true;
            for (int a = 0; a < 3 && inside; ++a) {
                const int64_t x = surfaceKeyCoord(key, a);
                inside = x >= 2 * c.lo[a] && x <= 2 * (c.hi[a] + 1);
            }
            if (inside) return true;
        }
        return false;
    };
    SurfaceMesh out;
    out.label = mesh.label;
    out.color = mesh.color;
    out.grid = grid;
    auto add_vertex = [&](const SurfaceMesh& from, uint32_t v) {
        out.positions.insert(out.positions.end(), &from.positions[v * 3],
                             &from.positions[v * 3] + 3);
        out.keys.push_back(from.keys[v]);
        return static_cast<uint32_t>(out.keys.size() - 1);
    };
    // The old triangles outside the patches, their vertices in their order; those on a patch's
    // border, and every vertex a patch adds, are shared by key with what is added after them.
    // A triangle a patch owns has all its vertices near that patch: the others are kept
    // without looking at their cube.
    const size_t n = mesh.vertexCount();
    std::vector<uint8_t> near(n), used(n, 0);
    for (size_t v = 0; v < n; ++v) near[v] = near_patch(mesh.keys[v]);
    std::vector<uint8_t> replaced(mesh.triangleCount(), 0);
    for (size_t t = 0; t + 2 < mesh.triangles.size(); t += 3) {
        const uint32_t* tri = &mesh.triangles[t];
        if (near[tri[0]] && near[tri[1]] && near[tri[2]] && owner(cube_of(mesh, t)) >= 0) {
            replaced[t / 3] = 1;
            continue;
        }
        used[tri[0]] = used[tri[1]] = used[tri[2]] = 1;
    }
    std::unordered_map<uint64_t, uint32_t> shared;
    std::vector<uint32_t> remap(n, UINT32_MAX);
    out.positions.reserve(mesh.positions.size());
    out.keys.reserve(n);
    // Normals change only at vertices near a patch (a triangle far from all of them is kept
    // with all its neighbours): the others keep theirs.
    out.normals.reserve(mesh.normals.size());
    std::vector<uint8_t> fresh;
    fresh.reserve(n);
    const bool had_normals = mesh.normals.size() == mesh.positions.size();
    for (size_t v = 0; v < n; ++v) {
        if (!used[v]) continue;
        remap[v] = add_vertex(mesh, static_cast<uint32_t>(v));
        const float* normal = had_normals ? &mesh.normals[v * 3] : nullptr;
        for (int c = 0; c < 3; ++c) out.normals.push_back(normal ? normal[c] : 0.f);
        fresh.push_back(near[v] || !had_normals);
        if (near[v]) shared.emplace(mesh.keys[v], remap[v]);
    }
    out.triangles.reserve(mesh.triangles.size());
    for (size_t t = 0; t + 2 < mesh.triangles.size(); t += 3)
        if (!replaced[t / 3])
            for (int k = 0; k < 3; ++k) out.triangles.push_back(remap[mesh.triangles[t + k]]);
    for (size_t i = 0; i < cubes.size(); ++i) {
        VOXSEG_ASSIGN_OR_RETURN(SurfaceMesh patch,
                                meshGridWindow(label_map, mesh.label, grid, windows[i]));
        taubinSmooth(patch.positions, patch.triangles, options.smoothing_iterations, options.lambda,
                     options.mu);
        std::vector<uint32_t> patch_remap(patch.vertexCount(), UINT32_MAX);
        for (size_t t = 0; t + 2 < patch.triangles.size(); t += 3) {
            if (owner(cube_of(patch, t)) != static_cast<int>(i)) continue;
            for (int k = 0; k < 3; ++k) {
                const uint32_t v = patch.triangles[t + k];
                if (patch_remap[v] == UINT32_MAX) {
                    auto [it, added] = shared.try_emplace(patch.keys[v], 0);
                    if (added) {
                        it->second = add_vertex(patch, v);
                        out.normals.insert(out.normals.end(), {0.f, 0.f, 0.f});
                        fresh.push_back(1);
                    }
                    patch_remap[v] = it->second;
                }
                out.triangles.push_back(patch_remap[v]);
            }
        }
    }
    accumulateNormals(out.positions, out.triangles, out.normals, &fresh);
    mesh = std::move(out);
    return true;
}

SurfaceMesh decimateMesh(const SurfaceMesh& mesh, double cell_mm) {
    SurfaceMesh out;
    out.label = mesh.label;
    out.color = mesh.color;
    const size_t n = mesh.vertexCount();
    if (n == 0 || !(cell_mm > 0)) return out;
    std::array<double, 3> lo{1e300, 1e300, 1e300};
    for (size_t v = 0; v < n; ++v)
        for (int a = 0; a < 3; ++a) lo[a] = std::min(lo[a], double(mesh.positions[v * 3 + a]));
    // Cluster of each vertex: its cell, 21 bits per axis.
    std::unordered_map<uint64_t, uint32_t> cluster_of_cell;
    std::vector<uint32_t> cluster(n);
    std::vector<double> sum;
    std::vector<uint32_t> count;
    for (size_t v = 0; v < n; ++v) {
        uint64_t key = 0;
        for (int a = 0; a < 3; ++a) {
            const auto c = static_cast<uint64_t>((mesh.positions[v * 3 + a] - lo[a]) / cell_mm);
            key = key << 21 | std::min<uint64_t>(c, (1u << 21) - 1);
        }
        auto [it, added] = cluster_of_cell.try_emplace(key, static_cast<uint32_t>(count.size()));
        if (added) {
            sum.insert(sum.end(), {0.0, 0.0, 0.0});
            count.push_back(0);
        }
        cluster[v] = it->second;
        for (int a = 0; a < 3; ++a) sum[it->second * 3 + a] += mesh.positions[v * 3 + a];
        ++count[it->second];
    }
    out.positions.resize(sum.size());
    for (size_t c = 0; c < count.size(); ++c)
        for (int a = 0; a < 3; ++a)
            out.positions[c * 3 + a] = static_cast<float>(sum[c * 3 + a] / count[c]);
    for (size_t t = 0; t + 2 < mesh.triangles.size(); t += 3) {
        const uint32_t a = cluster[mesh.triangles[t]], b = cluster[mesh.triangles[t + 1]],
                       c = cluster[mesh.triangles[t + 2]];
        if (a == b || b == c || a == c) continue;
        out.triangles.insert(out.triangles.end(), {a, b, c});
    }
    out.normals = vertexNormals(out.positions, out.triangles);
    return out;
}

std::vector<SurfaceMesh> decimateMeshes(const std::vector<SurfaceMesh>& meshes,
                                        size_t max_triangles) {
    size_t total = 0;
    double area = 0;
    for (const auto& m : meshes) {
        total += m.triangleCount();
        for (size_t t = 0; t + 2 < m.triangles.size(); t += 3) {
            const float* p = &m.positions[m.triangles[t] * 3];
            const float* q = &m.positions[m.triangles[t + 1] * 3];
            const float* r = &m.positions[m.triangles[t + 2] * 3];
            const double u[3] = {q[0] - p[0], q[1] - p[1], q[2] - p[2]};
            const double w[3] = {r[0] - p[0], r[1] - p[1], r[2] - p[2]};
            const double c[3] = {u[1] * w[2] - u[2] * w[1], u[2] * w[0] - u[0] * w[2],
                                 u[0] * w[1] - u[1] * w[0]};
            area += 0.5 * std::sqrt(c[0] * c[0] + c[1] * c[1] + c[2] * c[2]);
        }
    }
    if (total <= max_triangles || max_triangles == 0) return meshes;
    const size_t keep_below = max_triangles / 50;
    // A clustered surface has about 2 triangles per cell it crosses: area / cell^2 cells.
    double cell = std::sqrt(2.0 * area / static_cast<double>(max_triangles));
    std::vector<SurfaceMesh> out;
    for (int attempt = 0; attempt < 8; ++attempt, cell *= 1.25) {
        out.clear();
        size_t n = 0;
        for (const auto& m : meshes) {
            out.push_back(m.triangleCount() < keep_below ? m : decimateMesh(m, cell));
            n += out.back().triangleCount();
        }
        if (n <= max_triangles) break;
    }
    return out;
}

}  // namespace voxseg::ui
