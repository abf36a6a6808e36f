#include "batch/shard.h"

#include <cstdlib>

namespace voxseg::batch {
namespace {

// Whole-string non-negative integer.
std::optional<long> parseIndex(const std::string& s) {
    if (s.empty() || s.size() > 9) return std::nullopt;
    for (char c : s)
        if (c < '0' || c > '9') return std::nullopt;
    return std::stol(s);
}

Result<Shard> makeShard(long index, long count, const std::string& source,
                        const std::string& what) {
    if (count < 1) return invalidArgument("shard count must be at least 1", what);
    if (index < 0 || index >= count)
        return invalidArgument(
            "shard index " + std::to_string(index) + " is outside 0.." + std::to_string(count - 1),
            what);
    Shard s;
    s.index = static_cast<int>(index);
    s.count = static_cast<int>(count);
    s.source = source;
    return s;
}

}  // namespace

std::string Shard::tag() const { return std::to_string(index) + "-of-" + std::to_string(count); }

Result<Shard> parseShard(const std::string& text) {
    const auto slash = text.find('/');
    if (slash == std::string::npos)
        return invalidArgument("--shard must be i/N (e.g. 0/4), got '" + text + "'");
    const auto i = parseIndex(text.substr(0, slash));
    const auto n = parseIndex(text.substr(slash + 1));
    if (!i || !n) return invalidArgument("--shard must be i/N (e.g. 0/4), got '" + text + "'");
    return makeShard(*i, *n, "--shard", "--shard " + text);
}

EnvLookup processEnvironment() {
    return [](const std::string& name) -> std::optional<std::string> {
        const char* v = std::getenv(name.c_str());
        if (!v || !*v) return std::nullopt;
        return std::string(v);
    };
}

Result<Shard> resolveShard(const std::string& shard_option, int shards_option,
                           const EnvLookup& env) {
    if (!shard_option.empty()) {
        VOXSEG_ASSIGN_OR_RETURN(Shard s, parseShard(shard_option));
        if (shards_option > 0 && shards_option != s.count)
            return invalidArgument("--shards " + std::to_string(shards_option) +
                                   " contradicts --shard " + shard_option);
        return s;
    }
    auto number = [&](const std::string& name) -> Result<std::optional<long>> {
        const auto v = env(name);
        if (!v) return std::optional<long>();
        const auto n = parseIndex(*v);
        if (!n) return invalidArgument(name + " is not a non-negative integer: '" + *v + "'");
        return std::optional<long>(*n);
    };
    VOXSEG_ASSIGN_OR_RETURN(auto slurm_id, number("SLURM_ARRAY_TASK_ID"));
    if (slurm_id) {
        VOXSEG_ASSIGN_OR_RETURN(auto slurm_count, number("SLURM_ARRAY_TASK_COUNT"));
        VOXSEG_ASSIGN_OR_RETURN(auto slurm_min, number("SLURM_ARRAY_TASK_MIN"));
        const long count = slurm_count ? *slurm_count : shards_option;
        if (count <= 0)
            return invalidArgument(
                "SLURM_ARRAY_TASK_ID is set but SLURM_ARRAY_TASK_COUNT is not: pass --shards N");
        if (shards_option > 0 && shards_option != count)
            return invalidArgument("--shards " + std::to_string(shards_option) +
                                   " contradicts SLURM_ARRAY_TASK_COUNT=" + std::to_string(count));
        // Arrays must be contiguous (--array=0-3 or 1-4); the index counts from the first task.
        const long index = *slurm_id - (slurm_min ? *slurm_min : 0);
        return makeShard(index, count, "slurm",
                         "SLURM_ARRAY_TASK_ID=" + std::to_string(*slurm_id) +
                             " (use a contiguous --array range)");
    }
    for (const auto& [var, source] :
         {std::pair<std::string, std::string>{"JOB_COMPLETION_INDEX", "kubernetes"},
          {"AWS_BATCH_JOB_ARRAY_INDEX", "aws-batch"}}) {
        VOXSEG_ASSIGN_OR_RETURN(auto id, number(var));
        if (!id) continue;
        if (shards_option <= 0)
            return invalidArgument(var + " is set: pass --shards N with N = the " +
                                   (source == "kubernetes" ? std::string("Job's completions")
                                                           : std::string("array size")));
        return makeShard(*id, shards_option, source, var + "=" + std::to_string(*id));
    }
    if (shards_option > 1)
        return invalidArgument(
            "--shards without a shard index: pass --shard i/N or run as an array job (Slurm, "
            "Kubernetes Indexed Job, AWS Batch)");
    return Shard{};
}

uint64_t caseHash(const std::string& case_id) {
    uint64_t h = 1469598103934665603ull;  // FNV-1a 64
    for (unsigned char c : case_id) {
        h ^= c;
        h *= 1099511628211ull;
    }
    // Finaliser (MurmurHash3 fmix64): FNV's low bits alone would make `% N` uneven.
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ull;
    h ^= h >> 33;
    return h;
}

}  // namespace voxseg::batch
