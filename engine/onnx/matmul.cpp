// MatMul (numpy batched broadcasting), Gemm and the Einsum forms attention exporters emit.
#include "engine/onnx/converter.h"

namespace voxseg::engine::onnx_detail {
namespace {}  // namespace

void addMatMulConverters(ConverterTable& t) { (void)t; }

}  // namespace voxseg::engine::onnx_detail
