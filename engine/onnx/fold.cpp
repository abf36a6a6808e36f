// Attribute access, TensorProto decoding and constant folding for onnx_import (one folder per op,
// in the table folders()).
#include "engine/onnx/internal.h"

#include "core/checked_math.h"
#include "engine/graph/broadcast.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <optional>
#include <string>
#include <unordered_map>

namespace voxseg::engine::onnx_detail {

// ---------------------------------------------------------------------------------------------
// Attrs

const onnx::AttributeProto* Attrs::find(const std::string& name) {
    known_.insert(name);
    for (const auto& a : node_.attribute())
        if (a.name() == name) return &a;
    return nullptr;
}

bool Attrs::has(const std::string& name) const {
    for (const auto& a : node_.attribute())
        if (a.name() == name) return true;
    return false;
}

int64_t Attrs::getInt(const std::string& name, int64_t def) {
    const auto* a = find(name);
    return a ? a->i() : def;
}

float Attrs::getFloat(const std::string& name, float def) {
    const auto* a = find(name);
    return a ? a->f() : def;
}

std::string Attrs::getString(const std::string& name, const std::string& def) {
    const auto* a = find(name);
    return a ? a->s() : def;
}

std::vector<int64_t> Attrs::getInts(const std::string& name, const std::vector<int64_t>& def) {
    const auto* a = find(name);
    if (!a) return def;
    return {a->ints().begin(), a->ints().end()};
}

std::vector<float> Attrs::getFloats(const std::string& name) {
    const auto* a = find(name);
    if (!a) return {};
    return {a->floats().begin(), a->floats().end()};
}

const onnx::TensorProto* Attrs::getTensor(const std::string& name) {
    const auto* a = find(name);
    return a && a->has_t() ? &a->t() : nullptr;
}

void Attrs::ignore(std::initializer_list<const char*> names) {
    for (const char* n : names) known_.insert(n);
}

Status Attrs::checkAllKnown() const {
    for (const auto& a : node_.attribute())
        if (!known_.count(a.name()))
            return unsupported(desc_ + ": attribute '" + a.name() +
                               "' is not supported by voxseg (re-export without it)");
    return Status::ok();
}

// ---------------------------------------------------------------------------------------------
// TensorProto

namespace {

template <typename T>
std::vector<T> rawValues(const std::string& raw, int64_t n) {
    std::vector<T> v(static_cast<size_t>(n));
    if (n) std::memcpy(v.data(), raw.data(), static_cast<size_t>(n) * sizeof(T));  // little endian
    return v;
}

}  // namespace

Result<Tensor> tensorFromProto(const onnx::TensorProto& t, const std::string& what) {
    const std::string name = what + " '" + t.name() + "'";
    if (t.data_location() == onnx::TensorProto_DataLocation_EXTERNAL)
        return unsupported(name +
                           " keeps its data in an external file; voxseg reads self-contained "
                           "models: re-save with onnx.save_model(model, path, "
                           "save_as_external_data=False) (models under 2 GB)");
    Shape shape(t.dims().begin(), t.dims().end());
    for (int64_t d : shape)
        if (d < 0 || d > (int64_t{1} << 40))
            return corruptData(name + " has an impossible dimension " + shapeToString(shape));
    const std::optional<int64_t> count = checkedProduct(shape);
    const int64_t n = count.value_or(-1);
    if (n < 0 || n > (int64_t{1} << 33))
        return corruptData(name + " has an impossible shape " + shapeToString(shape));
    const bool has_raw = t.has_raw_data();
    auto rawSizeOk = [&](size_t elem) -> Status {
        if (t.raw_data().size() != static_cast<size_t>(n) * elem)
            return corruptData(name + ": " + std::to_string(t.raw_data().size()) +
                               " data bytes for shape " + shapeToString(shape) +
                               " (truncated or corrupt model)");
        return Status::ok();
    };
    auto countOk = [&](int64_t count) -> Status {
        if (count != n)
            return corruptData(name + ": " + std::to_string(count) + " values for shape " +
                               shapeToString(shape));
        return Status::ok();
    };
    switch (t.data_type()) {
        case onnx::TensorProto_DataType_FLOAT: {
            if (has_raw) {
                VOXSEG_RETURN_IF_ERROR(rawSizeOk(4));
                return Tensor::fromFloats(shape, rawValues<float>(t.raw_data(), n));
            }
            VOXSEG_RETURN_IF_ERROR(countOk(t.float_data_size()));
            return Tensor::fromFloats(shape, {t.float_data().begin(), t.float_data().end()});
        }
        case onnx::TensorProto_DataType_DOUBLE: {
            std::vector<double> d;
            if (has_raw) {
                VOXSEG_RETURN_IF_ERROR(rawSizeOk(8));
                d = rawValues<double>(t.raw_data(), n);
            } else {
                VOXSEG_RETURN_IF_ERROR(countOk(t.double_data_size()));
                d.assign(t.double_data().begin(), t.double_data().end());
            }
            return Tensor::fromFloats(shape, std::vector<float>(d.begin(), d.end()));
        }
        case onnx::TensorProto_DataType_FLOAT16:
        case onnx::TensorProto_DataType_BFLOAT16: {
            std::vector<uint16_t> h;
            if (has_raw) {
                VOXSEG_RETURN_IF_ERROR(rawSizeOk(2));
                h = rawValues<uint16_t>(t.raw_data(), n);
            } else {
                VOXSEG_RETURN_IF_ERROR(countOk(t.int32_data_size()));
                for (int32_t v : t.int32_data()) h.push_back(static_cast<uint16_t>(v));
            }
            std::vector<float> f(h.size());
            const bool half = t.data_type() == onnx::TensorProto_DataType_FLOAT16;
            for (size_t i = 0; i < h.size(); ++i)
                f[i] = half ? halfToFloat(h[i]) : bfloat16ToFloat(h[i]);
            return Tensor::fromFloats(shape, f);
        }
        case onnx::TensorProto_DataType_INT64: {
            if (has_raw) {
                VOXSEG_RETURN_IF_ERROR(rawSizeOk(8));
                return Tensor::fromInt64s(shape, rawValues<int64_t>(t.raw_data(), n));
            }
            VOXSEG_RETURN_IF_ERROR(countOk(t.int64_data_size()));
            return Tensor::fromInt64s(shape, {t.int64_data().begin(), t.int64_data().end()});
        }
        case onnx::TensorProto_DataType_INT32:
        case onnx::TensorProto_DataType_INT16:
        case onnx::TensorProto_DataType_INT8:
        case onnx::TensorProto_DataType_UINT8:
        case onnx::TensorProto_DataType_UINT16:
        case onnx::TensorProto_DataType_BOOL: {
            std::vector<int64_t> v;
            if (has_raw) {
                switch (t.data_type()) {
                    case onnx::TensorProto_DataType_INT32: {
                        VOXSEG_RETURN_IF_ERROR(rawSizeOk(4));
                        for (int32_t x : rawValues<int32_t>(t.raw_data(), n)) v.push_back(x);
                        break;
                    }
                    case onnx::TensorProto_DataType_INT16: {
                        VOXSEG_RETURN_IF_ERROR(rawSizeOk(2));
                        for (int16_t x : rawValues<int16_t>(t.raw_data(), n)) v.push_back(x);
                        break;
                    }
                    case onnx::TensorProto_DataType_UINT16: {
                        VOXSEG_RETURN_IF_ERROR(rawSizeOk(2));
                        for (uint16_t x : rawValues<uint16_t>(t.raw_data(), n)) v.push_back(x);
                        break;
                    }
                    case onnx::TensorProto_DataType_INT8: {
                        VOXSEG_RETURN_IF_ERROR(rawSizeOk(1));
                        for (int8_t x : rawValues<int8_t>(t.raw_data(), n)) v.push_back(x);
                        break;
                    }
                    default: {
                        VOXSEG_RETURN_IF_ERROR(rawSizeOk(1));
                        for (uint8_t x : rawValues<uint8_t>(t.raw_data(), n)) v.push_back(x);
                        break;
                    }
                }
            } else {
                VOXSEG_RETURN_IF_ERROR(countOk(t.int32_data_size()));
                v.assign(t.int32_data().begin(), t.int32_data().end());
            }
            if (t.data_type() == onnx::TensorProto_DataType_BOOL) {
                Tensor b(DType::kBool, shape);
                for (int64_t i = 0; i < n; ++i) b.data<uint8_t>()[i] = v[i] != 0;
                return b;
            }
            return Tensor::fromInt64s(shape, v);
        }
        default:
            return unsupported(name + " has ONNX data type " + std::to_string(t.data_type()) +
                               ", which voxseg does not read");
    }
}

// ---------------------------------------------------------------------------------------------
// Constant folding

namespace {

bool isFloat(const Tensor& t) { return t.dtype() == DType::kFloat32; }

// Copies elements (any dtype) into a new tensor of `shape`; out[i] = src[index(i)].
Tensor remap(const Tensor& src, const Shape& shape, const std::function<int64_t(int64_t)>& index) {
    Tensor out(src.dtype(), shape);
    const size_t es = dtypeSize(src.dtype());
    const auto* s = static_cast<const std::byte*>(src.raw());
    auto* d = static_cast<std::byte*>(out.raw());
    for (int64_t i = 0; i < out.numel(); ++i) std::memcpy(d + i * es, s + index(i) * es, es);
    return out;
}

// `src` broadcast to `shape` (Expand), any dtype.
Tensor broadcastTo(const Tensor& src, const Shape& shape) {
    Tensor out(src.dtype(), shape);
    const size_t es = dtypeSize(src.dtype());
    const auto* s = static_cast<const std::byte*>(src.raw());
    auto* d = static_cast<std::byte*>(out.raw());
    forEachBroadcast<1>(shape, {&src.shape()}, [&](int64_t i, const std::array<int64_t, 1>& o) {
        std::memcpy(d + i * es, s + o[0] * es, es);
    });
    return out;
}

std::vector<int64_t> stridesOf(const Shape& s) {
    std::vector<int64_t> st(s.size(), 1);
    for (size_t i = s.size(); i-- > 1;) st[i - 1] = st[i] * s[i];
    return st;
}

Status checkFoldShape(const Shape& shape, const std::string& desc) {
    int64_t n = 1;
    for (int64_t d : shape) {
        if (d < 0) return invalidArgument(desc + ": negative dimension in " + shapeToString(shape));
        if (d > 0 && n > kMaxFoldedElements / d)
            return unsupported(desc + ": constant of shape " + shapeToString(shape) +
                               " is too large to fold");
        n *= d;
    }
    return Status::ok();
}

Tensor scalarOrVector(DType type, const Shape& shape) { return Tensor(type, shape); }

// A value the file gave (or folding made from its values) that int64 cannot hold: refused,
// never computed (signed overflow is undefined behaviour).
Status overflowError(const std::string& desc, const std::string& what) {
    return corruptData(desc + " overflows int64 folding " + what + " (corrupt or hostile model)");
}

Status overflowError(const std::string& desc, int64_t a, const char* op, int64_t b) {
    return overflowError(desc, fmt::format("{} {} {}", a, op, b));
}

enum class Binary {
    kAdd,
    kSub,
    kMul,
    kDiv,
    kMod,
    kPow,
    kMin,
    kMax,
    kEqual,
    kLess,
    kGreater,
    kLessOrEqual,
    kGreaterOrEqual,
    kAnd,
    kOr
};

std::optional<Binary> binaryOp(const std::string& op) {
    static const std::pair<const char*, Binary> kOps[] = {
        {"Add", Binary::kAdd},
        {"Sub", Binary::kSub},
        {"Mul", Binary::kMul},
        {"Div", Binary::kDiv},
        {"Mod", Binary::kMod},
        {"Pow", Binary::kPow},
        {"Min", Binary::kMin},
        {"Max", Binary::kMax},
        {"Equal", Binary::kEqual},
        {"Less", Binary::kLess},
        {"Greater", Binary::kGreater},
        {"LessOrEqual", Binary::kLessOrEqual},
        {"GreaterOrEqual", Binary::kGreaterOrEqual},
        {"And", Binary::kAnd},
        {"Or", Binary::kOr}};
    for (const auto& [name, kind] : kOps)
        if (op == name) return kind;
    return std::nullopt;
}

bool isComparison(Binary k) { return k >= Binary::kEqual; }

// out[i] = f(a[..], b[..]) over the broadcast of a and b to `shape`.
template <class In, class Out, class F>
void combine(const Shape& shape, const Tensor& a, const In* av, const Tensor& b, const In* bv,
             Out* out, F&& f) {
    forEachBroadcast<2>(shape, {&a.shape(), &b.shape()},
                        [&](int64_t i, const std::array<int64_t, 2>& o) {
                            out[i] = static_cast<Out>(f(av[o[0]], bv[o[1]]));
                        });
}

// Integers, with every overflow and division by zero refused (the first one met, in order).
Result<Tensor> elementwiseInts(Binary kind, const Tensor& a, const Tensor& b, const Shape& shape,
                               const std::string& desc, int64_t fmod) {
    const bool compare = isComparison(kind);
    Tensor out = scalarOrVector(compare ? DType::kBool : DType::kInt64, shape);
    const auto av = a.toInt64s(), bv = b.toInt64s();
    Status error = Status::ok();
    auto checked = [&](std::optional<int64_t> r, int64_t x, const char* symbol, int64_t y) {
        if (r) return *r;
        if (error.isOk()) error = overflowError(desc, x, symbol, y);
        return int64_t{0};
    };
    auto nonzero = [&](int64_t y, const char* what) {
        if (y == 0 && error.isOk())
            error = invalidArgument(desc + ": integer " + what + " by zero");
        return y != 0;
    };
    auto run = [&](auto f) {
        if (compare)
            combine(shape, a, av.data(), b, bv.data(), out.data<uint8_t>(),
                    [&](int64_t x, int64_t y) { return f(x, y) != 0; });
        else
            combine(shape, a, av.data(), b, bv.data(), out.data<int64_t>(), f);
    };
    switch (kind) {
        case Binary::kAdd:
            run([&](int64_t x, int64_t y) { return checked(checkedAdd(x, y), x, "+", y); });
            break;
        case Binary::kSub:
            run([&](int64_t x, int64_t y) { return checked(checkedSub(x, y), x, "-", y); });
            break;
        case Binary::kMul:
            run([&](int64_t x, int64_t y) { return checked(checkedMul(x, y), x, "*", y); });
            break;
        case Binary::kDiv:
            run([&](int64_t x, int64_t y) {
                return nonzero(y, "division") ? checked(checkedDiv(x, y), x, "/", y) : 0;
            });
            break;
        case Binary::kMod:
            run([&](int64_t x, int64_t y) -> int64_t {
                if (!nonzero(y, "modulo")) return 0;
                int64_t r = checked(checkedMod(x, y), x, "%", y);
                // |remainder| < |y| with opposite signs: adding y cannot overflow
                if (fmod == 0 && r != 0 && (r < 0) != (y < 0)) r += y;
                return r;
            });
            break;
        case Binary::kMin:
            run([](int64_t x, int64_t y) { return std::min(x, y); });
            break;
        case Binary::kMax:
            run([](int64_t x, int64_t y) { return std::max(x, y); });
            break;
        case Binary::kEqual:
            run([](int64_t x, int64_t y) { return int64_t(x == y); });
            break;
        case Binary::kLess:
            run([](int64_t x, int64_t y) { return int64_t(x < y); });
            break;
        case Binary::kGreater:
            run([](int64_t x, int64_t y) { return int64_t(x > y); });
            break;
        case Binary::kLessOrEqual:
            run([](int64_t x, int64_t y) { return int64_t(x <= y); });
            break;
        case Binary::kGreaterOrEqual:
            run([](int64_t x, int64_t y) { return int64_t(x >= y); });
            break;
        case Binary::kAnd:
            run([](int64_t x, int64_t y) { return int64_t(x && y); });
            break;
        case Binary::kOr:
            run([](int64_t x, int64_t y) { return int64_t(x || y); });
            break;
        case Binary::kPow:
            return internalError("elementwise Pow of integers");
    }
    if (!error.isOk()) return error;
    return out;
}

// Floats, computed in double and stored as float (or bool for comparisons).
Tensor elementwiseFloats(Binary kind, const Tensor& a, const Tensor& b, const Shape& shape,
                         int64_t fmod) {
    const bool compare = isComparison(kind);
    Tensor out = scalarOrVector(compare ? DType::kBool : DType::kFloat32, shape);
    const auto av = a.toFloats(), bv = b.toFloats();
    auto run = [&](auto f) {
        if (compare)
            combine(shape, a, av.data(), b, bv.data(), out.data<uint8_t>(),
                    [&](double x, double y) { return f(x, y) != 0; });
        else
            combine(shape, a, av.data(), b, bv.data(), out.data<float>(), f);
    };
    switch (kind) {
        case Binary::kAdd:
            run([](double x, double y) { return x + y; });
            break;
        case Binary::kSub:
            run([](double x, double y) { return x - y; });
            break;
        case Binary::kMul:
            run([](double x, double y) { return x * y; });
            break;
        case Binary::kDiv:
            run([](double x, double y) { return x / y; });
            break;
        case Binary::kPow:
            run([](double x, double y) { return std::pow(x, y); });
            break;
        case Binary::kMin:
            run([](double x, double y) { return std::min(x, y); });
            break;
        case Binary::kMax:
            run([](double x, double y) { return std::max(x, y); });
            break;
        case Binary::kMod:
            run([fmod](double x, double y) {
                // ONNX asks fmod=1 of floats; fmod=0 gets the divisor's sign
                double r = std::fmod(x, y);
                if (fmod == 0 && r != 0 && (r < 0) != (y < 0)) r += y;
                return r;
            });
            break;
        case Binary::kEqual:
            run([](double x, double y) { return double(x == y); });
            break;
        case Binary::kLess:
            run([](double x, double y) { return double(x < y); });
            break;
        case Binary::kGreater:
            run([](double x, double y) { return double(x > y); });
            break;
        case Binary::kLessOrEqual:
            run([](double x, double y) { return double(x <= y); });
            break;
        case Binary::kGreaterOrEqual:
            run([](double x, double y) { return double(x >= y); });
            break;
        case Binary::kAnd:
            run([](double x, double y) { return double(x != 0 && y != 0); });
            break;
        case Binary::kOr:
            run([](double x, double y) { return double(x != 0 || y != 0); });
            break;
    }
    return out;
}

// `fmod` is Mod's attribute: 0 (the default) takes the divisor's sign, as Python's % does; 1
// the dividend's, as C's % and fmod do.
Result<Tensor> elementwise(const std::string& op, const Tensor& a, const Tensor& b,
                           const std::string& desc, int64_t fmod = 0) {
    VOXSEG_ASSIGN_OR_RETURN(Shape shape, broadcastShapes(a.shape(), b.shape()));
    VOXSEG_RETURN_IF_ERROR(checkFoldShape(shape, desc));
    const std::optional<Binary> kind = binaryOp(op);
    if (!kind) return internalError("elementwise " + op);
    if (!isFloat(a) && !isFloat(b)) return elementwiseInts(*kind, a, b, shape, desc, fmod);
    return elementwiseFloats(*kind, a, b, shape, fmod);
}

int64_t normAxis(int64_t axis, size_t rank) {
    return axis < 0 ? axis + static_cast<int64_t>(rank) : axis;
}

Result<Tensor> castTo(const Tensor& t, int64_t to, const std::string& desc) {
    switch (to) {
        case onnx::TensorProto_DataType_FLOAT:
        case onnx::TensorProto_DataType_DOUBLE:
        case onnx::TensorProto_DataType_FLOAT16:
        case onnx::TensorProto_DataType_BFLOAT16:
            return Tensor::fromFloats(t.shape(), t.toFloats());
        case onnx::TensorProto_DataType_INT64:
        case onnx::TensorProto_DataType_INT32:
        case onnx::TensorProto_DataType_INT16:
        case onnx::TensorProto_DataType_INT8:
        case onnx::TensorProto_DataType_UINT8: {
            if (!isFloat(t)) return Tensor::fromInt64s(t.shape(), t.toInt64s());
            std::vector<int64_t> v;
            for (float f : t.toFloats()) {
                // 2^63 is exact in float; NaN fails both comparisons.
                if (!(std::trunc(f) >= -0x1p63f && std::trunc(f) < 0x1p63f))
                    return overflowError(desc, fmt::format("Cast of {} to an integer", f));
                v.push_back(static_cast<int64_t>(std::trunc(f)));
            }
            return Tensor::fromInt64s(t.shape(), v);
        }
        case onnx::TensorProto_DataType_BOOL: {
            Tensor b(DType::kBool, t.shape());
            const auto f = t.toFloats();
            for (size_t i = 0; i < f.size(); ++i) b.data<uint8_t>()[i] = f[i] != 0;
            return b;
        }
        default:
            return unsupported(desc + ": Cast to ONNX type " + std::to_string(to));
    }
}

using FoldResult = Result<std::optional<std::vector<Tensor>>>;

FoldResult notFolded() { return std::optional<std::vector<Tensor>>(); }

// One node being folded: its op, attributes and constant inputs (nullptr for absent optional
// ones), and done(), which checks that every attribute was read and wraps the result.
struct FoldContext {
    const std::string& op;
    Attrs& attrs;
    const std::vector<const Tensor*>& in;
    int opset;
    const std::string& desc;

    const Tensor* input(size_t i) const { return i < in.size() ? in[i] : nullptr; }
    Status need(size_t n) const {
        for (size_t i = 0; i < n; ++i)
            if (!input(i)) return corruptData(desc + ": input " + std::to_string(i) + " missing");
        return Status::ok();
    }
    FoldResult done(Tensor t) {
        VOXSEG_RETURN_IF_ERROR(attrs.checkAllKnown());
        return std::optional<std::vector<Tensor>>(std::vector<Tensor>{std::move(t)});
    }
};

// ---- one folder per op (or op family), in the order of the table below ----

FoldResult foldIdentity(FoldContext& c) {
    VOXSEG_RETURN_IF_ERROR(c.need(1));
    return c.done(*c.in[0]);
}

FoldResult foldGather(FoldContext& c) {
    VOXSEG_RETURN_IF_ERROR(c.need(2));
    const Tensor& data = *c.in[0];
    const std::vector<int64_t> idx = c.in[1]->toInt64s();
    const int64_t axis = normAxis(c.attrs.getInt("axis", 0), data.rank());
    if (axis < 0 || axis >= static_cast<int64_t>(data.rank()))
        return invalidArgument(c.desc + ": axis out of range");
    Shape shape(data.shape().begin(), data.shape().begin() + axis);
    for (int64_t d : c.in[1]->shape()) shape.push_back(d);
    for (size_t i = axis + 1; i < data.rank(); ++i) shape.push_back(data.dim(i));
    VOXSEG_RETURN_IF_ERROR(checkFoldShape(shape, c.desc));
    const int64_t dim = data.dim(axis);
    int64_t inner = 1;
    for (size_t i = axis + 1; i < data.rank(); ++i) inner *= data.dim(i);
    const int64_t nidx = static_cast<int64_t>(idx.size());
    for (int64_t v : idx)
        if (v < -dim || v >= dim) return invalidArgument(c.desc + ": index out of range");
    return c.done(remap(data, shape, [&](int64_t i) {
        const int64_t inner_i = i % inner;
        const int64_t k = (i / inner) % nidx;
        const int64_t outer = i / inner / nidx;
        const int64_t j = idx[k] < 0 ? idx[k] + dim : idx[k];
        return (outer * dim + j) * inner + inner_i;
    }));
}

FoldResult foldSqueeze(FoldContext& c) {
    VOXSEG_RETURN_IF_ERROR(c.need(1));
    std::vector<int64_t> axes = c.opset >= 13
                                    ? (c.input(1) ? c.input(1)->toInt64s() : std::vector<int64_t>{})
                                    : c.attrs.getInts("axes");
    const Shape& s = c.in[0]->shape();
    Shape shape;
    if (c.op == "Unsqueeze") {
        const size_t rank = s.size() + axes.size();
        for (int64_t& a : axes) a = normAxis(a, rank);
        size_t j = 0;
        for (size_t i = 0; i < rank; ++i) {
            if (std::find(axes.begin(), axes.end(), static_cast<int64_t>(i)) != axes.end())
                shape.push_back(1);
            else if (j < s.size())
                shape.push_back(s[j++]);
        }
    } else {
        for (int64_t& a : axes) a = normAxis(a, s.size());
        for (size_t i = 0; i < s.size(); ++i) {
            const bool listed =
                std::find(axes.begin(), axes.end(), static_cast<int64_t>(i)) != axes.end();
            if ((axes.empty() && s[i] == 1) || (listed && s[i] == 1)) continue;
            shape.push_back(s[i]);
        }
    }
    if (numel(shape) != c.in[0]->numel()) return invalidArgument(c.desc + ": bad axes");
    return c.done(c.in[0]->clone().reshaped(shape));
}

FoldResult foldConcat(FoldContext& c) {
    if (c.in.empty()) return corruptData(c.desc + ": no inputs");
    VOXSEG_RETURN_IF_ERROR(c.need(c.in.size()));
    const size_t rank = c.in[0]->rank();
    const int64_t axis = normAxis(c.attrs.getInt("axis", 0), rank);
    Shape shape = c.in[0]->shape();
    if (axis < 0 || axis >= static_cast<int64_t>(rank))
        return invalidArgument(c.desc + ": axis out of range");
    const bool any_float =
        std::any_of(c.in.begin(), c.in.end(), [](const Tensor* t) { return isFloat(*t); });
    shape[axis] = 0;
    for (const Tensor* t : c.in) {
        if (t->rank() != rank) return invalidArgument(c.desc + ": ranks differ");
        shape[axis] += t->dim(axis);
    }
    Tensor out(any_float ? DType::kFloat32 : c.in[0]->dtype(), shape);
    int64_t outer = 1, inner = 1;
    for (int64_t i = 0; i < axis; ++i) outer *= shape[i];
    for (size_t i = axis + 1; i < rank; ++i) inner *= shape[i];
    int64_t offset = 0;
    for (const Tensor* t : c.in) {
        Tensor src = any_float ? Tensor::fromFloats(t->shape(), t->toFloats()) : *t;
        const size_t es = dtypeSize(out.dtype());
        const int64_t len = t->dim(axis) * inner;
        for (int64_t o = 0; o < outer; ++o)
            std::memcpy(
                static_cast<std::byte*>(out.raw()) + (o * shape[axis] * inner + offset) * es,
                static_cast<const std::byte*>(src.raw()) + o * len * es, len * es);
        offset += len;
    }
    return c.done(out);
}

FoldResult foldCast(FoldContext& c) {
    VOXSEG_RETURN_IF_ERROR(c.need(1));
    c.attrs.ignore({"saturate"});
    VOXSEG_ASSIGN_OR_RETURN(Tensor t, castTo(*c.in[0], c.attrs.getInt("to", 1), c.desc));
    return c.done(t);
}

FoldResult foldConstantOfShape(FoldContext& c) {
    VOXSEG_RETURN_IF_ERROR(c.need(1));
    Tensor value = Tensor::fromFloats({1}, {0.0f});
    if (const auto* t = c.attrs.getTensor("value")) {
        VOXSEG_ASSIGN_OR_RETURN(value, tensorFromProto(*t, c.desc + " value"));
    }
    const Shape shape = c.in[0]->toInt64s();
    VOXSEG_RETURN_IF_ERROR(checkFoldShape(shape, c.desc));
    return c.done(remap(value.reshaped({1}), shape, [](int64_t) { return int64_t{0}; }));
}

FoldResult foldSize(FoldContext& c) {
    VOXSEG_RETURN_IF_ERROR(c.need(1));
    return c.done(Tensor::fromInt64s({}, {c.in[0]->numel()}));
}

FoldResult foldSlice(FoldContext& c) {
    VOXSEG_RETURN_IF_ERROR(c.need(1));
    Node n;
    if (c.opset >= 10) {
        VOXSEG_RETURN_IF_ERROR(c.need(3));
        n.slice_starts = c.in[1]->toInt64s();
        n.slice_ends = c.in[2]->toInt64s();
        if (c.input(3)) n.slice_axes = c.input(3)->toInt64s();
        if (c.input(4)) n.slice_steps = c.input(4)->toInt64s();
    } else {
        n.slice_starts = c.attrs.getInts("starts");
        n.slice_ends = c.attrs.getInts("ends");
        n.slice_axes = c.attrs.getInts("axes");
    }
    for (int64_t s : n.slice_steps)
        if (s == 0) return invalidArgument(c.desc + ": step 0");
    const auto axes = resolveSlice(n, c.in[0]->shape());
    Shape shape;
    for (const auto& a : axes) shape.push_back(a.count);
    const auto st = stridesOf(c.in[0]->shape());
    return c.done(remap(*c.in[0], shape, [&](int64_t i) {
        int64_t off = 0;
        for (size_t a = shape.size(); a-- > 0;) {
            off += (axes[a].start + (i % shape[a]) * axes[a].step) * st[a];
            i /= shape[a];
        }
        return off;
    }));
}

FoldResult foldReshape(FoldContext& c) {
    VOXSEG_RETURN_IF_ERROR(c.need(2));
    const bool allowzero = c.attrs.getInt("allowzero", 0) != 0;
    std::vector<int64_t> target = c.in[1]->toInt64s();
    const Shape& s = c.in[0]->shape();
    int64_t known = 1, infer = -1;
    for (size_t i = 0; i < target.size(); ++i) {
        if (target[i] == 0 && !allowzero) target[i] = i < s.size() ? s[i] : 0;
        if (target[i] == -1 && infer < 0) {
            infer = static_cast<int64_t>(i);
            continue;
        }
        if (target[i] < 0)
            return invalidArgument(c.desc + ": cannot reshape " + shapeToString(s) + " to " +
                                   shapeToString(target));
        const auto product = checkedMul(known, target[i]);
        if (!product) return overflowError(c.desc, known, "*", target[i]);
        known = *product;
    }
    if (infer >= 0) target[infer] = known ? c.in[0]->numel() / known : 0;
    if (checkedProduct(target) != c.in[0]->numel())
        return invalidArgument(c.desc + ": cannot reshape " + shapeToString(s) + " to " +
                               shapeToString(target));
    return c.done(c.in[0]->clone().reshaped(target));
}

FoldResult foldRange(FoldContext& c) {
    VOXSEG_RETURN_IF_ERROR(c.need(3));
    for (size_t k = 0; k < 3; ++k)
        if (c.in[k]->numel() != 1) return invalidArgument(c.desc + ": inputs must be scalars");
    if (isFloat(*c.in[0]) || isFloat(*c.in[1]) || isFloat(*c.in[2])) {
        const float s = c.in[0]->toFloats()[0], l = c.in[1]->toFloats()[0],
                    d = c.in[2]->toFloats()[0];
        if (d == 0) return invalidArgument(c.desc + ": delta 0");
        const double count = std::ceil((double(l) - s) / d);
        if (!(count < double(kMaxFoldedElements)))
            return unsupported(c.desc + ": range too long to fold");
        const int64_t n = count > 0 ? static_cast<int64_t>(count) : 0;
        std::vector<float> v;
        for (int64_t i = 0; i < n; ++i) v.push_back(s + d * static_cast<float>(i));
        return c.done(Tensor::fromFloats({n}, v));
    }
    const int64_t s = c.in[0]->toInt64s()[0], l = c.in[1]->toInt64s()[0],
                  d = c.in[2]->toInt64s()[0];
    if (d == 0) return invalidArgument(c.desc + ": delta 0");
    // max(ceil((limit - start) / delta), 0) elements, counted in 128 bits: the three are
    // the file's, their difference may not fit int64.
    const __int128 span = __int128(l) - s;
    const __int128 count = span / d + (span % d != 0 && (span < 0) == (d < 0));
    if (count > kMaxFoldedElements) return unsupported(c.desc + ": range too long to fold");
    const int64_t n = count > 0 ? static_cast<int64_t>(count) : 0;
    std::vector<int64_t> v(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) v[i] = static_cast<int64_t>(s + __int128(i) * d);
    return c.done(Tensor::fromInt64s({n}, v));
}

FoldResult foldExpand(FoldContext& c) {
    VOXSEG_RETURN_IF_ERROR(c.need(2));
    VOXSEG_ASSIGN_OR_RETURN(Shape shape, broadcastShapes(c.in[0]->shape(), c.in[1]->toInt64s()));
    VOXSEG_RETURN_IF_ERROR(checkFoldShape(shape, c.desc));
    return c.done(broadcastTo(*c.in[0], shape));
}

FoldResult foldTranspose(FoldContext& c) {
    VOXSEG_RETURN_IF_ERROR(c.need(1));
    const size_t rank = c.in[0]->rank();
    std::vector<int64_t> perm = c.attrs.getInts("perm");
    if (perm.empty())
        for (size_t i = 0; i < rank; ++i) perm.push_back(static_cast<int64_t>(rank - 1 - i));
    if (perm.size() != rank) return invalidArgument(c.desc + ": perm does not match rank");
    for (size_t i = 0; i < rank; ++i)
        if (std::count(perm.begin(), perm.end(), static_cast<int64_t>(i)) != 1)
            return invalidArgument(c.desc + ": perm is not a permutation of the axes");
    Shape shape;
    for (int64_t p : perm) shape.push_back(c.in[0]->dim(p));
    const auto st = stridesOf(c.in[0]->shape());
    return c.done(remap(*c.in[0], shape, [&](int64_t i) {
        int64_t off = 0;
        for (size_t a = rank; a-- > 0;) {
            off += (i % shape[a]) * st[perm[a]];
            i /= shape[a];
        }
        return off;
    }));
}

// ScatterND on constants (reduction "none"): out = data, out[indices[j]] = updates[j].
// MONAI SwinUNETR builds its shifted-window attention mask this way (img_mask[:, d, h, w, :]
// = cnt on a zeros tensor whose shape comes from the input's static shape).
FoldResult foldScatterND(FoldContext& c) {
    VOXSEG_RETURN_IF_ERROR(c.need(3));
    if (const std::string r = c.attrs.getString("reduction", "none"); r != "none")
        return unsupported(c.desc + ": ScatterND reduction '" + r + "' is not folded");
    const Tensor& data = *c.in[0];
    const Shape& ds = data.shape();
    const Shape& is = c.in[1]->shape();
    if (is.empty() || c.in[2]->dtype() != data.dtype())
        return invalidArgument(c.desc + ": ScatterND indices/updates do not match the data");
    const size_t k = static_cast<size_t>(is.back());
    if (k < 1 || k > ds.size()) return invalidArgument(c.desc + ": ScatterND index depth");
    int64_t chunk = 1;
    for (size_t a = k; a < ds.size(); ++a) chunk *= ds[a];
    const auto idx = c.in[1]->toInt64s();
    const int64_t tuples = k ? static_cast<int64_t>(idx.size() / k) : 0;
    if (checkedMul(tuples, chunk) != c.in[2]->numel())
        return invalidArgument(c.desc + ": ScatterND updates have the wrong size");
    Tensor out = remap(data, ds, [](int64_t i) { return i; });
    const auto st = stridesOf(ds);
    const size_t es = dtypeSize(data.dtype());
    const auto* u = static_cast<const std::byte*>(c.in[2]->raw());
    auto* d = static_cast<std::byte*>(out.raw());
    for (int64_t j = 0; j < tuples; ++j) {
        int64_t off = 0;
        for (size_t a = 0; a < k; ++a) {
            int64_t at = idx[static_cast<size_t>(j) * k + a];
            if (at < 0) at += ds[a];
            if (at < 0 || at >= ds[a])
                return invalidArgument(c.desc + ": ScatterND index out of range");
            off += at * st[a];
        }
        std::memcpy(d + off * es, u + j * chunk * es, static_cast<size_t>(chunk) * es);
    }
    return c.done(out);
}

FoldResult foldWhere(FoldContext& c) {
    VOXSEG_RETURN_IF_ERROR(c.need(3));
    VOXSEG_ASSIGN_OR_RETURN(Shape s1, broadcastShapes(c.in[0]->shape(), c.in[1]->shape()));
    VOXSEG_ASSIGN_OR_RETURN(Shape shape, broadcastShapes(s1, c.in[2]->shape()));
    VOXSEG_RETURN_IF_ERROR(checkFoldShape(shape, c.desc));
    const bool f = isFloat(*c.in[1]) || isFloat(*c.in[2]);
    const auto cond = c.in[0]->toInt64s();
    auto select = [&](const auto& a, const auto& b) {
        using T = typename std::decay_t<decltype(a)>::value_type;
        std::vector<T> v(static_cast<size_t>(numel(shape)));
        forEachBroadcast<3>(shape, {&c.in[0]->shape(), &c.in[1]->shape(), &c.in[2]->shape()},
                            [&](int64_t i, const std::array<int64_t, 3>& o) {
                                v[i] = cond[o[0]] ? a[o[1]] : b[o[2]];
                            });
        return v;
    };
    if (f)
        return c.done(Tensor::fromFloats(shape, select(c.in[1]->toFloats(), c.in[2]->toFloats())));
    return c.done(Tensor::fromInt64s(shape, select(c.in[1]->toInt64s(), c.in[2]->toInt64s())));
}

FoldResult foldUnary(FoldContext& c) {
    VOXSEG_RETURN_IF_ERROR(c.need(1));
    if (c.op == "Not") {
        Tensor b(DType::kBool, c.in[0]->shape());
        const auto v = c.in[0]->toInt64s();
        for (size_t i = 0; i < v.size(); ++i) b.data<uint8_t>()[i] = v[i] == 0;
        return c.done(b);
    }
    if (!isFloat(*c.in[0]) && (c.op == "Neg" || c.op == "Abs")) {
        auto v = c.in[0]->toInt64s();
        for (auto& x : v) {
            const auto r = checkedNeg(x);  // -x and |x| overflow for INT64_MIN alone
            if (!r) return overflowError(c.desc, fmt::format("{}({})", c.op, x));
            x = c.op == "Neg" || x < 0 ? *r : x;
        }
        return c.done(Tensor::fromInt64s(c.in[0]->shape(), v));
    }
    auto v = c.in[0]->toFloats();
    for (float& x : v) {
        if (c.op == "Floor")
            x = std::floor(x);
        else if (c.op == "Ceil")
            x = std::ceil(x);
        else if (c.op == "Neg")
            x = -x;
        else if (c.op == "Abs")
            x = std::abs(x);
        else if (c.op == "Sqrt")
            x = std::sqrt(x);
        else if (c.op == "Round")
            x = std::nearbyint(x);
        else if (c.op == "Reciprocal")
            x = 1.0f / x;
        else if (c.op == "Exp")
            x = std::exp(x);
        else
            x = std::log(x);
    }
    return c.done(Tensor::fromFloats(c.in[0]->shape(), v));
}

FoldResult foldReduce(FoldContext& c) {
    // Only the full reduction of a 1-D shape vector appears in shape code.
    VOXSEG_RETURN_IF_ERROR(c.need(1));
    c.attrs.ignore({"keepdims", "axes", "noop_with_empty_axes"});
    if (c.in[0]->rank() != 1 || isFloat(*c.in[0])) return notFolded();
    const auto v = c.in[0]->toInt64s();
    int64_t r = c.op == "ReduceProd" ? 1 : c.op == "ReduceSum" ? 0 : (v.empty() ? 0 : v[0]);
    for (int64_t x : v) {
        if (c.op == "ReduceProd" || c.op == "ReduceSum") {
            const bool prod = c.op == "ReduceProd";
            const auto next = prod ? checkedMul(r, x) : checkedAdd(r, x);
            if (!next) return overflowError(c.desc, r, prod ? "*" : "+", x);
            r = *next;
        } else if (c.op == "ReduceMax")
            r = std::max(r, x);
        else
            r = std::min(r, x);
    }
    const bool keep = c.attrs.getInt("keepdims", 1) != 0;
    return c.done(Tensor::fromInt64s(keep ? Shape{1} : Shape{}, {r}));
}

// Equal, Less, Greater, LessOrEqual, GreaterOrEqual, And, Or, Mod, Pow on constants, chained over
// further inputs.
FoldResult foldBinary(FoldContext& c) {
    VOXSEG_RETURN_IF_ERROR(c.need(2));
    const int64_t fmod = c.op == "Mod" ? c.attrs.getInt("fmod", 0) : 0;
    Tensor acc = *c.in[0];
    for (size_t i = 1; i < c.in.size(); ++i) {
        VOXSEG_ASSIGN_OR_RETURN(acc, elementwise(c.op, acc, *c.in[i], c.desc, fmod));
    }
    return c.done(acc);
}

// Add/Sub/Mul/Div/Min/Max on integers fold here; on floats they go through the reference
// backend like every other computing op (the importer's fallback), except when mixed.
FoldResult foldIntegerArithmetic(FoldContext& c) {
    if (c.in.size() < 2 || !c.in[0] || !c.in[1] || (isFloat(*c.in[0]) && isFloat(*c.in[1])))
        return notFolded();
    return foldBinary(c);
}

using Folder = FoldResult (*)(FoldContext&);

// The ops that appear in shape computations. Shape itself is evaluated by the importer.
const std::unordered_map<std::string, Folder>& folders() {
    static const std::unordered_map<std::string, Folder> table = {
        {"Identity", foldIdentity},
        {"Gather", foldGather},
        {"Unsqueeze", foldSqueeze},
        {"Squeeze", foldSqueeze},
        {"Concat", foldConcat},
        {"Cast", foldCast},
        {"ConstantOfShape", foldConstantOfShape},
        {"Size", foldSize},
        {"Slice", foldSlice},
        {"Reshape", foldReshape},
        {"Range", foldRange},
        {"Expand", foldExpand},
        {"Transpose", foldTranspose},
        {"ScatterND", foldScatterND},
        {"Where", foldWhere},
        {"Equal", foldBinary},
        {"Less", foldBinary},
        {"Greater", foldBinary},
        {"LessOrEqual", foldBinary},
        {"GreaterOrEqual", foldBinary},
        {"And", foldBinary},
        {"Or", foldBinary},
        {"Mod", foldBinary},
        {"Pow", foldBinary},
        {"Add", foldIntegerArithmetic},
        {"Sub", foldIntegerArithmetic},
        {"Mul", foldIntegerArithmetic},
        {"Div", foldIntegerArithmetic},
        {"Min", foldIntegerArithmetic},
        {"Max", foldIntegerArithmetic},
        {"Not", foldUnary},
        {"Floor", foldUnary},
        {"Ceil", foldUnary},
        {"Neg", foldUnary},
        {"Abs", foldUnary},
        {"Sqrt", foldUnary},
        {"Round", foldUnary},
        {"Reciprocal", foldUnary},
        {"Exp", foldUnary},
        {"Log", foldUnary},
        {"ReduceProd", foldReduce},
        {"ReduceSum", foldReduce},
        {"ReduceMax", foldReduce},
        {"ReduceMin", foldReduce},
    };
    return table;
}

}  // namespace

Result<std::optional<std::vector<Tensor>>> foldConstantNode(const onnx::NodeProto& node,
                                                            const std::vector<const Tensor*>& in,
                                                            int opset, const std::string& desc) {
    const auto it = folders().find(node.op_type());
    if (it == folders().end()) return notFolded();
    Attrs attrs(node, desc);
    FoldContext c{node.op_type(), attrs, in, opset, desc};
    return it->second(c);
}

}  // namespace voxseg::engine::onnx_detail
