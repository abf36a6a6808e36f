// The graph rewrites every backend compiles after (voxseg::engine::optimize). Pure functions of
// a Graph; thread-safe on distinct graphs. The rewrites themselves: engine/passes/.
#pragma once

#include "engine/graph/graph.h"

namespace voxseg::engine {

// Graph-level rewrites shared by all backends: BatchNorm folded into a preceding Conv, Identity
// removed, a constant bias Add and scale Mul after a MatMul with constant weights folded into it
// (bias input, scaled weights), activations (and a residual Add) fused into the producing
// Conv/norm/MatMul as epilogues,
// MatMul -> [Mul/Div by a constant] -> [Add bias] [-> Swin's window-mask Reshape/Add/Reshape]
// -> Softmax(last axis) -> MatMul fused into one Attention node, torch.roll's Slice/Concat pairs
// into one Roll and Slice chains into one Slice (engine/passes/fuse_copies.cpp), and the exported
// rotary-embedding chain into one Rotary node (a scalar Mul after it folded into its tables; Concat
// inputs with no elements dropped); an Attention whose Q, K^T and V are head-split Transposes of
// [B, T, H, D] tensors (through a Rotary) and whose output is merged back by a Transpose becomes
// one MultiHeadAttention on the packed [B, T, H*D] tensors
// (engine/passes/fuse_attention_heads.cpp). Backends may ignore epilogues they cannot fuse only by
// evaluating them separately.
Graph optimize(const Graph& graph);

}  // namespace voxseg::engine
