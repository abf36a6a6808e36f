// Internal to the cpu backend: planning of activation observers (engine/activation_observer.h).
#pragma once

#include "engine/activation_observer.h"
#include "engine/cpu/plan.h"

#include <vector>

namespace voxseg::engine::cpu {

// Per value of `graph` (already optimised): whether `observer` asks for it. kInvalidArgument
// naming a requested tensor that no node computes (and is no graph input), or a missing callback.
Result<std::vector<bool>> observedValues(const Graph& graph, const ActivationObserver& observer);

// Steps that hand value `v` (computed by the steps planned so far) to `callback` as plain
// float32.
Status planObserve(Plan& plan, ValueId v, const ActivationCallback& callback);

}  // namespace voxseg::engine::cpu
