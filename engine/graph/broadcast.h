// ONNX (numpy) broadcasting of element offsets: each source shape is aligned to the destination
// from the right, and a source axis of size 1 (or one it lacks) repeats along the destination's.
// Shapes are assumed compatible (Graph's shape inference, or broadcastShapes in the importer,
// checked them). Used by constant folding and the reference backend; no allocation per element.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "engine/graph/tensor.h"

namespace voxseg::engine {

// The element offset in a tensor of shape `src` broadcast to `dst` at dst's flat `index`: for
// random access (batched matrix products, attention biases); walks should use forEachBroadcast.
// A source axis whose size divides the destination's but is neither 1 nor equal to it repeats
// as a tile (coordinate modulo its size): the attention biases' batch axes (attentionBiasFits
// in engine/graph/shapes/matmul.cpp), which nothing else admits.
inline int64_t broadcastOffset(int64_t index, const Shape& dst, const Shape& src) {
    int64_t offset = 0, stride = 1;
    for (size_t i = dst.size(); i-- > 0;) {
        const int64_t coord = index % dst[i];
        index /= dst[i];
        const size_t back = dst.size() - 1 - i;
        if (back < src.size()) {
            const int64_t sd = src[src.size() - 1 - back];
            if (sd != 1) offset += (sd == dst[i] ? coord : coord % sd) * stride;
            stride *= sd;
        }
    }
    return offset;
}

// Calls fn(i, offsets) for every flat index i of `dst` in order, offsets[k] being the element of
// srcs[k] that broadcasts to it: an odometer over the outer axes and a plain loop over the
// innermost one, instead of a division per axis and element.
template <size_t N, class Fn>
void forEachBroadcast(const Shape& dst, const std::array<const Shape*, N>& srcs, Fn&& fn) {
    const size_t rank = dst.size();
    const int64_t total = numel(dst);
    if (total <= 0) return;
    std::array<int64_t, N> off{};
    if (rank == 0) {
        fn(int64_t{0}, off);
        return;
    }
    // stride[d][k]: how far source k moves when dst's axis d advances by one (0: broadcast)
    std::vector<std::array<int64_t, N>> stride(rank);
    for (size_t k = 0; k < N; ++k) {
        const Shape& src = *srcs[k];
        int64_t s = 1;
        for (size_t d = rank; d-- > 0;) {
            const size_t back = rank - 1 - d;
            const int64_t sd = back < src.size() ? src[src.size() - 1 - back] : 1;
            stride[d][k] = sd == 1 ? 0 : s;
            s *= sd;
        }
    }
    const int64_t inner = dst[rank - 1];
    const std::array<int64_t, N> step = stride[rank - 1];
    std::vector<int64_t> coord(rank, 0);
    std::array<int64_t, N> at{};
    for (int64_t i = 0; i < total; i += inner) {
        for (int64_t j = 0; j < inner; ++j) {
            for (size_t k = 0; k < N; ++k) at[k] = off[k] + j * step[k];
            fn(i + j, at);
        }
        for (size_t d = rank - 1; d-- > 0;) {
            for (size_t k = 0; k < N; ++k) off[k] += stride[d][k];
            if (++coord[d] < dst[d]) break;
            for (size_t k = 0; k < N; ++k) off[k] -= stride[d][k] * dst[d];
            coord[d] = 0;
        }
    }
}

// `values` (of shape `src`) repeated to fill `dst`.
inline std::vector<float> broadcastValues(const std::vector<float>& values, const Shape& src,
                                          const Shape& dst) {
    std::vector<float> out(static_cast<size_t>(numel(dst)));
    forEachBroadcast<1>(dst, {&src}, [&](int64_t i, const std::array<int64_t, 1>& o) {
        out[static_cast<size_t>(i)] = values[static_cast<size_t>(o[0])];
    });
    return out;
}

}  // namespace voxseg::engine
