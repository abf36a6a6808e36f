#include "core/json_object.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace voxseg {

using nlohmann::json;

const char* JsonDocument::typeName(const json& value) {
    if (value.is_null()) return "null";
    if (value.is_boolean()) return "a boolean";
    if (value.is_number_integer()) return "an integer";
    if (value.is_number()) return "a number";
    if (value.is_string()) return "a string";
    if (value.is_array()) return "an array";
    return "an object";
}

std::string JsonDocument::shortDump(const json& value) {
    std::string s = value.dump(-1, ' ', false, json::error_handler_t::replace);
    if (s.size() > 60) s = s.substr(0, 57) + "...";
    return s;
}

std::string JsonDocument::join(const std::string& path, const std::string& key) {
    return path.empty() ? key : path + "." + key;
}

std::string JsonDocument::index(const std::string& path, size_t i) {
    return path + "[" + std::to_string(i) + "]";
}

Status JsonDocument::error(const std::string& path, const std::string& what) const {
    std::string message = document;
    if (!path.empty()) {
        if (quote)
            message += std::string("key ") + quote + path + quote + ": ";
        else
            message += path + ": ";
    }
    message += what;
    if (!help.empty()) message += " (" + help + ")";
    return invalidArgument(message, subject);
}

Status JsonDocument::typeError(const std::string& path, const std::string& expected,
                               const json& got) const {
    return error(path, "expected " + expected + ", got " + typeName(got) + " " + shortDump(got));
}

Result<std::string> JsonDocument::string(const json& value, const std::string& path) const {
    if (!value.is_string()) return typeError(path, "a string", value);
    return value.get<std::string>();
}

Result<double> JsonDocument::number(const json& value, const std::string& path, double min,
                                    double max) const {
    if (!value.is_number()) return typeError(path, "a number", value);
    const double n = value.get<double>();
    if (!std::isfinite(n)) return error(path, "must be finite");
    if (!(n >= min && n <= max))
        return error(path, fmt::format("{} is outside {}..{}", shortDump(value), min, max));
    return n;
}

Result<int64_t> JsonDocument::integer(const json& value, const std::string& path, int64_t min,
                                      int64_t max) const {
    if (!value.is_number_integer()) return typeError(path, "an integer", value);
    const bool too_large =
        value.is_number_unsigned() && value.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX);
    const int64_t n = too_large ? 0 : value.get<int64_t>();
    if (too_large || n < min || n > max)
        return error(path, fmt::format("{} is outside {}..{}", shortDump(value), min, max));
    return n;
}

Result<bool> JsonDocument::boolean(const json& value, const std::string& path) const {
    if (!value.is_boolean()) return typeError(path, "true or false", value);
    return value.get<bool>();
}

bool JsonDocument::freeKey(const std::string& key) const {
    return comment_keys && !key.empty() && key[0] == '_';
}

Status JsonDocument::onlyKeys(const json& object, const std::string& path,
                              const std::vector<std::string_view>& allowed) const {
    for (auto it = object.begin(); it != object.end(); ++it) {
        const std::string& key = it.key();
        if (freeKey(key) || std::find(allowed.begin(), allowed.end(), key) != allowed.end())
            continue;
        std::string list;
        for (std::string_view a : allowed) list += (list.empty() ? "" : ", ") + std::string(a);
        std::string what = "unknown key; allowed here: " + (list.empty() ? "none" : list);
        if (comment_keys) what += " (prefix a key with '_' for comments)";
        return error(join(path, key), what);
    }
    return Status::ok();
}

Result<JsonObject> JsonObject::wrap(const json& value, std::string path, std::string subject) {
    JsonDocument document;
    document.subject = std::move(subject);
    return wrap(value, std::move(path), std::move(document));
}

Result<JsonObject> JsonObject::wrap(const json& value, std::string path, JsonDocument document) {
    return wrap(value, std::move(path), std::make_shared<const JsonDocument>(std::move(document)));
}

Result<JsonObject> JsonObject::wrap(const json& value, std::string path,
                                    std::shared_ptr<const JsonDocument> document) {
    if (!value.is_object()) return document->typeError(path, "a JSON object", value);
    return JsonObject(&value, std::move(path), std::move(document));
}

bool JsonObject::has(const std::string& key) const { return value_->contains(key); }

std::string JsonObject::keyPath(const std::string& key) const {
    return JsonDocument::join(path_, key);
}

Status JsonObject::error(const std::string& key, const std::string& what) const {
    return document_->error(keyPath(key), what);
}

const json* JsonObject::find(const std::string& key) {
    read_.insert(key);
    auto it = value_->find(key);
    return it == value_->end() || it->is_null() ? nullptr : &*it;
}

const json* JsonObject::value(const std::string& key) { return find(key); }

Result<std::string> JsonObject::string(const std::string& key,
                                       std::optional<std::string> fallback) {
    const auto* v = find(key);
    if (!v) {
        if (fallback) return *fallback;
        return error(key, "missing (a string is required)");
    }
    return document_->string(*v, keyPath(key));
}

Result<double> JsonObject::number(const std::string& key, double min, double max,
                                  std::optional<double> fallback) {
    const auto* v = find(key);
    if (!v) {
        if (fallback) return *fallback;
        return error(key, "missing (a number is required)");
    }
    return document_->number(*v, keyPath(key), min, max);
}

Result<int64_t> JsonObject::integer(const std::string& key, int64_t min, int64_t max,
                                    std::optional<int64_t> fallback) {
    const auto* v = find(key);
    if (!v) {
        if (fallback) return *fallback;
        return error(key, "missing (an integer is required)");
    }
    return document_->integer(*v, keyPath(key), min, max);
}

Result<bool> JsonObject::boolean(const std::string& key, std::optional<bool> fallback) {
    const auto* v = find(key);
    if (!v) {
        if (fallback) return *fallback;
        return error(key, "missing (true or false is required)");
    }
    return document_->boolean(*v, keyPath(key));
}

Result<std::vector<std::string>> JsonObject::strings(const std::string& key) {
    const auto* v = find(key);
    std::vector<std::string> out;
    if (!v) return out;
    if (v->is_string()) return std::vector<std::string>{v->get<std::string>()};
    if (!v->is_array())
        return document_->typeError(keyPath(key), "a string or an array of strings", *v);
    for (size_t i = 0; i < v->size(); ++i) {
        VOXSEG_ASSIGN_OR_RETURN(std::string s,
                                document_->string((*v)[i], JsonDocument::index(keyPath(key), i)));
        out.push_back(std::move(s));
    }
    return out;
}

Result<JsonObject> JsonObject::object(const std::string& key, bool optional) {
    static const json kEmpty = json::object();
    const auto* v = find(key);
    if (!v) {
        if (optional) return JsonObject(&kEmpty, keyPath(key), document_);
        return error(key, "missing (an object is required)");
    }
    return wrap(*v, keyPath(key), document_);
}

Result<std::vector<JsonObject>> JsonObject::objects(const std::string& key, bool optional) {
    const auto* v = find(key);
    std::vector<JsonObject> out;
    if (!v) {
        if (optional) return out;
        return error(key, "missing (an array of objects is required)");
    }
    if (!v->is_array()) return document_->typeError(keyPath(key), "an array of objects", *v);
    for (size_t i = 0; i < v->size(); ++i) {
        VOXSEG_ASSIGN_OR_RETURN(JsonObject o,
                                wrap((*v)[i], JsonDocument::index(keyPath(key), i), document_));
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
        if (!read_.count(it.key()) && !document_->freeKey(it.key()))
            return error(it.key(), "unknown key");
    return Status::ok();
}

Status JsonObject::onlyKeys(const std::vector<std::string_view>& allowed) const {
    return document_->onlyKeys(*value_, path_, allowed);
}

}  // namespace voxseg
