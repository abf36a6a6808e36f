#include "cuda/cuda_errors.h"
#include "cuda/device_common.cuh"
#include "cuda/kernels.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>

namespace voxseg::cuda {
namespace {

using math::Act;
using namespace device;

// ---- layout conversion ----

template <typename T>
__global__ void toChannelsLastKernel(const float* __restrict__ src, T* __restrict__ dst,
                                     int64_t channels, int64_t ldc, int64_t c_offset, int64_t n,
                                     int64_t spatial) {
    const int64_t total = n * spatial;
    for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total;
         i += int64_t(gridDim.x) * blockDim.x) {
        const int64_t img = i / spatial, s = i - img * spatial;
        T* row = dst + i * ldc + c_offset;
        for (int64_t c = 0; c < ldc - c_offset; ++c) {
            const float v = c < channels ? src[(img * channels + c) * spatial + s] : 0.0f;
            row[c] = fromFloat<T>(v);
        }
    }
}

template <typename T>
__global__ void toChannelsFirstKernel(const T* __restrict__ src, float* __restrict__ dst,
                                      int64_t channels, int64_t ldc, int64_t c_offset, int64_t n,
                                      int64_t spatial) {
    const int64_t total = n * spatial;
    for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total;
         i += int64_t(gridDim.x) * blockDim.x) {
        const int64_t img = i / spatial, s = i - img * spatial;
        const T* row = src + i * ldc + c_offset;
        for (int64_t c = 0; c < channels; ++c)
            dst[(img * channels + c) * spatial + s] = toFloat(row[c]);
    }
}

// ---- fused epilogue ----

struct EpilogueDev {
    const void* x;
    void* y;
    const void* r;
    int64_t x_ldc, x_off, y_ldc, y_off, r_ldc, r_off;
    const float* scale;
    const float* shift;
    int64_t affine_image_stride;
    Act act;
    float alpha;
    const float* prelu;
    float lo, hi;
};

// Each thread handles V consecutive channels of one voxel (V = 8: 16-byte accesses in fp16).
template <typename T, int V>
__global__ void epilogueKernel(EpilogueDev a, int64_t channels, int64_t n, int64_t spatial) {
    const int64_t groups = channels / V;
    const int64_t total = n * spatial * groups;
    const T* x = static_cast<const T*>(a.x);
    T* y = static_cast<T*>(a.y);
    const T* r = static_cast<const T*>(a.r);
    for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total;
         i += int64_t(gridDim.x) * blockDim.x) {
        const int64_t row = i / groups;
        const int64_t c0 = (i - row * groups) * V;
        const int64_t img = row / spatial;
        Pack<T, V> xv = *reinterpret_cast<const Pack<T, V>*>(x + row * a.x_ldc + a.x_off + c0);
        Pack<T, V> rv;
        if (r) rv = *reinterpret_cast<const Pack<T, V>*>(r + row * a.r_ldc + a.r_off + c0);
        Pack<T, V> out;
#pragma unroll
        for (int j = 0; j < V; ++j) {
            const int64_t c = c0 + j;
            const int64_t ai = img * a.affine_image_stride + c;
            const float scale = a.scale ? a.scale[ai] : 1.0f;
            const float shift = a.shift ? a.shift[ai] : 0.0f;
            const float res = r ? toFloat(rv.v[j]) : 0.0f;
            const float alpha = a.prelu ? a.prelu[c] : a.alpha;
            out.v[j] = fromFloat<T>(
                math::epilogue(toFloat(xv.v[j]), scale, shift, res, a.act, alpha, a.lo, a.hi));
        }
        *reinterpret_cast<Pack<T, V>*>(y + row * a.y_ldc + a.y_off + c0) = out;
    }
}

// ---- InstanceNorm statistics ----

constexpr int64_t kStatsChunk = 2048;  // voxels per block

int64_t statsChunks(int64_t spatial) { return (spatial + kStatsChunk - 1) / kStatsChunk; }

// Block (chunk, image): Welford over the chunk per channel, lanes combined in shared memory.
// Thread t handles channel group t % groups (V channels) at voxels t / groups + k * lanes.
template <typename T, int V>
__global__ void instanceStatsKernel(const T* __restrict__ x, int64_t channels, int64_t ldc,
                                    int64_t c_off, int64_t spatial,
                                    math::Moments* __restrict__ partials) {
    extern __shared__ math::Moments shared[];  // [lanes][channels]
    const int64_t groups = channels / V;
    const int lanes = static_cast<int>(blockDim.x / groups);
    const int t = threadIdx.x;
    const int lane = static_cast<int>(t / groups);
    const int64_t g = t % groups;
    const int64_t img = blockIdx.y;
    const int64_t begin = blockIdx.x * kStatsChunk;
    const int64_t end = min(begin + kStatsChunk, spatial);
    if (lane < lanes) {
        float count = 0.0f;
        float mean[V], m2[V];
#pragma unroll
        for (int j = 0; j < V; ++j) mean[j] = m2[j] = 0.0f;
        for (int64_t s = begin + lane; s < end; s += lanes) {
            const Pack<T, V> xv =
                *reinterpret_cast<const Pack<T, V>*>(x + (img * spatial + s) * ldc + c_off + g * V);
            count += 1.0f;
            const float inv = 1.0f / count;
#pragma unroll
            for (int j = 0; j < V; ++j) {
                const float v = toFloat(xv.v[j]);
                const float delta = v - mean[j];
                mean[j] += delta * inv;
                m2[j] += delta * (v - mean[j]);
            }
        }
#pragma unroll
        for (int j = 0; j < V; ++j) shared[lane * channels + g * V + j] = {count, mean[j], m2[j]};
    }
    __syncthreads();
    for (int64_t c = t; c < channels; c += blockDim.x) {
        math::Moments m = shared[c];
        for (int l = 1; l < lanes; ++l) m = math::combineMoments(m, shared[l * channels + c]);
        partials[(img * gridDim.x + blockIdx.x) * channels + c] = m;
    }
}

__global__ void instanceFinalizeKernel(const math::Moments* __restrict__ partials, int64_t chunks,
                                       int64_t channels, int64_t n, const float* gamma,
                                       const float* beta, float epsilon, float* scale,
                                       float* shift) {
    const int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
    if (i >= n * channels) return;
    const int64_t img = i / channels, c = i - img * channels;
    math::Moments m = partials[(img * chunks) * channels + c];
    for (int64_t k = 1; k < chunks; ++k)
        m = math::combineMoments(m, partials[(img * chunks + k) * channels + c]);
    const math::Affine a =
        math::normAffine(m, gamma ? gamma[c] : 1.0f, beta ? beta[c] : 0.0f, epsilon);
    scale[i] = a.scale;
    shift[i] = a.shift;
}

// ---- softmax / binary ----

template <typename T>
__global__ void softmaxKernel(const T* x, T* y, int64_t channels, int64_t x_ldc, int64_t x_off,
                              int64_t y_ldc, int64_t y_off, int64_t rows) {
    for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < rows;
         i += int64_t(gridDim.x) * blockDim.x) {
        const T* xr = x + i * x_ldc + x_off;
        T* yr = y + i * y_ldc + y_off;
        float mx = toFloat(xr[0]);
        for (int64_t c = 1; c < channels; ++c) mx = fmaxf(mx, toFloat(xr[c]));
        float sum = 0.0f;
        for (int64_t c = 0; c < channels; ++c) sum += expf(toFloat(xr[c]) - mx);
        const float inv = 1.0f / sum;
        for (int64_t c = 0; c < channels; ++c)
            yr[c] = fromFloat<T>(expf(toFloat(xr[c]) - mx) * inv);
    }
}

template <typename T>
__global__ void binaryKernel(const T* a, int64_t a_ldc, int64_t a_off, const T* b, int64_t b_ldc,
                             int64_t b_off, T* y, int64_t y_ldc, int64_t y_off, int64_t channels,
                             int64_t rows, BinaryOp op) {
    const int64_t total = rows * channels;
    for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total;
         i += int64_t(gridDim.x) * blockDim.x) {
        const int64_t row = i / channels, c = i - row * channels;
        const float u = toFloat(a[row * a_ldc + a_off + c]);
        const float v = toFloat(b[row * b_ldc + b_off + c]);
        float r = 0.0f;
        switch (op) {
            case BinaryOp::kAdd:
                r = u + v;
                break;
            case BinaryOp::kSub:
                r = u - v;
                break;
            case BinaryOp::kMul:
                r = u * v;
                break;
            case BinaryOp::kDiv:
                r = u / v;
                break;
        }
        y[row * y_ldc + y_off + c] = fromFloat<T>(r);
    }
}

// ---- sliding window ----

template <typename T>
__global__ void gatherPatchKernel(const float* __restrict__ vol, int64_t channels, Box size,
                                  Box pad, Box origin, Box p, T* __restrict__ dst, int64_t ldc,
                                  int64_t slot, int flip) {
    const int64_t spatial = p.d * p.h * p.w;
    const int64_t vol_spatial = size.d * size.h * size.w;
    for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < spatial;
         i += int64_t(gridDim.x) * blockDim.x) {
        const int64_t z = math::mirrored(i / (p.h * p.w), p.d, flip, 0),
                      y = math::mirrored((i / p.w) % p.h, p.h, flip, 1),
                      x = math::mirrored(i % p.w, p.w, flip, 2);
        const int64_t sz = origin.d + z - pad.d, sy = origin.h + y - pad.h,
                      sx = origin.w + x - pad.w;
        const bool inside =
            sz >= 0 && sz < size.d && sy >= 0 && sy < size.h && sx >= 0 && sx < size.w;
        const int64_t src = (sz * size.h + sy) * size.w + sx;
        T* row = dst + (slot * spatial + i) * ldc;
        for (int64_t c = 0; c < ldc; ++c) {
            const float v = (inside && c < channels) ? vol[c * vol_spatial + src] : 0.0f;
            row[c] = fromFloat<T>(v);
        }
    }
}

template <typename T>
__global__ void accumulateKernel(const T* __restrict__ logits, int64_t classes, int64_t ldc,
                                 int64_t c_off, int64_t slot, const float* __restrict__ gauss,
                                 Box p, Box origin, Box padded, float* __restrict__ accum,
                                 float* __restrict__ weight_sum, int flip) {
    const int64_t spatial = p.d * p.h * p.w;
    const int64_t vol_spatial = padded.d * padded.h * padded.w;
    for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < spatial;
         i += int64_t(gridDim.x) * blockDim.x) {
        // Output voxel i of a mirrored patch belongs to the mirrored position of the patch.
        const int64_t z = math::mirrored(i / (p.h * p.w), p.d, flip, 0),
                      y = math::mirrored((i / p.w) % p.h, p.h, flip, 1),
                      x = math::mirrored(i % p.w, p.w, flip, 2);
        const int64_t v = ((origin.d + z) * padded.h + origin.h + y) * padded.w + origin.w + x;
        const float w = gauss[(z * p.h + y) * p.w + x];
        const T* row = logits + (slot * spatial + i) * ldc + c_off;
        for (int64_t k = 0; k < classes; ++k) accum[k * vol_spatial + v] += w * toFloat(row[k]);
        weight_sum[v] += w;
    }
}

__global__ void normalizeArgmaxKernel(const float* __restrict__ accum,
                                      const float* __restrict__ weight_sum, int64_t classes,
                                      Box size, Box pad, Box padded, int64_t z_begin, int64_t z_end,
                                      float* __restrict__ probs, uint16_t* __restrict__ labels) {
    const int64_t total = size.d * size.h * size.w;
    const int64_t vol_spatial = padded.d * padded.h * padded.w;
    const int64_t end = z_end * size.h * size.w;
    for (int64_t i = z_begin * size.h * size.w + blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
         i < end; i += int64_t(gridDim.x) * blockDim.x) {
        const int64_t z = i / (size.h * size.w), y = (i / size.w) % size.h, x = i % size.w;
        const int64_t v = ((z + pad.d) * padded.h + y + pad.h) * padded.w + x + pad.w;
        const float ws = weight_sum[v];
        const float inv = ws > 0.0f ? 1.0f / ws : 0.0f;
        if (probs) {
            for (int64_t k = 0; k < classes; ++k)
                probs[k * total + i] = accum[k * vol_spatial + v] * inv;
        }
        labels[i] = static_cast<uint16_t>(
            math::argmaxStrided(accum + v, static_cast<int>(classes), vol_spatial));
    }
}

bool vectorizable(const View& v, int vec) {
    return v.channels % vec == 0 && v.ldc % vec == 0 && v.c_offset % vec == 0;
}

}  // namespace

size_t storageSize(StorageType type) { return type == StorageType::kFloat32 ? 4 : 2; }

Status launchToChannelsLast(const float* src, View dst, StorageType type, int64_t n,
                            int64_t spatial, cudaStream_t stream) {
    dispatch(type, [&](auto tag) {
        using T = decltype(tag);
        toChannelsLastKernel<T><<<blocksFor(n * spatial), kThreads, 0, stream>>>(
            src, static_cast<T*>(dst.data), dst.channels, dst.ldc, dst.c_offset, n, spatial);
    });
    VOXSEG_CUDA_CHECK_LAUNCH("toChannelsLast kernel");
    return Status::ok();
}

Status launchToChannelsFirst(View src, StorageType type, float* dst, int64_t n, int64_t spatial,
                             cudaStream_t stream) {
    dispatch(type, [&](auto tag) {
        using T = decltype(tag);
        toChannelsFirstKernel<T><<<blocksFor(n * spatial), kThreads, 0, stream>>>(
            static_cast<const T*>(src.data), dst, src.channels, src.ldc, src.c_offset, n, spatial);
    });
    VOXSEG_CUDA_CHECK_LAUNCH("toChannelsFirst kernel");
    return Status::ok();
}

Status launchEpilogue(const EpilogueArgs& args, StorageType type, int64_t n, int64_t spatial,
                      cudaStream_t stream) {
    EpilogueDev d{args.x.data,
                  args.y.data,
                  args.residual.data,
                  args.x.ldc,
                  args.x.c_offset,
                  args.y.ldc,
                  args.y.c_offset,
                  args.residual.ldc,
                  args.residual.c_offset,
                  args.scale,
                  args.shift,
                  args.affine_image_stride,
                  args.act,
                  args.alpha,
                  args.prelu_slope,
                  args.lo,
                  args.hi};
    const int64_t channels = args.x.channels;
    bool vec = vectorizable(args.x, 8) && vectorizable(args.y, 8) &&
               (!args.residual.data || vectorizable(args.residual, 8));
    dispatch(type, [&](auto tag) {
        using T = decltype(tag);
        if (vec) {
            epilogueKernel<T, 8><<<blocksFor(n * spatial * channels / 8), kThreads, 0, stream>>>(
                d, channels, n, spatial);
        } else {
            epilogueKernel<T, 1><<<blocksFor(n * spatial * channels), kThreads, 0, stream>>>(
                d, channels, n, spatial);
        }
    });
    VOXSEG_CUDA_CHECK_LAUNCH("epilogue kernel");
    return Status::ok();
}

size_t instanceNormScratchBytes(int64_t n, int64_t channels, int64_t spatial) {
    return static_cast<size_t>(n * statsChunks(spatial) * channels) * sizeof(math::Moments);
}

Status launchInstanceNormStats(View x, StorageType type, int64_t n, int64_t spatial,
                               const float* gamma, const float* beta, float epsilon, void* partials,
                               float* scale, float* shift, cudaStream_t stream) {
    const int64_t chunks = statsChunks(spatial);
    const int vec = vectorizable(x, 8) && x.channels / 8 <= kThreads ? 8 : 1;
    const int64_t groups = x.channels / vec;
    if (groups > kThreads)
        return unsupported("InstanceNorm over " + std::to_string(x.channels) +
                           " channels (at most 256, or 2048 in multiples of 8) on CUDA");
    const int lanes = static_cast<int>(kThreads / groups);
    const size_t shared = static_cast<size_t>(lanes) * x.channels * sizeof(math::Moments);
    if (shared > 48 * 1024) return unsupported("InstanceNorm: too many channels for one block");
    auto* moments = static_cast<math::Moments*>(partials);
    dispatch(type, [&](auto tag) {
        using T = decltype(tag);
        const dim3 grid(static_cast<unsigned>(chunks), static_cast<unsigned>(n));
        if (vec == 8) {
            instanceStatsKernel<T, 8><<<grid, kThreads, shared, stream>>>(
                static_cast<const T*>(x.data), x.channels, x.ldc, x.c_offset, spatial, moments);
        } else {
            instanceStatsKernel<T, 1><<<grid, kThreads, shared, stream>>>(
                static_cast<const T*>(x.data), x.channels, x.ldc, x.c_offset, spatial, moments);
        }
    });
    VOXSEG_CUDA_CHECK_LAUNCH("InstanceNorm statistics kernel");
    instanceFinalizeKernel<<<blocksFor(n * x.channels), kThreads, 0, stream>>>(
        moments, chunks, x.channels, n, gamma, beta, epsilon, scale, shift);
    VOXSEG_CUDA_CHECK_LAUNCH("InstanceNorm finalize kernel");
    return Status::ok();
}

Status launchSoftmax(View x, View y, StorageType type, int64_t n, int64_t spatial,
                     cudaStream_t stream) {
    dispatch(type, [&](auto tag) {
        using T = decltype(tag);
        softmaxKernel<T><<<blocksFor(n * spatial), kThreads, 0, stream>>>(
            static_cast<const T*>(x.data), static_cast<T*>(y.data), x.channels, x.ldc, x.c_offset,
            y.ldc, y.c_offset, n * spatial);
    });
    VOXSEG_CUDA_CHECK_LAUNCH("softmax kernel");
    return Status::ok();
}

Status launchBinary(View a, View b, View y, BinaryOp op, StorageType type, int64_t n,
                    int64_t spatial, cudaStream_t stream) {
    dispatch(type, [&](auto tag) {
        using T = decltype(tag);
        binaryKernel<T><<<blocksFor(n * spatial * a.channels), kThreads, 0, stream>>>(
            static_cast<const T*>(a.data), a.ldc, a.c_offset, static_cast<const T*>(b.data), b.ldc,
            b.c_offset, static_cast<T*>(y.data), y.ldc, y.c_offset, a.channels, n * spatial, op);
    });
    VOXSEG_CUDA_CHECK_LAUNCH("binary elementwise kernel");
    return Status::ok();
}

Status launchGatherPatch(const float* volume, Box size, Box pad_before, Box origin, Box patch,
                         View dst, StorageType type, int64_t slot, cudaStream_t stream, int flip) {
    dispatch(type, [&](auto tag) {
        using T = decltype(tag);
        gatherPatchKernel<T><<<blocksFor(patch.d * patch.h * patch.w), kThreads, 0, stream>>>(
            volume, dst.channels, size, pad_before, origin, patch, static_cast<T*>(dst.data),
            dst.ldc, slot, flip);
    });
    VOXSEG_CUDA_CHECK_LAUNCH("patch gather kernel");
    return Status::ok();
}

Status launchAccumulatePatch(View logits, StorageType type, int64_t slot, const float* gauss,
                             Box patch, Box origin, Box padded, float* accum, float* weight_sum,
                             cudaStream_t stream, int flip) {
    dispatch(type, [&](auto tag) {
        using T = decltype(tag);
        accumulateKernel<T><<<blocksFor(patch.d * patch.h * patch.w), kThreads, 0, stream>>>(
            static_cast<const T*>(logits.data), logits.channels, logits.ldc, logits.c_offset, slot,
            gauss, patch, origin, padded, accum, weight_sum, flip);
    });
    VOXSEG_CUDA_CHECK_LAUNCH("patch accumulation kernel");
    return Status::ok();
}

Status launchNormalizeArgmax(const float* accum, const float* weight_sum, int64_t classes, Box size,
                             Box pad_before, Box padded, int64_t z_begin, int64_t z_end,
                             float* probs, uint16_t* labels, cudaStream_t stream) {
    if (z_end <= z_begin) return Status::ok();
    normalizeArgmaxKernel<<<blocksFor((z_end - z_begin) * size.h * size.w), kThreads, 0, stream>>>(
        accum, weight_sum, classes, size, pad_before, padded, z_begin, z_end, probs, labels);
    VOXSEG_CUDA_CHECK_LAUNCH("normalise/argmax kernel");
    return Status::ok();
}

}  // namespace voxseg::cuda
