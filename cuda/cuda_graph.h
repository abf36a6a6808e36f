// CudaCompiledGraph: an engine::Graph lowered to a fixed list of device steps (cuDNN
// convolutions, cuBLASLt matrix products and voxseg kernels) over one planned activation arena.
// Internal to cuda/: the CUDA sliding window drives it on the device directly
// (inputView()/runDevice()/outputView()) so that patches never leave the GPU.
//
// Ownership: owns the arena, parameters, workspace, stream and cuDNN handle. One thread at a
// time. Units: bytes; views count elements.
#pragma once

#include "core/status.h"
#include "cuda/cublaslt_int8_gemm.h"
#include "cuda/cudnn_conv.h"
#include "cuda/device_memory.h"
#include "cuda/int8_conv.h"
#include "cuda/kernels.h"
#include "cuda/tensor_step.h"
#include "engine/backend.h"
#include "engine/graph/graph.h"

#include <cublasLt.h>
#include <cudnn.h>

#include <memory>
#include <string>
#include <vector>

namespace voxseg::cuda {

// Whether CudaCompiledGraph lowers `node` (op, attributes, and the shapes in g.values as Graph's
// shape inference left them): ok, or kUnsupported naming the node, the op and why. The backend's
// supportsNode and the planner both ask this, so they cannot disagree.
Status cudaSupportsNode(const engine::Graph& g, const engine::Node& node);

class CudaCompiledGraph final : public engine::CompiledGraph {
  public:
    static Result<std::unique_ptr<CudaCompiledGraph>> compile(
        const engine::Graph& graph, const std::vector<engine::Shape>& input_shapes,
        const engine::CompileOptions& options, AlgoCache& cache);
    ~CudaCompiledGraph() override;

    const std::vector<engine::Shape>& inputShapes() const override { return input_shapes_; }
    const std::vector<engine::Shape>& outputShapes() const override { return output_shapes_; }
    Status run(const std::vector<engine::Tensor>& inputs,
               std::vector<engine::Tensor>& outputs) override;
    size_t workspaceBytes() const override;
    std::string describe() const override;

    // Device-side use (sliding window): write inputs into inputView(i) (channels-last, padded
    // channels must stay zero), runDevice(), read outputView(i). All on stream().
    View inputView(size_t i) const;
    View outputView(size_t i) const;
    Status runDevice();
    cudaStream_t stream() const { return stream_; }
    StorageType storage() const { return storage_; }
    int device() const { return device_; }
    double convFlops() const;  // per run (all images of the batch)

    struct Step;  // defined in cuda_graph.cpp

  private:
    CudaCompiledGraph() = default;
    Status planTensorSteps();  // cuBLASLt plans of the MatMul / Attention / int8 conv steps
    Status runInt8Conv(const Step& s);

    int device_ = 0;
    StorageType storage_ = StorageType::kFloat32;
    engine::Precision precision_ = engine::Precision::kFloat32;
    std::vector<engine::Shape> input_shapes_, output_shapes_;
    std::vector<View> input_views_, output_views_;        // rank-5 channels-last values
    std::vector<float*> packed_inputs_, packed_outputs_;  // other ranks (row-major), else nullptr
    std::vector<Step> steps_;
    std::vector<CudnnConv> convs_;
    std::vector<TensorStep> tensor_steps_;  // transformer-layer ops (tensor_step.h)
    std::vector<Int8ConvPlan> int8_convs_;  // precision int8 (int8_conv.h)
    std::vector<LtInt8Gemm> int8_gemms_;    // one per int8 convolution
    cublasLtHandle_t lt_ = nullptr;
    DeviceBuffer lt_workspace_;
    DeviceBuffer arena_, params_, workspace_, scratch_, io_staging_;
    DeviceBuffer int8_scratch_;  // one int8 chunk: im2col rows, then s32 results
    cudaStream_t stream_ = nullptr;
    cudnnHandle_t cudnn_ = nullptr;
    std::string summary_;
};

}  // namespace voxseg::cuda
