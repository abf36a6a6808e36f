// Calls a generic lambda with the C++ type matching a runtime PixelType, so that stages written
// once as templates (ITK filters need the static type) accept every pixel type a Volume carries.
//
//   withPixelType(v.pixelType(), [&](auto tag) { using T = decltype(tag); ... });
//
// Header-only, stateless, thread-safe.
#pragma once

#include "core/volume.h"

#include <cstdint>

namespace voxseg::pipeline {

template <typename Fn>
decltype(auto) withPixelType(PixelType type, Fn&& fn) {
    switch (type) {
        case PixelType::kUInt8:
            return fn(uint8_t{});
        case PixelType::kInt8:
            return fn(int8_t{});
        case PixelType::kUInt16:
            return fn(uint16_t{});
        case PixelType::kInt16:
            return fn(int16_t{});
        case PixelType::kUInt32:
            return fn(uint32_t{});
        case PixelType::kInt32:
            return fn(int32_t{});
        case PixelType::kFloat32:
            return fn(float{});
        case PixelType::kFloat64:
            return fn(double{});
    }
    return fn(float{});
}

// Label maps voxseg writes: uint8 up to 255 labels, uint16 beyond.
inline bool isLabelPixelType(PixelType type) {
    return type == PixelType::kUInt8 || type == PixelType::kUInt16;
}

}  // namespace voxseg::pipeline
