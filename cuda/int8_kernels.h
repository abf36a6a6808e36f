// Launchers of the int8 convolution's kernels (int8_kernels.cu; the plan and why: int8_conv.h).
// Asynchronous on `stream`; they return launch errors only. Per-element math: int8_math.h.
// Thread safety: stateless.
#pragma once

#include "core/status.h"
#include "cuda/int8_conv.h"
#include "cuda/kernels.h"

#include <cuda_runtime.h>

#include <cstdint>

namespace voxseg::cuda {

// Rows [row0, row0 + rows) of the plan's im2col matrix from the float source view `src` (storage
// `type`; its row length and channel offset are the plan's geometry) into `a`
// ([plan.chunk_rows][kp] s8 or e4m3, plan.format); rows past the convolution's end are zero-filled
// up to plan.chunk_rows, so the fixed-size product never reads stale bytes.
Status launchInt8Im2col(const Int8ConvPlan& plan, View src, StorageType type, int64_t row0,
                        int64_t rows, int8_t* a, cudaStream_t stream);

// The epilogue of rows [row0, row0 + rows): d ([chunk][cout_padded] s32, or fp32 for fp8: the
// product of those rows) -> `y` in the storage type, reading `residual` where the plan has one.
Status launchInt8Epilogue(const Int8ConvPlan& plan, const void* d, int64_t row0, int64_t rows,
                          View residual, View y, StorageType type, cudaStream_t stream);

}  // namespace voxseg::cuda
