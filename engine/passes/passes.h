// Internal to the engine: what optimize()'s rewrites (engine/graph/graph.cpp, and the passes with a
// file of their own) share, and those passes. Not a public header.
#pragma once

#include "engine/graph/graph.h"

#include <vector>

namespace voxseg::engine::passes {

// Which node produces each value (-1 for graph inputs and constants) and how often it is used
// (graph outputs and fused residual / PReLU slope inputs count as uses).
struct Usage {
    std::vector<int> producer;
    std::vector<int> uses;
};
Usage computeUsage(const Graph& g);
bool isGraphOutput(const Graph& g, ValueId v);
// The node producing `v` when it is `op` and `v` is read once, not a graph output (-1 otherwise).
int singleProducer(const Graph& g, const Usage& u, ValueId v, OpKind op);

// Attention(Q, K^T, V) on head-split [B, H, T, D] tensors made by Transposes of [B, T, H, D] ones
// (Q and K through a Rotary, K^T by one more Transpose), its output merged back to [B, T, H, D]
// by a Transpose: one MultiHeadAttention on the packed [B, T, H*D] tensors, the Rotary on the
// packed rows (its tables repeated per head), no Transpose left
// (engine/passes/fuse_attention_heads.cpp). Needs inferred shapes.
void fuseAttentionHeads(Graph& g);

// torch.roll's exported Concat(Slice, Slice) pairs as Roll nodes, Rolls of Rolls as one, Slices
// of Slices (positive steps) as one Slice (engine/passes/fuse_copies.cpp). Needs inferred shapes.
void fuseCopies(Graph& g);

}  // namespace voxseg::engine::passes
