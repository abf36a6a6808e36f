#include "node/json_object.h"

#include <fmt/format.h>

namespace voxseg::node {

Result<JsonObject> JsonObject::wrap(const nlohmann::json& value, std::string path,
                                    std::string file) {
    if (!value.is_object())
        return invalidArgument(
            (path.empty() ? std::string("the file") : path) + " must be a JSON object", file);
    return JsonObject(&value, std::move(path), std::move(file));
}

bool JsonObject::has(const std::string& key) const { return value_->contains(key); }

std::string JsonObject::keyPath(const std::string& key) const {
    return path_.empty() ? key : path_ + "." + key;
}

Status JsonObject::error(const std::string& key, const std::string& what) const {
    return invalidArgument(keyPath(key) + ": " + what, file_);
}

const nlohmann::json* JsonObject::find(const std::string& key) {
    read_.insert(key);
    auto it = value_->find(key);
    return it == value_->end() || it->is_null() ? nullptr : &*it;
}

Result<std::string> JsonObject::string(const std::string& key,
                                       std::optional<std::string> fallback) {
    const auto* v = find(key);
    if (!v) {
        if (fallback) return *fallback;
        return error(key, "missing (a string is required)");
    }
    if (!v->is_string()) return error(key, "must be a string, not " + v->dump());
    return v->get<std::string>();
}

Result<double> JsonObject::number(const std::string& key, double min, double max,
                                  std::optional<double> fallback) {
    const auto* v = find(key);
    if (!v) {
        if (fallback) return *fallback;
        return error(key, "missing (a number is required)");
    }
    if (!v->is_number()) return error(key, "must be a number, not " + v->dump());
    const double n = v->get<double>();
    if (!(n >= min && n <= max))
        return error(key, fmt::format("{} is outside {}..{}", v->dump(), min, max));
    return n;
}

Result<int64_t> JsonObject::integer(const std::string& key, int64_t min, int64_t max,
                                    std::optional<int64_t> fallback) {
    const auto* v = find(key);
    if (!v) {
        if (fallback) return *fallback;
        return error(key, "missing (an integer is required)");
    }
    if (!v->is_number_integer()) return error(key, "must be an integer, not " + v->dump());
    const int64_t n = v->get<int64_t>();
    if (n < min || n > max)
        return error(key, std::to_string(n) + " is outside " + std::to_string(min) + ".." +
                              std::to_string(max));
    return n;
}

Result<bool> JsonObject::boolean(const std::string& key, std::optional<bool> fallback) {
    const auto* v = find(key);
    if (!v) {
        if (fallback) return *fallback;
        return error(key, "missing (true or false is required)");
    }
    if (!v->is_boolean()) return error(key, "must be true or false, not " + v->dump());
    return v->get<bool>();
}

Result<std::vector<std::string>> JsonObject::strings(const std::string& key) {
    const auto* v = find(key);
    std::vector<std::string> out;
    if (!v) return out;
    if (v->is_string()) return std::vector<std::string>{v->get<std::string>()};
    if (!v->is_array()) return error(key, "must be a string or an array of strings");
    for (const auto& e : *v) {
        if (!e.is_string()) return error(key, "must hold strings only, not " + e.dump());
        out.push_back(e.get<std::string>());
    }
    return out;
}

Result<JsonObject> JsonObject::object(const std::string& key, bool optional) {
    static const nlohmann::json kEmpty = nlohmann::json::object();
    const auto* v = find(key);
    if (!v) {
        if (optional) return JsonObject(&kEmpty, keyPath(key), file_);
        return error(key, "missing (an object is required)");
    }
    return wrap(*v, keyPath(key), file_);
}

Result<std::vector<JsonObject>> JsonObject::objects(const std::string& key, bool optional) {
    const auto* v = find(key);
    std::vector<JsonObject> out;
    if (!v) {
        if (optional) return out;
        return error(key, "missing (an array of objects is required)");
    }
    if (!v->is_array()) return error(key, "must be an array of objects");
    for (size_t i = 0; i < v->size(); ++i) {
        VOXSEG_ASSIGN_OR_RETURN(JsonObject o,
                                wrap((*v)[i], keyPath(key) + "[" + std::to_string(i) + "]", file_));
        out.push_back(std::move(o));
    }
    return out;
}

std::vector<std::string> JsonObject::keys() const {
    std::vector<std::string> out;
    for (auto it = value_->begin(); it != value_->end(); ++it) out.push_back(it.key());
    return out;
}

Status JsonObject::finish() const {
    for (auto it = value_->begin(); it != value_->end(); ++it)
        if (!read_.count(it.key()))
            return error(it.key(), "unknown key (see docs/node.md for the keys of this object)");
    return Status::ok();
}

}  // namespace voxseg::node
