// Sharding: every case in exactly one shard, shards from the schedulers' environments.
#include "batch/shard.h"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

namespace voxseg::batch {
namespace {

EnvLookup envOf(std::map<std::string, std::string> vars) {
    return [vars](const std::string& name) -> std::optional<std::string> {
        auto it = vars.find(name);
        if (it == vars.end()) return std::nullopt;
        return it->second;
    };
}

TEST(Shard, ParseShard) {
    auto s = parseShard("2/5");
    ASSERT_TRUE(s.isOk());
    EXPECT_EQ(s->index, 2);
    EXPECT_EQ(s->count, 5);
    EXPECT_EQ(s->tag(), "2-of-5");
    for (const char* bad : {"5/5", "1", "a/2", "-1/2", "1/0", "1/2/3", "/2", "1/"})
        EXPECT_FALSE(parseShard(bad).isOk()) << bad;
}

TEST(Shard, EveryCaseInExactlyOneShardAndRoughlyEven) {
    constexpr int kCases = 2000;
    for (int n = 1; n <= 7; ++n) {
        std::vector<int> per_shard(n, 0);
        for (int c = 0; c < kCases; ++c) {
            const std::string id = "case-" + std::to_string(c);
            int owners = 0;
            for (int i = 0; i < n; ++i)
                if (inShard(id, Shard{i, n, "test"})) {
                    ++owners;
                    ++per_shard[i];
                }
            ASSERT_EQ(owners, 1) << id << " of " << n << " shards";
        }
        // A hash this size splits within 20% of even (binomial sd is ~2-5% here).
        constexpr double kBalanceTolerance = 0.2;
        for (int i = 0; i < n; ++i)
            EXPECT_NEAR(per_shard[i], kCases / double(n), kCases / double(n) * kBalanceTolerance)
                << "shard " << i << " of " << n;
    }
}

TEST(Shard, AssignmentDependsOnTheIdOnly) {
    // Same id, same shard, in any process: the hash is fixed (FNV-1a + fmix64).
    EXPECT_EQ(caseHash("case-1"), caseHash(std::string("case-") + "1"));
    EXPECT_NE(caseHash("case-1"), caseHash("case-2"));
}

TEST(Shard, ExplicitOptionWins) {
    auto s = resolveShard("1/3", 0,
                          envOf({{"SLURM_ARRAY_TASK_ID", "0"}, {"SLURM_ARRAY_TASK_COUNT", "4"}}));
    ASSERT_TRUE(s.isOk());
    EXPECT_EQ(s->index, 1);
    EXPECT_EQ(s->count, 3);
    EXPECT_EQ(s->source, "--shard");
    EXPECT_FALSE(resolveShard("1/3", 4, envOf({})).isOk());
}

TEST(Shard, SlurmArrayCountsFromTheFirstTask) {
    auto s = resolveShard("", 0,
                          envOf({{"SLURM_ARRAY_TASK_ID", "3"},
                                 {"SLURM_ARRAY_TASK_MIN", "1"},
                                 {"SLURM_ARRAY_TASK_COUNT", "4"}}));
    ASSERT_TRUE(s.isOk()) << s.status().toString();
    EXPECT_EQ(s->index, 2);
    EXPECT_EQ(s->count, 4);
    EXPECT_EQ(s->source, "slurm");
    EXPECT_FALSE(
        resolveShard("", 0, envOf({{"SLURM_ARRAY_TASK_ID", "4"}, {"SLURM_ARRAY_TASK_COUNT", "4"}}))
            .isOk());
    EXPECT_FALSE(resolveShard("", 0, envOf({{"SLURM_ARRAY_TASK_ID", "x"}})).isOk());
    EXPECT_FALSE(resolveShard("", 0, envOf({{"SLURM_ARRAY_TASK_ID", "1"}})).isOk());
}

TEST(Shard, KubernetesAndAwsNeedShards) {
    EXPECT_FALSE(resolveShard("", 0, envOf({{"JOB_COMPLETION_INDEX", "2"}})).isOk());
    auto k = resolveShard("", 8, envOf({{"JOB_COMPLETION_INDEX", "2"}}));
    ASSERT_TRUE(k.isOk());
    EXPECT_EQ(k->index, 2);
    EXPECT_EQ(k->count, 8);
    EXPECT_EQ(k->source, "kubernetes");
    auto a = resolveShard("", 3, envOf({{"AWS_BATCH_JOB_ARRAY_INDEX", "0"}}));
    ASSERT_TRUE(a.isOk());
    EXPECT_EQ(a->source, "aws-batch");
    EXPECT_FALSE(resolveShard("", 3, envOf({{"AWS_BATCH_JOB_ARRAY_INDEX", "3"}})).isOk());
}

TEST(Shard, NothingSetIsOneShard) {
    auto s = resolveShard("", 0, envOf({}));
    ASSERT_TRUE(s.isOk());
    EXPECT_EQ(s->count, 1);
    EXPECT_FALSE(resolveShard("", 4, envOf({})).isOk());
}

}  // namespace
}  // namespace voxseg::batch
