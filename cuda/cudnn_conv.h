// 3D convolution and transposed convolution on cuDNN's legacy Nd API, channels-last (NDHWC)
// tensors and KTRSC filters so that fp16/bf16 run on tensor cores with float32 accumulation;
// float32 runs with FMA math only (no TF32) so that it matches the reference backend.
//
// The algorithm for each shape is chosen once (cudnnFind..., or the heuristic when
// VOXSEG_CUDNN_FIND=0) and cached in an AlgoCache shared by all graphs of a backend. A CudnnConv
// owns its descriptors; it is used by one thread at a time. Units: elements, bytes.
#pragma once

#include "core/status.h"
#include "cuda/kernels.h"

#include <cudnn.h>

#include <array>
#include <map>
#include <mutex>
#include <string>

namespace voxseg::cuda {

struct ConvShape {
    bool transposed = false;  // ConvTranspose: cudnnConvolutionBackwardData
    StorageType type = StorageType::kFloat32;
    int64_t n = 1;
    int64_t in_channels = 0;  // as stored (zero-padded channels included)
    int64_t out_channels = 0;
    std::array<int64_t, 3> in{}, out{}, kernel{}, stride{}, pad{}, dilation{};
    int64_t groups = 1;

    std::string key() const;
};

struct AlgoChoice {
    int algo = 0;  // cudnnConvolutionFwdAlgo_t or cudnnConvolutionBwdDataAlgo_t
    cudnnMathType_t math = CUDNN_DEFAULT_MATH;
    size_t workspace = 0;
    float time_ms = 0.0f;  // from cudnnFind (0 for the heuristic)
};

class AlgoCache {
  public:
    bool lookup(const std::string& key, AlgoChoice* choice) const;
    void store(const std::string& key, const AlgoChoice& choice);

  private:
    mutable std::mutex mutex_;
    std::map<std::string, AlgoChoice> choices_;
};

class CudnnConv {
  public:
    CudnnConv() = default;
    ~CudnnConv();
    CudnnConv(CudnnConv&& other) noexcept;
    CudnnConv& operator=(CudnnConv&& other) noexcept;
    CudnnConv(const CudnnConv&) = delete;
    CudnnConv& operator=(const CudnnConv&) = delete;

    // Creates the descriptors (fails with kUnsupported for shapes cuDNN rejects).
    static Result<CudnnConv> create(const ConvShape& shape);

    // Chooses the algorithm (cache first). x/w/y are device buffers of this shape used for timing;
    // `workspace` of `workspace_limit` bytes is scratch for cudnnFind.
    Status chooseAlgorithm(cudnnHandle_t handle, AlgoCache& cache, const void* x, const void* w,
                           void* y, void* workspace, size_t workspace_limit);

    // y = conv(x, w) (forward), or y = conv_transpose(x, w).
    Status run(cudnnHandle_t handle, const void* x, const void* w, void* y, void* workspace,
               size_t workspace_bytes) const;

    size_t workspaceBytes() const { return choice_.workspace; }
    const ConvShape& shape() const { return shape_; }
    std::string algoName() const;
    // 2 * multiply-adds.
    double flops() const;

  private:
    void destroy();

    ConvShape shape_;
    AlgoChoice choice_;
    cudnnTensorDescriptor_t x_desc_ = nullptr;  // input of the op (dy for transposed)
    cudnnTensorDescriptor_t y_desc_ = nullptr;  // output of the op (dx for transposed)
    cudnnFilterDescriptor_t w_desc_ = nullptr;
    cudnnConvolutionDescriptor_t conv_desc_ = nullptr;
};

}  // namespace voxseg::cuda
