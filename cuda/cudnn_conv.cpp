#include "cuda/cudnn_conv.h"

#include "core/log.h"
#include "cuda/cuda_errors.h"

#include <fmt/format.h>

#include <cstdlib>
#include <utility>
#include <vector>

namespace voxseg::cuda {
namespace {

cudnnDataType_t cudnnType(StorageType type) {
    switch (type) {
        case StorageType::kFloat32:
            return CUDNN_DATA_FLOAT;
        case StorageType::kFloat16:
            return CUDNN_DATA_HALF;
        case StorageType::kBFloat16:
            return CUDNN_DATA_BFLOAT16;
    }
    return CUDNN_DATA_FLOAT;
}

Status setChannelsLast(cudnnTensorDescriptor_t desc, cudnnDataType_t type, int64_t n, int64_t c,
                       const std::array<int64_t, 3>& s) {
    const int dims[5] = {int(n), int(c), int(s[0]), int(s[1]), int(s[2])};
    const int strides[5] = {int(c * s[0] * s[1] * s[2]), 1, int(c * s[1] * s[2]), int(c * s[2]),
                            int(c)};
    if (n * c * s[0] * s[1] * s[2] >= (int64_t(1) << 31))
        return unsupported("convolution tensor of more than 2^31 elements: use a smaller batch");
    VOXSEG_CUDNN_CHECK(cudnnSetTensorNdDescriptor(desc, type, 5, dims, strides));
    return Status::ok();
}

bool useFind() {
    const char* env = std::getenv("VOXSEG_CUDNN_FIND");
    return !(env && std::string(env) == "0");
}

}  // namespace

std::string ConvShape::key() const {
    return fmt::format(
        "{}|{}|n{}|c{}->{}|in{}x{}x{}|out{}x{}x{}|k{}x{}x{}|s{}x{}x{}|p{}x{}x{}|d{}x{}x{}|g{}",
        transposed ? "T" : "F", static_cast<int>(type), n, in_channels, out_channels, in[0], in[1],
        in[2], out[0], out[1], out[2], kernel[0], kernel[1], kernel[2], stride[0], stride[1],
        stride[2], pad[0], pad[1], pad[2], dilation[0], dilation[1], dilation[2], groups);
}

bool AlgoCache::lookup(const std::string& key, AlgoChoice* choice) const {
    std::lock_guard lock(mutex_);
    auto it = choices_.find(key);
    if (it == choices_.end()) return false;
    *choice = it->second;
    return true;
}

void AlgoCache::store(const std::string& key, const AlgoChoice& choice) {
    std::lock_guard lock(mutex_);
    choices_[key] = choice;
}

CudnnConv::~CudnnConv() { destroy(); }

void CudnnConv::destroy() {
    if (x_desc_) cudnnDestroyTensorDescriptor(x_desc_);
    if (y_desc_) cudnnDestroyTensorDescriptor(y_desc_);
    if (w_desc_) cudnnDestroyFilterDescriptor(w_desc_);
    if (conv_desc_) cudnnDestroyConvolutionDescriptor(conv_desc_);
    x_desc_ = y_desc_ = nullptr;
    w_desc_ = nullptr;
    conv_desc_ = nullptr;
}

CudnnConv::CudnnConv(CudnnConv&& other) noexcept { *this = std::move(other); }

CudnnConv& CudnnConv::operator=(CudnnConv&& other) noexcept {
    if (this != &other) {
        destroy();
        shape_ = other.shape_;
        choice_ = other.choice_;
        x_desc_ = std::exchange(other.x_desc_, nullptr);
        y_desc_ = std::exchange(other.y_desc_, nullptr);
        w_desc_ = std::exchange(other.w_desc_, nullptr);
        conv_desc_ = std::exchange(other.conv_desc_, nullptr);
    }
    return *this;
}

Result<CudnnConv> CudnnConv::create(const ConvShape& shape) {
    CudnnConv conv;
    conv.shape_ = shape;
    const cudnnDataType_t type = cudnnType(shape.type);
    VOXSEG_CUDNN_CHECK(cudnnCreateTensorDescriptor(&conv.x_desc_));
    VOXSEG_CUDNN_CHECK(cudnnCreateTensorDescriptor(&conv.y_desc_));
    VOXSEG_CUDNN_CHECK(cudnnCreateFilterDescriptor(&conv.w_desc_));
    VOXSEG_CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&conv.conv_desc_));
    VOXSEG_RETURN_IF_ERROR(
        setChannelsLast(conv.x_desc_, type, shape.n, shape.in_channels, shape.in));
    VOXSEG_RETURN_IF_ERROR(
        setChannelsLast(conv.y_desc_, type, shape.n, shape.out_channels, shape.out));
    // Filter of the forward convolution: K = its output channels. For a transposed convolution the
    // forward op maps the op's output (dx) to its input (dy), so K is the op's input channels.
    const int64_t k = shape.transposed ? shape.in_channels : shape.out_channels;
    const int64_t c = (shape.transposed ? shape.out_channels : shape.in_channels) / shape.groups;
    const int fdims[5] = {int(k), int(c), int(shape.kernel[0]), int(shape.kernel[1]),
                          int(shape.kernel[2])};
    VOXSEG_CUDNN_CHECK(cudnnSetFilterNdDescriptor(conv.w_desc_, type, CUDNN_TENSOR_NHWC, 5, fdims));
    const int pad[3] = {int(shape.pad[0]), int(shape.pad[1]), int(shape.pad[2])};
    const int stride[3] = {int(shape.stride[0]), int(shape.stride[1]), int(shape.stride[2])};
    const int dil[3] = {int(shape.dilation[0]), int(shape.dilation[1]), int(shape.dilation[2])};
    // Accumulate in float32 in every precision.
    VOXSEG_CUDNN_CHECK(cudnnSetConvolutionNdDescriptor(conv.conv_desc_, 3, pad, stride, dil,
                                                       CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
    VOXSEG_CUDNN_CHECK(cudnnSetConvolutionGroupCount(conv.conv_desc_, int(shape.groups)));
    // fp32: FMA only (no TF32) for parity with the reference; fp16/bf16: tensor cores.
    conv.choice_.math = shape.type == StorageType::kFloat32 ? CUDNN_FMA_MATH : CUDNN_TENSOR_OP_MATH;
    VOXSEG_CUDNN_CHECK(cudnnSetConvolutionMathType(conv.conv_desc_, conv.choice_.math));
    return conv;
}

Status CudnnConv::chooseAlgorithm(cudnnHandle_t handle, AlgoCache& cache, const void* x,
                                  const void* w, void* y, void* workspace, size_t workspace_limit) {
    const std::string key = shape_.key();
    const bool fp32 = shape_.type == StorageType::kFloat32;
    AlgoChoice choice;
    if (!cache.lookup(key, &choice)) {
        constexpr int kMaxAlgos = 16;
        bool found = false;
        auto acceptable = [&](cudnnStatus_t status, size_t memory, cudnnMathType_t math) {
            if (status != CUDNN_STATUS_SUCCESS || memory > workspace_limit) return false;
            // TF32 would break fp32 parity; allow only FMA kernels in fp32 mode.
            return !fp32 || math == CUDNN_FMA_MATH || math == CUDNN_DEFAULT_MATH;
        };
        if (!shape_.transposed) {
            cudnnConvolutionFwdAlgoPerf_t perf[kMaxAlgos];
            int returned = 0;
            if (useFind()) {
                VOXSEG_CUDNN_CHECK(cudnnFindConvolutionForwardAlgorithmEx(
                    handle, x_desc_, x, w_desc_, w, conv_desc_, y_desc_, y, kMaxAlgos, &returned,
                    perf, workspace, workspace_limit));
            } else {
                VOXSEG_CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithm_v7(
                    handle, x_desc_, w_desc_, conv_desc_, y_desc_, kMaxAlgos, &returned, perf));
            }
            for (int i = 0; i < returned && !found; ++i) {
                if (!acceptable(perf[i].status, perf[i].memory, perf[i].mathType)) continue;
                choice = {int(perf[i].algo), perf[i].mathType, perf[i].memory, perf[i].time};
                found = true;
            }
        } else {
            cudnnConvolutionBwdDataAlgoPerf_t perf[kMaxAlgos];
            int returned = 0;
            if (useFind()) {
                VOXSEG_CUDNN_CHECK(cudnnFindConvolutionBackwardDataAlgorithmEx(
                    handle, w_desc_, w, x_desc_, x, conv_desc_, y_desc_, y, kMaxAlgos, &returned,
                    perf, workspace, workspace_limit));
            } else {
                VOXSEG_CUDNN_CHECK(cudnnGetConvolutionBackwardDataAlgorithm_v7(
                    handle, w_desc_, x_desc_, conv_desc_, y_desc_, kMaxAlgos, &returned, perf));
            }
            for (int i = 0; i < returned && !found; ++i) {
                if (!acceptable(perf[i].status, perf[i].memory, perf[i].mathType)) continue;
                choice = {int(perf[i].algo), perf[i].mathType, perf[i].memory, perf[i].time};
                found = true;
            }
        }
        if (!found)
            return unsupported(
                fmt::format("cuDNN has no {} algorithm for {} within {} MiB of workspace",
                            shape_.transposed ? "transposed convolution" : "convolution", key,
                            workspace_limit >> 20));
        if (fp32) choice.math = CUDNN_FMA_MATH;
        cache.store(key, choice);
        log::debug("cuda", "conv {}: algo {} math {} workspace {} KiB, {:.3f} ms", key, choice.algo,
                   int(choice.math), choice.workspace >> 10, choice.time_ms);
    }
    choice_ = choice;
    VOXSEG_CUDNN_CHECK(cudnnSetConvolutionMathType(conv_desc_, choice_.math));
    return Status::ok();
}

Status CudnnConv::run(cudnnHandle_t handle, const void* x, const void* w, void* y, void* workspace,
                      size_t workspace_bytes) const {
    const float one = 1.0f, zero = 0.0f;
    if (!shape_.transposed) {
        VOXSEG_CUDNN_CHECK(
            cudnnConvolutionForward(handle, &one, x_desc_, x, w_desc_, w, conv_desc_,
                                    static_cast<cudnnConvolutionFwdAlgo_t>(choice_.algo), workspace,
                                    workspace_bytes, &zero, y_desc_, y));
    } else {
        VOXSEG_CUDNN_CHECK(
            cudnnConvolutionBackwardData(handle, &one, w_desc_, w, x_desc_, x, conv_desc_,
                                         static_cast<cudnnConvolutionBwdDataAlgo_t>(choice_.algo),
                                         workspace, workspace_bytes, &zero, y_desc_, y));
    }
    return Status::ok();
}

std::string CudnnConv::algoName() const {
    static const char* kFwd[] = {
        "implicit_gemm", "implicit_precomp_gemm", "gemm", "direct", "fft", "fft_tiling",
        "winograd",      "winograd_nonfused"};
    static const char* kBwd[] = {"algo0",      "algo1",    "fft",
                                 "fft_tiling", "winograd", "winograd_nonfused"};
    const int a = choice_.algo;
    const char* name =
        shape_.transposed ? (a >= 0 && a < 6 ? kBwd[a] : "?") : (a >= 0 && a < 8 ? kFwd[a] : "?");
    return fmt::format("{}{}", name, choice_.math == CUDNN_TENSOR_OP_MATH ? "+tc" : "");
}

double CudnnConv::flops() const {
    // MACs = output voxels of the forward conv * K * C/g * kernel volume.
    const auto& s = shape_;
    const double kvol = double(s.kernel[0] * s.kernel[1] * s.kernel[2]);
    const double fwd_out_voxels =
        double(s.n) * (s.transposed ? s.in[0] * s.in[1] * s.in[2] : s.out[0] * s.out[1] * s.out[2]);
    const double k = double(s.transposed ? s.in_channels : s.out_channels);
    const double c = double((s.transposed ? s.out_channels : s.in_channels) / s.groups);
    return 2.0 * fwd_out_voxels * k * c * kvol;
}

}  // namespace voxseg::cuda
