// The ONNX importer's graph-level rewrites (engine/onnx/import.cpp runs them after every node
// was converted): exporters' spelled-out forms of GroupNorm, LayerNorm, Gelu and SiLU collapsed
// into one node each, and dead nodes pruned. Pure functions of a Graph.
#pragma once

#include "engine/graph/graph.h"

namespace voxseg::engine::passes {

// Removes nodes whose outputs reach no graph output.
void pruneDeadNodes(Graph& graph);

// PyTorch (opset < 18) exports GroupNorm as Reshape [N, G, -1] -> InstanceNorm(ones, zeros) ->
// Reshape back -> Mul(gamma) -> Add(beta); collapses each such chain into one GroupNorm node.
void fuseGroupNormPattern(Graph& graph);

// Older exporters' spelled-out forms of transformer ops, each collapsed into one node (run
// before pruneDeadNodes, which removes what they leave unread):
// ReduceMean/Sub/Pow(2)/ReduceMean/Add eps/Sqrt/Div [/Mul gamma/Add beta] -> LayerNorm;
void fuseLayerNormPattern(Graph& graph);
// x * 0.5 * (1 + erf(x / sqrt(2))) -> Gelu (exact);
void fuseGeluPattern(Graph& graph);
// x * Sigmoid(x) -> SiLU.
void fuseSiluPattern(Graph& graph);

}  // namespace voxseg::engine::passes
