// `voxseg model keygen|sign|verify`: Ed25519 signatures of model packages
// (engine/model/model_signature.h, docs/security.md). segment, batch and serve check them with
// --trusted-keys and --require-signed. `voxseg model calibrate`: cmd_model_calibrate.cpp.
#include "app/commands.h"
#include "core/log.h"
#include "engine/model/model_signature.h"

#include <fmt/format.h>

#include <cstdio>

namespace voxseg::app {

CLI::App* addModelCommand(CLI::App& app, ModelCommandOptions& o) {
    CLI::App* cmd = app.add_subcommand(
        "model", "Sign model packages, verify their signatures, calibrate them for int8");
    cmd->require_subcommand(1);
    CLI::App* keygen = cmd->add_subcommand(
        "keygen", "Make a key pair: NAME.key (secret, mode 600) and NAME.pub (share this one)");
    keygen->add_option("name", o.key_name, "Path and stem of the two files")->required();
    keygen->add_option("--comment", o.comment, "Text kept with the public key (who, which year)");
    keygen->callback([&o] { o.action = "keygen"; });
    CLI::App* sign =
        cmd->add_subcommand("sign", "Sign every file of a package folder (writes signature.json)");
    sign->add_option("package", o.package, "Model package folder")->required();
    sign->add_option("--key", o.key_file, "The secret key (NAME.key)")->required();
    sign->callback([&o] { o.action = "sign"; });
    CLI::App* verify =
        cmd->add_subcommand("verify", "Check a package's signature against trusted keys");
    verify->add_option("package", o.package, "Model package folder")->required();
    verify->add_option("--trusted-keys", o.trusted_keys, "File of trusted public keys")->required();
    verify->callback([&o] { o.action = "verify"; });
    addModelCalibrateCommand(cmd, o);
    return cmd;
}

ExitCode runModel(const ModelCommandOptions& o, const CommandContext& context) {
    if (o.action == "calibrate") return runModelCalibrate(o.calibrate, context);
    if (o.action == "keygen") {
        auto key = engine::generateKeyPair(o.key_name, o.comment);
        if (!key.isOk()) return fail(key.status(), Stage::kOutput);
        std::printf(
            "key %s: secret %s.key (keep it private), public %s.pub (give it to whoever "
            "runs your models)\n",
            key->id().c_str(), o.key_name.c_str(), o.key_name.c_str());
        return ExitCode::kOk;
    }
    if (o.action == "sign") {
        auto id = engine::signModelPackage(o.package, o.key_file);
        if (!id.isOk()) return fail(id.status(), Stage::kInput);
        std::printf("%s: signed by key %s\n", o.package.c_str(), id->c_str());
        return ExitCode::kOk;
    }
    engine::ModelTrustPolicy policy;
    policy.require_signed = true;
    policy.trusted_keys = o.trusted_keys;
    auto summary = engine::checkModelTrust(o.package, policy);
    if (!summary.isOk()) return fail(summary.status(), Stage::kInput);
    std::printf("%s: %s\n", o.package.c_str(), summary->c_str());
    return ExitCode::kOk;
}

}  // namespace voxseg::app
