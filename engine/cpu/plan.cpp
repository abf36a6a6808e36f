#include "engine/cpu/plan.h"

#include "engine/cpu/conv_int8.h"

#include "core/log.h"
#include "core/memory_limit.h"
#include "core/process_metrics.h"

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <cstring>

#include <sys/mman.h>
#include <unistd.h>

namespace voxseg::engine::cpu {

dnnl::memory::dims toDims(const Shape& shape) {
    return dnnl::memory::dims(shape.begin(), shape.end());
}

dnnl::memory::desc plainDesc(const Shape& shape, dt type) {
    dnnl::memory::dims dims = toDims(shape);
    if (dims.empty()) dims = {1};  // scalars as one-element vectors
    dnnl::memory::dims strides(dims.size(), 1);
    for (int i = static_cast<int>(dims.size()) - 2; i >= 0; --i)
        strides[i] = strides[i + 1] * dims[i + 1];
    return dnnl::memory::desc(dims, type, strides);
}

size_t alignUp(size_t n, size_t a) { return (n + a - 1) / a * a; }

namespace {
bool cpuHasIsa(dnnl_cpu_isa_t want) {
    const auto isa = static_cast<unsigned>(dnnl::get_effective_cpu_isa());
    return (isa & static_cast<unsigned>(want)) == static_cast<unsigned>(want);
}
}  // namespace

bool cpuHasBf16() { return cpuHasIsa(dnnl_cpu_isa_avx512_core_bf16); }
bool cpuHasAmx() { return cpuHasIsa(dnnl_cpu_isa_avx512_core_amx); }

namespace {

const tag k5[] = {tag::ncdhw, tag::ndhwc, tag::nCdhw16c, tag::nCdhw8c, tag::nCdhw4c};
const char* n5[] = {"ncdhw", "ndhwc", "nCdhw16c", "nCdhw8c", "nCdhw4c"};
const tag k4[] = {tag::nchw, tag::nhwc, tag::nChw16c, tag::nChw8c};
const char* n4[] = {"nchw", "nhwc", "nChw16c", "nChw8c"};

}  // namespace

bool isChannelsLast(const dnnl::memory::desc& md) {
    const auto dims = md.dims();
    if (dims.size() == 5) return md == dnnl::memory::desc(dims, md.data_type(), tag::ndhwc);
    if (dims.size() == 4) return md == dnnl::memory::desc(dims, md.data_type(), tag::nhwc);
    return false;
}

dnnl::memory::desc sameLayout(const dnnl::memory::desc& like, const dnnl::memory::dims& dims,
                              dt type) {
    const auto ld = like.dims();
    if (ld.size() == 5 && dims.size() == 5) {
        for (tag t : k5)
            if (like == dnnl::memory::desc(ld, like.data_type(), t))
                return dnnl::memory::desc(dims, type, t);
    } else if (ld.size() == 4 && dims.size() == 4) {
        for (tag t : k4)
            if (like == dnnl::memory::desc(ld, like.data_type(), t))
                return dnnl::memory::desc(dims, type, t);
    }
    return plainDesc(Shape(dims.begin(), dims.end()), type);
}

std::string descName(const dnnl::memory::desc& md) {
    const auto dims = md.dims();
    const auto type = md.data_type();
    std::string layout = "blocked";
    if (dims.size() == 5) {
        for (size_t i = 0; i < 5; ++i)
            if (md == dnnl::memory::desc(dims, type, k5[i])) layout = n5[i];
    } else if (dims.size() == 4) {
        for (size_t i = 0; i < 4; ++i)
            if (md == dnnl::memory::desc(dims, type, k4[i])) layout = n4[i];
    } else if (md == plainDesc(Shape(dims.begin(), dims.end()), type)) {
        layout = "plain";
    }
    return layout + (type == dt::bf16  ? ":bf16"
                     : type == dt::f32 ? ":f32"
                     : type == dt::u8  ? ":u8"
                     : type == dt::s8  ? ":s8"
                                       : ":other");
}

std::vector<int64_t> plainStrides(const Shape& s) {
    std::vector<int64_t> st(s.size(), 1);
    for (int i = static_cast<int>(s.size()) - 2; i >= 0; --i) st[i] = st[i + 1] * s[i + 1];
    return st;
}

Shape withLeadingOnes(const Shape& s, size_t rank) {
    Shape out(rank - s.size(), 1);
    out.insert(out.end(), s.begin(), s.end());
    return out;
}

std::vector<int64_t> broadcastStrides(const Shape& s, const Shape& to) {
    const Shape bs = withLeadingOnes(s, to.size());
    std::vector<int64_t> st(to.size(), 0);
    int64_t k = 1;
    for (int i = static_cast<int>(to.size()) - 1; i >= 0; --i) {
        st[i] = bs[i] == 1 ? 0 : k;
        k *= bs[i];
    }
    return st;
}

dnnl::memory::desc currentDesc(Plan& plan, ValueId v) {
    if (plan.has(v)) return plan.desc(v);
    return plainDesc(plan.graph().values[v].shape, plan.actType());
}

MemRef viewAs(Plan& plan, const MemRef& r, const dnnl::memory::desc& md) {
    MemRef v{r.buffer, md, r.fixed};
    if (r.buffer < 0) v.fixed = dnnl::memory(md, plan.engine(), r.fixed.get_data_handle());
    return v;
}

Status nodeError(const Plan& plan, const std::string& what) {
    const Node& n = plan.node();
    return unsupported("cpu backend: node '" + n.name + "' (" + opKindName(n.op) + "): " + what,
                       n.name);
}

namespace {

std::string descKey(const dnnl::memory::desc& md) {
    return std::string(reinterpret_cast<const char*>(&md.data), sizeof(md.data));
}

}  // namespace

Plan::Plan(const Graph& graph, dnnl::engine engine, Precision precision)
    : graph_(graph),
      engine_(std::move(engine)),
      compile_stream_(engine_),
      precision_(precision),
      act_type_(precision == Precision::kBFloat16 ? dt::bf16 : dt::f32),
      last_use_(graph.values.size(), -1) {
    const char* profile = std::getenv("VOXSEG_CPU_PROFILE");
    profile_ = profile && (std::string(profile) == "1" || std::string(profile) == "all");
    profile_all_ = profile_ && std::string(profile) == "all";
    for (size_t i = 0; i < graph.nodes.size(); ++i) {
        const Node& n = graph.nodes[i];
        auto use = [&](ValueId v) {
            if (v >= 0) last_use_[v] = std::max(last_use_[v], static_cast<int>(i));
        };
        for (ValueId v : n.inputs) use(v);
        use(n.fused_residual);
        use(n.fused_prelu_slope);
    }
    for (ValueId v : graph.outputs) last_use_[v] = INT_MAX;
}

bool Plan::diesHere(ValueId v) const { return last_use_[v] == current_node_; }

MemRef Plan::newBuffer(const dnnl::memory::desc& md) {
    Buffer b;
    b.bytes = md.get_size();
    buffers_.push_back(b);
    return MemRef{static_cast<int>(buffers_.size() - 1), md, {}};
}

std::optional<MemRef> Plan::tryInPlace(ValueId input, const dnnl::memory::desc& md) {
    if (graph_.isConstant(input) || !has(input) || !diesHere(input)) return std::nullopt;
    const MemRef& r = refs_.at(input);
    if (r.buffer < 0 || !(r.md == md)) return std::nullopt;
    const Buffer& b = buffers_[r.buffer];
    if (b.input_index >= 0 || b.output_index >= 0) return std::nullopt;
    return r;
}

bool Plan::canBecomeView(ValueId v, const MemRef& r, size_t bytes) const {
    if (graph_.isConstant(v) || !has(v) || !diesHere(v) || r.buffer < 0) return false;
    const Buffer& b = buffers_[r.buffer];
    return b.input_index < 0 && b.output_index < 0 && b.parent < 0 && b.bytes == bytes;
}

void Plan::makeView(int child, int parent, size_t byte_offset) {
    buffers_[child].parent = parent;
    buffers_[child].parent_offset = byte_offset;
}

Result<dnnl::memory> Plan::constantMemory(const Tensor& t, const dnnl::memory::desc& src_md,
                                          const dnnl::memory::desc& md) {
    const std::vector<float> values = t.toFloats();
    if (values.size() * sizeof(float) != src_md.get_size() || src_md.data_type() != dt::f32)
        return nodeError(*this, "constant of shape " + shapeToString(t.shape()) +
                                    " does not fit the operand it feeds");
    dnnl::memory src(src_md, engine_);
    std::memcpy(src.get_data_handle(), values.data(), src_md.get_size());
    dnnl::memory dst(md, engine_);
    dnnl::reorder(src, dst).execute(compile_stream_, src, dst);
    compile_stream_.wait();
    return dst;
}

Result<dnnl::memory> Plan::constantMemory(ValueId v, const dnnl::memory::desc& md) {
    const auto key = std::make_pair(v, descKey(md));
    if (auto it = constants_.find(key); it != constants_.end()) return it->second;
    const Tensor& t = graph_.constant(v);
    const auto dims = md.dims();
    VOXSEG_ASSIGN_OR_RETURN(
        dnnl::memory m, constantMemory(t, plainDesc(Shape(dims.begin(), dims.end()), dt::f32), md));
    constants_[key] = m;
    return m;
}

Result<MemRef> Plan::ensure(ValueId v, const dnnl::memory::desc& md) {
    if (graph_.isConstant(v)) {
        VOXSEG_ASSIGN_OR_RETURN(dnnl::memory m, constantMemory(v, md));
        return MemRef{-1, md, m};
    }
    if (!has(v))
        return internalError("cpu backend: value '" + graph_.values[v].name +
                             "' is used before it is computed (node '" + node().name + "')");
    const MemRef& r = refs_.at(v);
    if (r.md == md) return r;
    const auto key = std::make_pair(v, descKey(md));
    auto it = converted_.find(key);
    if (it != converted_.end()) return it->second;
    MemRef out = newBuffer(md);
    VOXSEG_RETURN_IF_ERROR(addCopy(r, out));
    converted_[key] = out;
    return out;
}

Result<MemRef> Plan::ensureQuantized(ValueId v, const dnnl::memory::desc& u8_md,
                                     const quant::ActivationQuant& q) {
    if (!has(v) || graph_.isConstant(v))
        return internalError("cpu backend: value '" + graph_.values[v].name +
                             "' is quantised before it is computed (node '" + node().name + "')");
    if (refs_.at(v).md.data_type() == dt::u8) return ensure(v, u8_md);
    const auto key = std::make_pair(v, descKey(u8_md));
    if (auto it = quantized_.find(key); it != quantized_.end()) return it->second;
    // A u8 form in another layout (a normalisation's): a layout reorder of it reads a quarter
    // of the float's bytes.
    if (const MemRef* u8 = anyQuantized(v)) {
        MemRef out = newBuffer(u8_md);
        VOXSEG_RETURN_IF_ERROR(addCopy(*u8, out));
        quantized_[key] = out;
        return out;
    }
    VOXSEG_ASSIGN_OR_RETURN(dnnl::reorder quantize,
                            makeQuantizeReorder(engine_, refs_.at(v).md, u8_md, q));
    MemRef out = newBuffer(u8_md);
    addPrimitive("quantize " + descName(refs_.at(v).md) + "->" + descName(u8_md), quantize,
                 {{DNNL_ARG_SRC, refs_.at(v)}, {DNNL_ARG_DST, out}}, {});
    quantized_[key] = out;
    return out;
}

void Plan::defineQuantized(ValueId v, const MemRef& u8) {
    quantized_[std::make_pair(v, descKey(u8.md))] = u8;
}

const MemRef* Plan::anyQuantized(ValueId v) const {
    const auto it = quantized_.lower_bound(std::make_pair(v, std::string()));
    return it != quantized_.end() && it->first.first == v ? &it->second : nullptr;
}

dnnl::memory::desc Plan::quantizedDesc(ValueId v) const {
    if (has(v) && refs_.at(v).md.data_type() == dt::u8) return refs_.at(v).md;
    const MemRef* u8 = anyQuantized(v);
    return u8 ? u8->md : dnnl::memory::desc();
}

const quant::Int8Layer* Plan::int8Layer() const { return int8LayerOf(current_node_); }

const quant::Int8Layer* Plan::int8LayerOf(int node) const {
    if (!int8_layers_ || node < 0 || node >= static_cast<int>(int8_layers_->size())) return nullptr;
    return &(*int8_layers_)[node];
}

dnnl::memory::desc U8Halo::md() const {
    return dnnl::memory::desc({batch, channels, padded[0], padded[1], padded[2]}, dt::u8,
                              dnnl::memory::format_tag::ndhwc);
}

void U8Halo::fill(void* base) const {
    auto* q = static_cast<uint8_t*>(base);
    const int64_t row = padded[2] * channels, plane = padded[1] * row;
    const int64_t left = lo[2] * channels, right = (padded[2] - lo[2] - size[2]) * channels;
#pragma omp parallel for schedule(static)
    for (int64_t nz = 0; nz < batch * padded[0]; ++nz) {
        uint8_t* pl = q + nz * plane;
        const int64_t z = nz % padded[0];
        if (z < lo[0] || z >= lo[0] + size[0]) {
            std::memset(pl, zero_point, static_cast<size_t>(plane));
            continue;
        }
        for (int64_t y = 0; y < padded[1]; ++y) {
            uint8_t* r = pl + y * row;
            if (y < lo[1] || y >= lo[1] + size[1]) {
                std::memset(r, zero_point, static_cast<size_t>(row));
            } else {
                std::memset(r, zero_point, static_cast<size_t>(left));
                std::memset(r + row - right, zero_point, static_cast<size_t>(right));
            }
        }
    }
}

std::optional<U8Halo> u8Halo(const Shape& shape, const quant::Int8Layer& layer) {
    if ((layer.halo_lo == std::array<int64_t, 3>{} && layer.halo_hi == std::array<int64_t, 3>{}) ||
        shape.size() != 5)
        return std::nullopt;
    U8Halo h;
    h.batch = shape[0];
    h.channels = shape[1];
    for (int i = 0; i < 3; ++i) {
        h.size[i] = shape[2 + i];
        h.lo[i] = layer.halo_lo[i];
        h.padded[i] = shape[2 + i] + layer.halo_lo[i] + layer.halo_hi[i];
    }
    h.zero_point = static_cast<uint8_t>(layer.dst.zero_point);
    return h;
}

Result<MemRef> Plan::ensurePlainF32(ValueId v) {
    return ensure(v, plainDesc(graph_.values[v].shape, dt::f32));
}

void Plan::addPrimitive(const std::string& what, dnnl::primitive prim,
                        std::vector<std::pair<int, MemRef>> args,
                        const dnnl::memory::desc& scratchpad_md) {
    Step s;
    s.node = node().name;
    s.what = what;
    s.prim = std::move(prim);
    s.args = std::move(args);
    s.scratchpad = scratchpad_md.get_size() > 0;
    scratchpad_bytes_ = std::max(scratchpad_bytes_, scratchpad_md.get_size());
    steps_.push_back(std::move(s));
}

void Plan::addKernel(const std::string& what, Kernel kernel, std::vector<MemRef> refs) {
    Step s;
    s.node = node().name;
    s.what = what;
    s.kernel = std::move(kernel);
    for (size_t i = 0; i < refs.size(); ++i) s.args.emplace_back(static_cast<int>(i), refs[i]);
    steps_.push_back(std::move(s));
}

Status Plan::addCopy(const MemRef& src, const MemRef& dst) {
    try {
        dnnl::reorder::primitive_desc pd(engine_, src.md, engine_, dst.md);
        addPrimitive("reorder " + descName(src.md) + "->" + descName(dst.md), dnnl::reorder(pd),
                     {{DNNL_ARG_SRC, src}, {DNNL_ARG_DST, dst}}, pd.scratchpad_desc());
    } catch (const dnnl::error& e) {
        return nodeError(*this, std::string("no reorder ") + descName(src.md) + " -> " +
                                    descName(dst.md) + ": " + e.what());
    }
    return Status::ok();
}

void Plan::defineInputs(const std::vector<Shape>& shapes) {
    for (size_t i = 0; i < graph_.inputs.size(); ++i) {
        const auto md = plainDesc(shapes[i], dt::f32);
        MemRef r = newBuffer(md);
        buffers_[r.buffer].input_index = static_cast<int>(i);
        refs_[graph_.inputs[i]] = r;
    }
}

Status Plan::defineOutputs() {
    current_node_ = graph_.nodes.empty() ? 0 : static_cast<int>(graph_.nodes.size()) - 1;
    for (size_t j = 0; j < graph_.outputs.size(); ++j) {
        const ValueId v = graph_.outputs[j];
        MemRef out = newBuffer(plainDesc(graph_.values[v].shape, dt::f32));
        buffers_[out.buffer].output_index = static_cast<int>(j);
        output_buffers_.push_back(out.buffer);
        if (graph_.isConstant(v)) {
            VOXSEG_ASSIGN_OR_RETURN(MemRef c, ensure(v, out.md));
            VOXSEG_RETURN_IF_ERROR(addCopy(c, out));
        } else {
            if (!has(v))
                return internalError("cpu backend: graph output '" + graph_.values[v].name +
                                     "' is never computed");
            VOXSEG_RETURN_IF_ERROR(addCopy(refs_.at(v), out));
        }
    }
    return Status::ok();
}

size_t planArenaOffsets(const std::vector<size_t>& bytes,
                        const std::vector<std::pair<int, int>>& lifetimes, size_t alignment,
                        std::vector<size_t>& offsets) {
    const size_t n = bytes.size();
    offsets.assign(n, 0);
    std::vector<size_t> order(n);
    for (size_t i = 0; i < n; ++i) order[i] = i;
    // Largest first, ties by earlier start: the classic greedy-by-size packing.
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t a, size_t b) { return bytes[a] > bytes[b]; });
    std::vector<size_t> placed;
    size_t total = 0;
    for (size_t i : order) {
        const size_t size = alignUp(std::max<size_t>(bytes[i], 1), alignment);
        std::vector<std::pair<size_t, size_t>> busy;  // [offset, end) of time-overlapping buffers
        for (size_t j : placed) {
            const bool overlap = lifetimes[i].first <= lifetimes[j].second &&
                                 lifetimes[j].first <= lifetimes[i].second;
            if (overlap) busy.emplace_back(offsets[j], offsets[j] + alignUp(bytes[j], alignment));
        }
        std::sort(busy.begin(), busy.end());
        size_t best = SIZE_MAX, best_gap = SIZE_MAX, cursor = 0;
        for (const auto& [b, e] : busy) {
            if (b > cursor && b - cursor >= size && b - cursor < best_gap) {
                best = cursor;
                best_gap = b - cursor;
            }
            cursor = std::max(cursor, e);
        }
        if (best == SIZE_MAX) best = cursor;
        offsets[i] = best;
        total = std::max(total, best + size);
        placed.push_back(i);
    }
    return total;
}

namespace {

// MADV_DONTNEED on the whole pages inside [p, p + bytes): the allocation's own pages only (the
// partial pages at either end may hold the allocator's bookkeeping).
void releasePages(std::byte* p, size_t bytes) {
    if (p == nullptr || bytes == 0) return;
    const auto page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
    const auto begin = (reinterpret_cast<uintptr_t>(p) + page - 1) / page * page;
    const auto end = (reinterpret_cast<uintptr_t>(p) + bytes) / page * page;
    if (end > begin) madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
}

}  // namespace

void Plan::releaseWorkspace() {
    releasePages(arena_.get(), arena_bytes_);
    releasePages(scratchpad_.get(), scratchpad_bytes_);
}

Status Plan::finish() {
    for (size_t s = 0; s < steps_.size(); ++s) {
        for (const auto& [arg, r] : steps_[s].args) {
            if (r.buffer < 0) continue;
            Buffer& b = buffers_[r.buffer];
            if (b.first_step < 0) b.first_step = static_cast<int>(s);
            b.last_step = static_cast<int>(s);
        }
    }
    // A view's steps keep its parent alive (children before parents: parents were created at
    // the node that made the views).
    for (size_t i = 0; i < buffers_.size(); ++i) {
        const Buffer& b = buffers_[i];
        if (b.parent < 0 || b.first_step < 0) continue;
        if (b.parent <= static_cast<int>(i))
            return internalError("cpu backend: buffer view planned before its parent");
        Buffer& p = buffers_[b.parent];
        p.first_step = p.first_step < 0 ? b.first_step : std::min(p.first_step, b.first_step);
        p.last_step = std::max(p.last_step, b.last_step);
    }
    std::vector<int> internal;
    std::vector<size_t> sizes;
    std::vector<std::pair<int, int>> lifetimes;
    for (size_t i = 0; i < buffers_.size(); ++i) {
        const Buffer& b = buffers_[i];
        if (b.input_index >= 0 || b.output_index >= 0 || b.first_step < 0 || b.parent >= 0)
            continue;
        internal.push_back(static_cast<int>(i));
        sizes.push_back(b.bytes);
        lifetimes.emplace_back(b.first_step, b.last_step);
    }
    constexpr size_t kAlignment = 4096;
    std::vector<size_t> offsets;
    arena_bytes_ = planArenaOffsets(sizes, lifetimes, kAlignment, offsets);
    for (size_t k = 0; k < internal.size(); ++k) buffers_[internal[k]].offset = offsets[k];
    for (size_t i = buffers_.size(); i-- > 0;) {  // parents first
        Buffer& b = buffers_[i];
        if (b.parent >= 0) b.offset = buffers_[b.parent].offset + b.parent_offset;
    }

    auto allocate = [](size_t bytes) -> std::shared_ptr<std::byte> {
        if (bytes == 0) return {};
        void* p = std::aligned_alloc(kAlignment, alignUp(bytes, kAlignment));
        if (!p) return {};
        return std::shared_ptr<std::byte>(static_cast<std::byte*>(p),
                                          [](std::byte* q) { std::free(q); });
    };
    // Linux over-commits: an arena beyond the memory this process may use would be allocated and
    // the process killed when the network writes it.
    const uint64_t limit = memoryLimitBytes();
    if (limit > 0 && arena_bytes_ + scratchpad_bytes_ > limit)
        return Status(StatusCode::kOutOfMemory,
                      "cpu backend: the activations need " +
                          std::to_string((arena_bytes_ + scratchpad_bytes_) >> 20) +
                          " MiB, more than the " + describeMemoryLimit() +
                          "; use a smaller patch or batch");
    arena_ = allocate(arena_bytes_);
    scratchpad_ = allocate(scratchpad_bytes_);
    if ((arena_bytes_ && !arena_) || (scratchpad_bytes_ && !scratchpad_))
        return Status(StatusCode::kOutOfMemory,
                      "cpu backend: cannot allocate " +
                          std::to_string((arena_bytes_ + scratchpad_bytes_) >> 20) +
                          " MiB of activations; use a smaller patch or batch");
    if (scratchpad_bytes_) {
        scratchpad_mem_ = dnnl::memory(
            dnnl::memory::desc({static_cast<dnnl::memory::dim>(scratchpad_bytes_)}, dt::u8, tag::a),
            engine_, scratchpad_.get());
    }
    for (Step& s : steps_) {
        for (const auto& [arg, r] : s.args) {
            dnnl::memory m = bind(r);
            if (s.prim)
                s.exec_args[arg] = m;
            else
                s.mems.push_back(m);
        }
        if (s.prim && s.scratchpad) s.exec_args[DNNL_ARG_SCRATCHPAD] = scratchpad_mem_;
    }
    return Status::ok();
}

dnnl::memory Plan::bind(const MemRef& r) {
    if (r.buffer < 0) return r.fixed;
    const Buffer& b = buffers_[r.buffer];
    if (b.input_index >= 0 || b.output_index >= 0) {
        dnnl::memory m(r.md, engine_, DNNL_MEMORY_NONE);
        externals_.emplace_back(m, b.input_index >= 0 ? b.input_index : -(b.output_index + 1));
        return m;
    }
    return dnnl::memory(r.md, engine_, arena_.get() + b.offset);
}

Status Plan::run(const std::vector<Tensor>& inputs, std::vector<Tensor>& outputs,
                 const std::vector<Shape>& output_shapes) {
    outputs.resize(output_shapes.size());
    for (size_t j = 0; j < output_shapes.size(); ++j) {
        if (outputs[j].empty() || outputs[j].dtype() != DType::kFloat32 ||
            outputs[j].shape() != output_shapes[j])
            outputs[j] = Tensor(DType::kFloat32, output_shapes[j]);
    }
    for (auto& [m, index] : externals_) {
        if (index >= 0)
            m.set_data_handle(const_cast<void*>(inputs[index].raw()));
        else
            m.set_data_handle(outputs[-index - 1].raw());
    }
    using Clock = std::chrono::steady_clock;
    step_seconds_.assign(steps_.size(), 0.0);
    step_cpu_seconds_.assign(steps_.size(), 0.0);
    for (size_t i = 0; i < steps_.size(); ++i) {
        Step& s = steps_[i];
        const auto t0 = Clock::now();
        const double c0 = profile_ ? processCpuSeconds() : 0.0;
        try {
            if (s.prim) {
                s.prim->execute(compile_stream_, s.exec_args);
                if (profile_) compile_stream_.wait();
            } else {
                compile_stream_.wait();
                s.kernel(s.mems);
            }
        } catch (const dnnl::error& e) {
            return internalError("cpu backend: node '" + s.node + "' (" + s.what +
                                 ") failed: " + e.what());
        }
        if (profile_) {
            step_seconds_[i] += std::chrono::duration<double>(Clock::now() - t0).count();
            step_cpu_seconds_[i] += processCpuSeconds() - c0;
        }
    }
    compile_stream_.wait();
    if (profile_) {
        // This run's per-step times, by kind of step, then the slowest steps.
        std::map<std::string, std::pair<double, double>> by_kind;
        double total = 0;
        for (size_t i = 0; i < steps_.size(); ++i) {
            const std::string& w = steps_[i].what;
            auto& k = by_kind[w.substr(0, w.find(' '))];
            k.first += step_seconds_[i];
            k.second += step_cpu_seconds_[i];
            total += step_seconds_[i];
        }
        for (const auto& [kind, sec] : by_kind)
            log::info("cpu", "profile: {:<12} {:8.3f} s ({:4.1f}%), cpu {:8.3f} s", kind, sec.first,
                      100.0 * sec.first / total, sec.second);
        std::vector<size_t> order(steps_.size());
        for (size_t i = 0; i < order.size(); ++i) order[i] = i;
        std::sort(order.begin(), order.end(),
                  [&](size_t a, size_t b) { return step_seconds_[a] > step_seconds_[b]; });
        const size_t listed = profile_all_ ? order.size() : std::min<size_t>(12, order.size());
        for (size_t k = 0; k < listed; ++k)
            log::info("cpu", "profile: {:8.5f} s (cpu {:.5f} s) {} [{}]", step_seconds_[order[k]],
                      step_cpu_seconds_[order[k]], steps_[order[k]].node, steps_[order[k]].what);
    }
    return Status::ok();
}

}  // namespace voxseg::engine::cpu
