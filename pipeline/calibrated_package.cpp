// The calibrated package's staged copy (calibrated_package.h).
#include "pipeline/calibrated_package.h"

#include "core/atomic_file.h"
#include "core/file_io.h"
#include "engine/model/model_package.h"
#include "engine/model/model_signature.h"

#include <nlohmann/json.hpp>

#include <random>

namespace voxseg::pipeline {

namespace fs = std::filesystem;

namespace {

std::string randomSuffix() {
    std::random_device rd;
    static const char* hex = "0123456789abcdef";
    std::string s;
    for (int i = 0; i < 12; ++i) s += hex[rd() % 16];
    return s;
}

Status copyPackageFiles(const fs::path& from, const fs::path& to) {
    std::error_code ec;
    fs::create_directory(to, ec);
    if (ec) return ioError("cannot create " + to.string() + ": " + ec.message(), to.string());
    for (auto it = fs::recursive_directory_iterator(from, ec); !ec && it != fs::end(it);
         it.increment(ec)) {
        const fs::path rel = fs::relative(it->path(), from);
        if (it->is_symlink())
            return unsupported("model package file " + it->path().string() +
                                   " is a symbolic link: a package is copied as plain files",
                               from.string());
        if (rel == engine::kSignatureFile) continue;
        if (it->is_directory()) {
            fs::create_directory(to / rel, ec);
        } else if (it->is_regular_file()) {
            fs::copy_file(it->path(), to / rel, ec);
        }
        if (ec) break;
    }
    if (ec)
        return ioError("copying the model package " + from.string() + " to " + to.string() + ": " +
                           ec.message(),
                       to.string());
    return Status::ok();
}

}  // namespace

Result<CalibratedPackageDraft> CalibratedPackageDraft::create(const fs::path& input,
                                                              const fs::path& output) {
    std::error_code ec;
    if (!fs::is_regular_file(input / "model.json"))
        return notFound("no model package at " + input.string() + " (no model.json)",
                        input.string());
    if (fs::exists(output, ec))
        return Status(StatusCode::kFailedPrecondition,
                      "output " + output.string() +
                          " exists: calibrate writes a new package; give another -o or remove it",
                      output.string());
    const fs::path abs_out = fs::absolute(output).lexically_normal();
    if (abs_out == fs::absolute(input).lexically_normal())
        return invalidArgument("-o names the input package: calibrate never changes its input",
                               output.string());
    fs::path parent = abs_out.parent_path();
    if (!fs::is_directory(parent))
        return notFound("the output's folder " + parent.string() + " does not exist",
                        output.string());
    CalibratedPackageDraft d;
    d.output_ = abs_out;
    d.input_signed_ = fs::exists(input / engine::kSignatureFile);
    d.staged_ = parent / ("." + abs_out.filename().string() + ".calibrate-" + randomSuffix());
    const Status copied = copyPackageFiles(input, d.staged_);
    if (!copied.isOk()) {
        fs::remove_all(d.staged_, ec);
        return copied;
    }
    return d;
}

CalibratedPackageDraft::CalibratedPackageDraft(CalibratedPackageDraft&& o) noexcept
    : staged_(std::move(o.staged_)),
      output_(std::move(o.output_)),
      input_signed_(o.input_signed_),
      committed_(o.committed_) {
    o.staged_.clear();
}

CalibratedPackageDraft::~CalibratedPackageDraft() {
    if (committed_ || staged_.empty()) return;
    std::error_code ec;
    fs::remove_all(staged_, ec);
}

Status CalibratedPackageDraft::setQuantization(const engine::QuantizationRecord& record) {
    const fs::path file = staged_ / "model.json";
    VOXSEG_ASSIGN_OR_RETURN(const std::string text, readFileBytes(file.string(), "model.json"));
    nlohmann::ordered_json j;
    try {
        j = nlohmann::ordered_json::parse(text);
        j["quantization"] = nlohmann::ordered_json::parse(quantizationJson(record).dump());
    } catch (const std::exception& e) {
        return corruptData(std::string("model.json: ") + e.what(), file.string());
    }
    VOXSEG_RETURN_IF_ERROR(writeFileAtomically(file.string(), j.dump(2) + "\n"));
    VOXSEG_ASSIGN_OR_RETURN(const engine::ModelPackage back, engine::readModelPackage(staged_));
    if (!back.quantization)
        return internalError("the calibrated model.json lost its quantization record",
                             file.string());
    return engine::verifyModelFiles(back);
}

Result<std::string> CalibratedPackageDraft::commit(const std::optional<fs::path>& secret_key) {
    std::string note;
    if (secret_key) {
        VOXSEG_ASSIGN_OR_RETURN(const std::string id,
                                engine::signModelPackage(staged_, *secret_key));
        note = "signed by key " + id;
    } else if (input_signed_) {
        note =
            "not signed: the input's signature covered the old model.json; sign the new "
            "package with `voxseg model sign " +
            output_.string() + " --key KEY` (or calibrate with --key)";
    } else {
        note = "not signed (nor was the input)";
    }
    std::error_code ec;
    fs::rename(staged_, output_, ec);
    if (ec)
        return ioError("cannot move the calibrated package into place at " + output_.string() +
                           ": " + ec.message(),
                       output_.string());
    committed_ = true;
    return note;
}

}  // namespace voxseg::pipeline
