// Deterministic sharding of a batch over array jobs: every case belongs to exactly one of N
// shards, decided by a hash of its case id alone (FNV-1a 64), so every shard agrees without
// talking to the others, and adding cases to a manifest never moves existing ones to another
// shard. The shard comes from `--shard i/N` or from the scheduler's environment (Slurm job
// arrays, Kubernetes Indexed Jobs, AWS Batch array jobs). Plain functions: thread-safe.
#pragma once

#include "core/status.h"

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

namespace voxseg::batch {

struct Shard {
    int index = 0;  // 0-based
    int count = 1;
    std::string source = "default";  // "--shard", "slurm", "kubernetes", "aws-batch", "default"

    // "0-of-1", used in file names (journal, summary, metrics).
    std::string tag() const;
};

// "i/N" with 0 <= i < N.
Result<Shard> parseShard(const std::string& text);

// Looks up an environment variable; empty optional when unset. (Tests pass their own.)
using EnvLookup = std::function<std::optional<std::string>(const std::string&)>;
EnvLookup processEnvironment();

// The shard of this process: `shard_option` ("i/N", may be empty) first, then
// SLURM_ARRAY_TASK_ID - SLURM_ARRAY_TASK_MIN of SLURM_ARRAY_TASK_COUNT, then
// JOB_COMPLETION_INDEX (Kubernetes) or AWS_BATCH_JOB_ARRAY_INDEX of `shards_option` (their
// schedulers do not publish the count, so --shards is required there). shards_option <= 0:
// not given. Without any of these: shard 0 of 1.
Result<Shard> resolveShard(const std::string& shard_option, int shards_option,
                           const EnvLookup& env);

uint64_t caseHash(const std::string& case_id);
inline bool inShard(const std::string& case_id, const Shard& shard) {
    return static_cast<int>(caseHash(case_id) % static_cast<uint64_t>(shard.count)) == shard.index;
}

}  // namespace voxseg::batch
