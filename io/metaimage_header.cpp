#include "io/metaimage_header.h"

#include "core/checked_math.h"
#include "io/gzip_reader.h"

#include <fmt/format.h>
#include <zlib.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <vector>

namespace voxseg::io {
namespace {
namespace fs = std::filesystem;

// The header ends at ElementDataFile; MetaImage headers are a few hundred bytes.
constexpr size_t kMaxHeaderBytes = 64 * 1024;
// MetaIO reads a key into a 255-byte field name (MET_MAX_NAME_SIZE) and copies string values
// (Comment, Name, ObjectType, AcquisitionDate...) into 255-byte members.
constexpr size_t kMaxKeyLength = 128;
constexpr size_t kMaxStringValue = 254;
constexpr size_t kMaxLineLength = 4096;
// voxseg reads volumes (a 4th axis of size 1 at most, checked after ITK reads the header);
// MetaIO keeps 10 entries per axis array and 4 SequenceID entries.
constexpr int64_t kMaxDims = 4;

// Bytes per element of the scalar ElementTypes (metaTypes.h: MET_ValueTypeSize).
const std::map<std::string, int64_t> kElementSizes = {
    {"MET_CHAR", 1},  {"MET_UCHAR", 1},  {"MET_SHORT", 2},     {"MET_USHORT", 2},
    {"MET_INT", 4},   {"MET_UINT", 4},   {"MET_LONG", 4},      {"MET_ULONG", 4},
    {"MET_FLOAT", 4}, {"MET_DOUBLE", 8}, {"MET_LONG_LONG", 8}, {"MET_ULONG_LONG", 8}};

// Fields MetaIO reads as NDims numbers, NDims x NDims numbers, one number or a boolean.
const std::set<std::string> kAxisArrays = {"ElementSpacing", "ElementSize", "Offset",
                                           "Position",       "Origin",      "CenterOfRotation",
                                           "SequenceID"};
const std::set<std::string> kMatrices = {"TransformMatrix", "Rotation", "Orientation"};
const std::set<std::string> kNumbers = {"ElementMin",
                                        "ElementMax",
                                        "ElementToIntensityFunctionSlope",
                                        "ElementToIntensityFunctionOffset",
                                        "ID",
                                        "ParentID"};
const std::set<std::string> kBooleans = {"CompressedData", "BinaryData", "ElementByteOrderMSB",
                                         "BinaryDataByteOrderMSB"};

struct Field {
    std::string value;
    int line = 0;
};

std::string trim(const std::string& s, const char* chars = " \t\r") {
    const size_t b = s.find_first_not_of(chars);
    if (b == std::string::npos) return {};
    return s.substr(b, s.find_last_not_of(" \t\r") + 1 - b);
}

std::vector<std::string> tokens(const std::string& s) {
    std::istringstream in(s);
    std::vector<std::string> out;
    for (std::string t; in >> t;) out.push_back(t);
    return out;
}

std::optional<int64_t> parseInt(const std::string& t) {
    int64_t v = 0;
    const char* end = t.data() + t.size();
    const auto r = std::from_chars(t.data() + (!t.empty() && t[0] == '+'), end, v);
    if (r.ec != std::errc() || r.ptr != end) return std::nullopt;
    return v;
}

std::optional<double> parseFinite(const std::string& t) {
    char* end = nullptr;
    const double v = std::strtod(t.c_str(), &end);
    if (t.empty() || end != t.c_str() + t.size() || !std::isfinite(v)) return std::nullopt;
    return v;
}

bool isBoolean(const std::string& v) {
    std::string l;
    for (char c : v) l += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return l == "true" || l == "false" || l == "1" || l == "0";
}

bool isTrue(const std::string& v) { return !v.empty() && (v[0] == 'T' || v[0] == 't' || v == "1"); }

class HeaderCheck {
  public:
    HeaderCheck(std::string path, bool inflate) : path_(std::move(path)), inflate_(inflate) {}
    Status run();
    bool compressed() const { return compressed_; }

  private:
    // Before the first field, a file that is not a MetaImage header at all (a PNG named .mha).
    Status fail(int line, const std::string& what) const {
        if (fields_.empty())
            return unsupported(fmt::format("not a MetaImage header: line {} {}", line, what),
                               path_);
        return corruptData(fmt::format("MetaImage header line {}: {}", line, what), path_);
    }
    Status readLines(const std::string& text);
    Status addField(int line, const std::string& text);
    Status checkValues() const;
    Status checkNumbers(const std::string& key, const Field& f, size_t count) const;
    Status checkDataSize() const;
    Status checkInflates(const fs::path& data, int64_t offset, int64_t size, int64_t need) const;
    Status checkNoPresetDictionary(const fs::path& data, int64_t start) const;
    const Field* get(const std::string& key) const {
        const auto it = fields_.find(key);
        return it == fields_.end() ? nullptr : &it->second;
    }

    std::string path_;
    bool inflate_;
    std::map<std::string, Field> fields_;
    int64_t ndims_ = 0;
    size_t data_offset_ = 0;
    mutable bool compressed_ = false;
};

Status HeaderCheck::run() {
    std::ifstream in(path_, std::ios::binary);
    if (!in) return ioError("cannot open", path_);
    std::string text(kMaxHeaderBytes, '\0');
    in.read(text.data(), static_cast<std::streamsize>(text.size()));
    text.resize(static_cast<size_t>(in.gcount()));
    VOXSEG_RETURN_IF_ERROR(readLines(text));
    VOXSEG_RETURN_IF_ERROR(checkValues());
    return checkDataSize();
}

// MetaIO's MET_Read: "Key = value" (or "Key: value") per line up to ElementDataFile, after
// which the data follows (LOCAL) or the header ends.
Status HeaderCheck::readLines(const std::string& text) {
    size_t pos = 0;
    for (int line = 1; pos < text.size(); ++line) {
        const size_t nl = std::min(text.find('\n', pos), text.size());
        const std::string raw = text.substr(pos, nl - pos);
        pos = nl + 1;
        if (raw.size() > kMaxLineLength)
            return fail(
                line, fmt::format("is {} characters long (limit {})", raw.size(), kMaxLineLength));
        if (trim(raw).empty()) continue;
        VOXSEG_RETURN_IF_ERROR(addField(line, trim(raw)));
        if (get("ElementDataFile")) {
            data_offset_ = std::min(pos, text.size());
            return Status::ok();
        }
    }
    if (text.size() == kMaxHeaderBytes)
        return corruptData(fmt::format("no ElementDataFile line in the first {} bytes: not a "
                                       "MetaImage header",
                                       kMaxHeaderBytes),
                           path_);
    return corruptData("the MetaImage header ends without an ElementDataFile line (truncated?)",
                       path_);
}

Status HeaderCheck::addField(int line, const std::string& text) {
    for (const char c : text)
        if ((static_cast<unsigned char>(c) < 0x20 && c != '\t') || c == 0x7f)
            return fail(line, "holds binary data (a control character)");
    const size_t sep = text.find_first_of("=:");
    if (sep == std::string::npos) return fail(line, "has no '=' (not a \"Key = value\" line)");
    const std::string key = trim(text.substr(0, sep));
    if (key.empty() || key.size() > kMaxKeyLength)
        return fail(line,
                    fmt::format("has a key of {} characters (1 to {})", key.size(), kMaxKeyLength));
    for (const char c : key)
        if (c <= 0x20 || c >= 0x7f) return fail(line, "has a key that is not one ASCII word");
    Field f{trim(text.substr(sep), "=: \t"), line};
    if (fields_.count(key)) return fail(line, "repeats " + key);
    const bool numeric = kAxisArrays.count(key) || kMatrices.count(key) || key == "DimSize";
    if (!numeric && f.value.size() > kMaxStringValue)
        return fail(line, fmt::format("{} has a value of {} characters (limit {})", key,
                                      f.value.size(), kMaxStringValue));
    if (f.value.empty()) return fail(line, key + " has no value");
    if ((numeric || key == "HeaderSizesPerSlice") && ndims_ == 0)
        return fail(line, key + " comes before NDims");
    if (key == "NDims") {
        const auto n = parseInt(f.value);
        if (!n || *n < 1 || *n > kMaxDims)
            return fail(line, fmt::format("NDims = {}: voxseg reads 1 to {} dimensions", f.value,
                                          kMaxDims));
        ndims_ = *n;
    }
    fields_.emplace(key, std::move(f));
    return Status::ok();
}

Status HeaderCheck::checkNumbers(const std::string& key, const Field& f, size_t count) const {
    const auto t = tokens(f.value);
    if (t.size() < count)
        return fail(f.line, fmt::format("{} holds {} numbers, {} expected", key, t.size(), count));
    for (size_t i = 0; i < count; ++i) {
        const auto v = parseFinite(t[i]);
        if (!v) return fail(f.line, fmt::format("{} has '{}', not a finite number", key, t[i]));
        if ((key == "ElementSpacing" || key == "ElementSize") && *v <= 0)
            return fail(f.line, fmt::format("{} has {}, not a positive spacing", key, *v));
    }
    return Status::ok();
}

Status HeaderCheck::checkValues() const {
    for (const char* required : {"NDims", "DimSize", "ElementType"})
        if (!get(required))
            return corruptData(std::string("MetaImage header has no ") + required, path_);
    for (const auto& [key, f] : fields_) {
        if (kAxisArrays.count(key)) VOXSEG_RETURN_IF_ERROR(checkNumbers(key, f, ndims_));
        if (kMatrices.count(key)) VOXSEG_RETURN_IF_ERROR(checkNumbers(key, f, ndims_ * ndims_));
        if (key == "Color") VOXSEG_RETURN_IF_ERROR(checkNumbers(key, f, 4));
        if (kNumbers.count(key)) VOXSEG_RETURN_IF_ERROR(checkNumbers(key, f, 1));
        if (kBooleans.count(key) && !isBoolean(f.value))
            return fail(f.line, key + " = " + f.value + ": True or False expected");
        if (key == "ObjectType" && f.value != "Image")
            return unsupported("MetaImage header describes a " + f.value + ", not an Image", path_);
        if (key == "HeaderSizesPerSlice")
            return unsupported("MetaImage headers with HeaderSizesPerSlice are not read", path_);
        if (key == "HeaderSize" || key == "CompressedDataSize" ||
            key == "ElementNumberOfChannels") {
            const auto v = parseInt(f.value);
            const int64_t min = key == "HeaderSize" ? -1 : key == "CompressedDataSize" ? 0 : 1;
            const int64_t max = key == "ElementNumberOfChannels" ? 65535 : int64_t{1} << 62;
            if (!v || *v < min || *v > max)
                return fail(f.line, fmt::format("{} = {}: an integer in {}..{} expected", key,
                                                f.value, min, max));
        }
    }
    const Field& type = *get("ElementType");
    if (!kElementSizes.count(type.value))
        return unsupported("MetaImage ElementType " + type.value +
                               " is not a scalar type voxseg reads (MET_UCHAR ... MET_DOUBLE)",
                           path_);
    const Field& dims = *get("DimSize");
    const auto t = tokens(dims.value);
    if (t.size() < static_cast<size_t>(ndims_))
        return fail(dims.line,
                    fmt::format("DimSize holds {} sizes for NDims = {}", t.size(), ndims_));
    for (int64_t d = 0; d < ndims_; ++d) {
        const auto v = parseInt(t[d]);
        if (!v || *v < 1 || *v > std::numeric_limits<int32_t>::max())
            return fail(dims.line, fmt::format("DimSize has '{}', not a size in 1..2^31-1", t[d]));
    }
    // ITK 5.2 reads a file whose NDims is not 3 into voxseg's 3-D image through
    // MetaImage::ReadROI, whose ASCII branch passes a byte count where M_ReadElementData takes
    // a voxel count: it writes element-size times past ITK's buffer (heap overflow in
    // uninstrumented code; found by fuzz_image_mha, docs/security.md).
    const Field* binary = get("BinaryData");
    if (binary && !isTrue(binary->value) && ndims_ != 3)
        return unsupported(fmt::format("MetaImage with ASCII voxel data (BinaryData = False, "
                                       "line {}) and NDims = {} is not read (ITK 5.2 overflows "
                                       "its buffer there); re-save it with binary data",
                                       binary->line, ndims_),
                           path_);
    return Status::ok();
}

Status HeaderCheck::checkDataSize() const {
    const Field& file = *get("ElementDataFile");
    std::vector<int64_t> dims;
    for (const std::string& t : tokens(get("DimSize")->value))
        if (static_cast<int64_t>(dims.size()) < ndims_) dims.push_back(*parseInt(t));
    const int64_t channels =
        get("ElementNumberOfChannels") ? *parseInt(get("ElementNumberOfChannels")->value) : 1;
    dims.push_back(channels);
    dims.push_back(kElementSizes.at(get("ElementType")->value));
    const auto bytes = checkedProduct(dims);
    std::string claim = get("DimSize")->value;
    if (!bytes || *bytes > (int64_t{1} << 62))
        return corruptData("MetaImage header claims " + claim + " voxels: beyond 2^62 bytes",
                           path_);

    std::error_code ec;
    int64_t available = 0;
    const std::string& name = file.value;
    fs::path data = path_;
    int64_t offset = static_cast<int64_t>(data_offset_);
    if (name == "LOCAL" || name == "Local" || name == "local") {
        available = static_cast<int64_t>(fs::file_size(path_, ec)) - offset;
    } else {
        offset = 0;
        if (name.rfind("LIST", 0) == 0 || name.find('%') != std::string::npos)
            return unsupported("MetaImage data split over several files (ElementDataFile = " +
                                   name + ") is not read: merge it into one .mha",
                               path_);
        const fs::path rel(name);
        bool escapes = rel.is_absolute();
        for (const auto& part : rel) escapes = escapes || part == "..";
        if (escapes)
            return corruptData("MetaImage ElementDataFile '" + name +
                                   "' lies outside the header's folder (absolute or '..')",
                               path_);
        data = fs::path(path_).parent_path() / rel;
        if (!fs::is_regular_file(data, ec))
            return notFound("MetaImage data file '" + name + "' (ElementDataFile) not found",
                            path_);
        available = static_cast<int64_t>(fs::file_size(data, ec));
    }
    if (ec) return ioError("cannot read the size of the MetaImage data: " + ec.message(), path_);
    const int64_t header_size = get("HeaderSize") ? *parseInt(get("HeaderSize")->value) : 0;
    const int64_t skip = std::max<int64_t>(0, header_size);
    const bool compressed = get("CompressedData") && isTrue(get("CompressedData")->value);
    const bool binary = !get("BinaryData") || isTrue(get("BinaryData")->value);
    // Compressed data: CompressedDataSize must lie in the file (its inflated size is MetaIO's
    // to check); ASCII data: one character per value at least.
    const int64_t need =
        compressed ? (get("CompressedDataSize") ? *parseInt(get("CompressedDataSize")->value) : 0)
        : binary   ? *bytes
                   : *bytes / dims.back();
    if (available - skip < need)
        return corruptData(fmt::format("file is truncated: the MetaImage header claims {} voxels "
                                       "({} bytes of data{}), the file holds {} after the header; "
                                       "re-export or re-copy it",
                                       claim, need, compressed ? ", compressed" : "",
                                       std::max<int64_t>(0, available - skip)),
                           path_);
    compressed_ = compressed;
    if (compressed) {
        // Before ITK allocates DimSize's bytes (issue 35): the compressed bytes must be able to
        // inflate to them.
        VOXSEG_RETURN_IF_ERROR(checkDeflateCanHold(path_, "the MetaImage's compressed data", *bytes,
                                                   need ? need : available - skip));
        // HeaderSize = -1: MetaIO reads the last CompressedDataSize bytes of the file.
        const int64_t start =
            header_size == -1 && need > 0 ? offset + available - need : offset + skip;
        VOXSEG_RETURN_IF_ERROR(checkNoPresetDictionary(data, start));
        if (inflate_) return checkInflates(data, start, need ? need : available - skip, *bytes);
    }
    return Status::ok();
}

// A zlib stream whose header asks for a preset dictionary (FDICT): zlib's inflate answers
// Z_NEED_DICT, which ITK 5.2's MET_PerformUncompression takes for progress and calls inflate
// again, forever (fuzz_image_mha: `voxseg convert` hung). Checked before ITK reads the file:
// the inflate check below runs beside ITK's read and could not stop it.
Status HeaderCheck::checkNoPresetDictionary(const fs::path& data, int64_t start) const {
    std::ifstream in(data, std::ios::binary);
    unsigned char head[2] = {0, 0};
    in.seekg(start);
    in.read(reinterpret_cast<char*>(head), 2);
    if (in.gcount() == 2 && (head[0] & 0x0f) == 8 && (head[0] * 256 + head[1]) % 31 == 0 &&
        (head[1] & 0x20))
        return corruptData(
            "the MetaImage's compressed data is a zlib stream that needs a preset "
            "dictionary, which no MetaImage writer makes; re-export it",
            path_);
    return Status::ok();
}

// ITK 5.2's MetaIO prints "Uncompress failed" and returns the image anyway (zero-filled) when
// the compressed data is damaged or short: the stream is inflated here, counting, through a
// 1 MiB buffer (gzip or zlib, as MetaIO's inflateInit2(47)).
Status HeaderCheck::checkInflates(const fs::path& data, int64_t offset, int64_t size,
                                  int64_t need) const {
    std::ifstream in(data, std::ios::binary);
    in.seekg(offset);
    z_stream z{};
    if (!in || inflateInit2(&z, 47) != Z_OK)
        return ioError("cannot read the MetaImage data", path_);
    std::vector<unsigned char> src(1 << 16), dst(1 << 20);
    int64_t out = 0, left = size;
    int rc = Z_OK;
    while (rc == Z_OK && out < need && left > 0) {
        in.read(reinterpret_cast<char*>(src.data()),
                static_cast<std::streamsize>(std::min<int64_t>(left, src.size())));
        const auto got = static_cast<uInt>(in.gcount());
        if (got == 0) break;
        left -= got;
        z.next_in = src.data();
        z.avail_in = got;
        do {
            z.next_out = dst.data();
            z.avail_out = static_cast<uInt>(dst.size());
            rc = inflate(&z, Z_NO_FLUSH);
            out += static_cast<int64_t>(dst.size() - z.avail_out);
        } while (rc == Z_OK && z.avail_in > 0 && out < need);
    }
    const std::string msg = z.msg ? z.msg : "error";
    inflateEnd(&z);
    if (rc != Z_OK && rc != Z_STREAM_END && rc != Z_BUF_ERROR)
        return corruptData("the MetaImage's compressed data is damaged (zlib: " + msg +
                               "); re-export or re-copy it",
                           path_);
    if (out < need)
        return corruptData(fmt::format("file is truncated: the MetaImage's compressed data "
                                       "inflates to {} of the {} bytes its header claims; "
                                       "re-export or re-copy it",
                                       out, need),
                           path_);
    return Status::ok();
}

}  // namespace

Status checkMetaImageHeader(const std::string& path) { return HeaderCheck(path, false).run(); }

Result<bool> checkMetaImageClaim(const std::string& path) {
    HeaderCheck check(path, false);
    VOXSEG_RETURN_IF_ERROR(check.run());
    return check.compressed();
}

Status checkMetaImageData(const std::string& path) { return HeaderCheck(path, true).run(); }

}  // namespace voxseg::io
