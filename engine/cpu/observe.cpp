// Activation observers on the cpu backend (engine/activation_observer.h): after the steps that
// compute an observed tensor, a copy into plain float32 (none when the tensor is plain float32
// already) and a kernel step that hands it to the callback.
#include "engine/cpu/observe.h"

#include <set>

namespace voxseg::engine::cpu {

Result<std::vector<bool>> observedValues(const Graph& graph, const ActivationObserver& observer) {
    std::vector<bool> wanted(graph.values.size(), false);
    if (!observer.active()) return wanted;
    if (!observer.callback)
        return invalidArgument(
            "cpu backend: an activation observer names tensors but has no "
            "callback");
    std::set<std::string> missing(observer.tensors.begin(), observer.tensors.end());
    for (size_t v = 0; v < graph.values.size(); ++v) {
        const Value& value = graph.values[v];
        if (value.constant || !missing.count(value.name)) continue;
        wanted[v] = true;
        missing.erase(value.name);
    }
    // Computed values only: a name that is no node's output nor a graph input is not observable.
    std::vector<bool> computed(graph.values.size(), false);
    for (ValueId v : graph.inputs) computed[v] = true;
    for (const Node& n : graph.nodes)
        for (ValueId v : n.outputs)
            if (v >= 0) computed[v] = true;
    for (size_t v = 0; v < wanted.size(); ++v)
        if (wanted[v] && !computed[v]) {
            wanted[v] = false;
            missing.insert(graph.values[v].name);
        }
    if (!missing.empty())
        return invalidArgument("cpu backend: cannot observe tensor '" + *missing.begin() +
                                   "': no computed tensor of the optimised graph has that name "
                                   "(int8CandidateTensors lists the observable conv inputs)",
                               *missing.begin());
    return wanted;
}

Status planObserve(Plan& plan, ValueId v, const ActivationCallback& callback) {
    const Value& value = plan.graph().values[v];
    VOXSEG_ASSIGN_OR_RETURN(MemRef plain, plan.ensurePlainF32(v));
    const std::string name = value.name;
    const Shape shape = value.shape;
    plan.addKernel("observe " + name,
                   [callback, name, shape](const std::vector<dnnl::memory>& m) {
                       callback(name, static_cast<const float*>(m[0].get_data_handle()), shape);
                   },
                   {plain});
    return Status::ok();
}

}  // namespace voxseg::engine::cpu
