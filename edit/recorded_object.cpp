#include "edit/recorded_object.h"

#include <fmt/format.h>

#include <cmath>

namespace voxseg::edit {
namespace {

Vec3 lastCentre(const Geometry& g) {
    return g.indexToPhysical({static_cast<double>(g.size[0] - 1),
                              static_cast<double>(g.size[1] - 1),
                              static_cast<double>(g.size[2] - 1)});
}

bool near(const Vec3& a, const Vec3& b) {
    for (int d = 0; d < 3; ++d)
        if (!(std::abs(a[d] - b[d]) <= 1e-3)) return false;
    return true;
}

std::string describe(const std::array<int64_t, 3>& size, const Vec3& first, const Vec3& last) {
    return fmt::format(
        "{} x {} x {} voxels from ({:.3f}, {:.3f}, {:.3f}) to ({:.3f}, {:.3f}, "
        "{:.3f}) mm",
        size[0], size[1], size[2], first[0], first[1], first[2], last[0], last[1], last[2]);
}

}  // namespace

RecordedObject recordObject(const Geometry& g, const std::vector<uint8_t>& mask) {
    RecordedObject r;
    r.size = g.size;
    r.first_mm = g.indexToPhysical({0, 0, 0});
    r.last_mm = lastCentre(g);
    bool in = false;
    int64_t run = 0;
    for (const uint8_t v : mask) {
        if ((v != 0) != in) {
            r.runs.push_back(run);
            in = !in;
            run = 0;
        }
        ++run;
    }
    if (in) r.runs.push_back(run);  // a trailing out run is left off
    return r;
}

Result<int64_t> checkRuns(const RecordedObject& object) {
    const int64_t count = object.size[0] * object.size[1] * object.size[2];
    int64_t sum = 0;
    for (const int64_t r : object.runs) {
        if (r < 0) return invalidArgument(fmt::format("a run length is negative ({})", r));
        if (r > count - sum)
            return invalidArgument(
                fmt::format("the runs cover more voxels than the grid's {} x {} x {} = {}",
                            object.size[0], object.size[1], object.size[2], count));
        sum += r;
    }
    return sum;
}

Result<std::vector<uint8_t>> objectMask(const RecordedObject& object, const Geometry& g) {
    const Vec3 first = g.indexToPhysical({0, 0, 0}), last = lastCentre(g);
    if (object.size != g.size || !near(object.first_mm, first) || !near(object.last_mm, last))
        return Status(StatusCode::kFailedPrecondition,
                      fmt::format("the recorded object is on a grid of {}, this image loads as "
                                  "{}: replay the prompts with the model instead "
                                  "(voxseg edit --interactive-model)",
                                  describe(object.size, object.first_mm, object.last_mm),
                                  describe(g.size, first, last)));
    VOXSEG_RETURN_IF_ERROR(checkRuns(object).status());
    std::vector<uint8_t> mask(static_cast<size_t>(g.voxelCount()), 0);
    int64_t at = 0;
    for (size_t n = 0; n < object.runs.size(); ++n) {
        if (n % 2 == 1) std::fill_n(mask.begin() + at, object.runs[n], uint8_t{1});
        at += object.runs[n];
    }
    return mask;
}

}  // namespace voxseg::edit
