#include "pipeline/orientation.h"

#include "pipeline/pixel_dispatch.h"

#include <cmath>
#include <cstring>

namespace voxseg::pipeline {

bool AxisMapping::isIdentity() const {
    for (int a = 0; a < 3; ++a)
        if (source_axis[a] != a || flip[a]) return false;
    return true;
}

AxisMapping AxisMapping::inverse() const {
    AxisMapping inv;
    for (int a = 0; a < 3; ++a) {
        inv.source_axis[source_axis[a]] = a;
        inv.flip[source_axis[a]] = flip[a];
    }
    return inv;
}

namespace {

// Patient axis (0=x/LR, 1=y/PA, 2=z/IS) and sign (+1 towards L, P, S) of an orientation letter.
bool parseLetter(char c, int& axis, int& sign) {
    switch (c) {
        case 'L':
            axis = 0, sign = 1;
            return true;
        case 'R':
            axis = 0, sign = -1;
            return true;
        case 'P':
            axis = 1, sign = 1;
            return true;
        case 'A':
            axis = 1, sign = -1;
            return true;
        case 'S':
            axis = 2, sign = 1;
            return true;
        case 'I':
            axis = 2, sign = -1;
            return true;
        default:
            return false;
    }
}

}  // namespace

Result<AxisMapping> orientationMapping(const Geometry& geometry, const std::string& code) {
    if (code.empty() || code == "native") return AxisMapping{};
    std::string upper = code;
    for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    std::array<int, 3> patient_axis{};
    std::array<int, 3> sign{};
    bool valid = upper.size() == 3;
    for (int a = 0; valid && a < 3; ++a) valid = parseLetter(upper[a], patient_axis[a], sign[a]);
    if (valid)
        valid = patient_axis[0] != patient_axis[1] && patient_axis[0] != patient_axis[2] &&
                patient_axis[1] != patient_axis[2];
    if (!valid)
        return invalidArgument("orientation '" + code +
                                   "' is not 'native' or a code of three letters naming "
                                   "different axes (e.g. RAS, LPS); fix the model's orientation",
                               code);

    // Pick the permutation of input axes maximising how well they line up with the code's axes.
    static constexpr int kPermutations[6][3] = {{0, 1, 2}, {0, 2, 1}, {1, 0, 2},
                                                {1, 2, 0}, {2, 0, 1}, {2, 1, 0}};
    double best_score = -1.0;
    AxisMapping best;
    for (const auto& perm : kPermutations) {
        double score = 0.0;
        for (int a = 0; a < 3; ++a)
            score += std::abs(geometry.axisDirection(perm[a])[patient_axis[a]]);
        if (score > best_score + 1e-9) {
            best_score = score;
            for (int a = 0; a < 3; ++a) {
                best.source_axis[a] = perm[a];
                const double component = geometry.axisDirection(perm[a])[patient_axis[a]];
                best.flip[a] = component * sign[a] < 0;
            }
        }
    }
    return best;
}

Geometry mapGeometry(const Geometry& geometry, const AxisMapping& mapping) {
    Geometry out;
    Vec3 first_index{0, 0, 0};
    for (int a = 0; a < 3; ++a) {
        const int s = mapping.source_axis[a];
        out.size[a] = geometry.size[s];
        out.spacing[a] = geometry.spacing[s];
        const Vec3 column = geometry.axisDirection(s);
        const double sgn = mapping.flip[a] ? -1.0 : 1.0;
        for (int r = 0; r < 3; ++r) out.direction[r * 3 + a] = sgn * column[r];
        if (mapping.flip[a]) first_index[s] = static_cast<double>(geometry.size[s] - 1);
    }
    out.origin = geometry.indexToPhysical(first_index);
    return out;
}

namespace {

template <typename T>
void permutePixels(const T* in, const Geometry& in_geometry, const AxisMapping& mapping, T* out) {
    const std::array<int64_t, 3> in_stride{1, in_geometry.size[0],
                                           in_geometry.size[0] * in_geometry.size[1]};
    std::array<int64_t, 3> out_size{};
    std::array<int64_t, 3> step{};
    int64_t base = 0;
    for (int a = 0; a < 3; ++a) {
        const int s = mapping.source_axis[a];
        out_size[a] = in_geometry.size[s];
        step[a] = mapping.flip[a] ? -in_stride[s] : in_stride[s];
        if (mapping.flip[a]) base += (in_geometry.size[s] - 1) * in_stride[s];
    }
    int64_t o = 0;
    for (int64_t k = 0; k < out_size[2]; ++k) {
        for (int64_t j = 0; j < out_size[1]; ++j) {
            const T* src = in + base + k * step[2] + j * step[1];
            if (step[0] == 1) {
                std::memcpy(out + o, src, sizeof(T) * static_cast<size_t>(out_size[0]));
                o += out_size[0];
            } else {
                for (int64_t i = 0; i < out_size[0]; ++i) out[o++] = src[i * step[0]];
            }
        }
    }
}

}  // namespace

Volume applyAxisMapping(const Volume& volume, const AxisMapping& mapping) {
    const Geometry in_geometry = volume.geometry();
    const Geometry out_geometry = mapGeometry(in_geometry, mapping);
    return withPixelType(volume.pixelType(), [&](auto tag) {
        using T = decltype(tag);
        Volume out = Volume::allocate<T>(out_geometry, volume.info());
        permutePixels<T>(volume.data<T>(), in_geometry, mapping, out.data<T>());
        return out;
    });
}

Result<Volume> reorient(const Volume& volume, const std::string& code, AxisMapping* mapping_out) {
    if (volume.empty()) return invalidArgument("reorient: empty volume");
    VOXSEG_ASSIGN_OR_RETURN(AxisMapping mapping, orientationMapping(volume.geometry(), code));
    if (mapping_out) *mapping_out = mapping;
    if (mapping.isIdentity()) return volume;
    return applyAxisMapping(volume, mapping);
}

}  // namespace voxseg::pipeline
