// BoundedQueue (the pipeline's hand-offs), retryTransient, and the summary/metrics formats.
#include "batch/bounded_queue.h"
#include "batch/report.h"
#include "batch/runner.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

namespace voxseg::batch {
namespace {

TEST(BoundedQueue, ProducerWaitsWhileFullAndCloseDrains) {
    BoundedQueue<int> q(2);
    std::atomic<int> pushed{0};
    std::atomic<size_t> max_seen{0};
    std::thread producer([&] {
        for (int i = 0; i < 50; ++i) {
            int v = i;
            ASSERT_TRUE(q.push(std::move(v)));
            ++pushed;
        }
        q.close();
    });
    std::vector<int> got;
    while (auto v = q.pop()) {
        max_seen = std::max(max_seen.load(), q.size() + 1);
        got.push_back(*v);
    }
    producer.join();
    ASSERT_EQ(got.size(), 50u);
    for (int i = 0; i < 50; ++i) EXPECT_EQ(got[i], i);
    EXPECT_LE(max_seen.load(), q.capacity() + 1);
    int late = 1;
    EXPECT_FALSE(q.push(std::move(late)));
}

TEST(BoundedQueue, PushBlocksAtCapacity) {
    BoundedQueue<int> q(1);
    int a = 1;
    ASSERT_TRUE(q.push(std::move(a)));
    std::atomic<bool> second_done{false};
    std::thread t([&] {
        int b = 2;
        q.push(std::move(b));
        second_done = true;
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    EXPECT_FALSE(second_done.load());  // still waiting: the queue is full
    EXPECT_EQ(q.pop().value(), 1);
    t.join();
    EXPECT_TRUE(second_done.load());
    EXPECT_EQ(q.pop().value(), 2);
}

TEST(Retry, TransientReadErrorsAreRetriedOthersAreNot) {
    CancelToken stop;
    int calls = 0, attempts = 0;
    auto flaky = [&]() -> Result<int> {
        if (++calls < 3) return ioError("EIO", "/mnt/s3/x");
        return 42;
    };
    auto r = retryTransient<int>(flaky, 2, 0.001, stop, &attempts);
    ASSERT_TRUE(r.isOk());
    EXPECT_EQ(*r, 42);
    EXPECT_EQ(attempts, 3);

    calls = 0;
    auto exhausted = retryTransient<int>(flaky, 1, 0.001, stop, &attempts);
    EXPECT_EQ(exhausted.status().code(), StatusCode::kIoError);
    EXPECT_EQ(attempts, 2);

    int corrupt_calls = 0;
    auto corrupt = retryTransient<int>(
        [&]() -> Result<int> {
            ++corrupt_calls;
            return corruptData("bad");
        },
        5, 0.001, stop);
    EXPECT_EQ(corrupt.status().code(), StatusCode::kCorruptData);
    EXPECT_EQ(corrupt_calls, 1);
}

TEST(Report, SummaryAndPrometheusText) {
    BatchStats s;
    s.shard = "1/4";
    s.cases_in_shard = 5;
    s.done = 2;
    s.failed = 1;
    s.skipped = 1;
    s.wall_seconds = 30;
    s.stage_seconds["inference"] = 12.5;
    s.cases.push_back({"a", "done", 3.0, {{"inference", 2.0}}, "", "", 100, 120});
    s.cases.push_back({"b", "failed", 1.0, {}, "corrupt: x", "corrupt_data", 90, 120});
    const auto j = summaryJson(s);
    EXPECT_EQ(j["counts"]["done"], 2);
    EXPECT_EQ(j["counts"]["pending"], 1);
    EXPECT_DOUBLE_EQ(j["throughput_cases_per_minute"].get<double>(), 6.0);
    ASSERT_EQ(j["failures"].size(), 1u);
    EXPECT_EQ(j["failures"][0]["case_id"], "b");
    const std::string t = prometheusText(s, true);
    EXPECT_NE(t.find("voxseg_batch_cases{shard=\"1/4\",state=\"done\"} 2\n"), std::string::npos)
        << t;
    EXPECT_NE(t.find("voxseg_batch_cases{shard=\"1/4\",state=\"failed\"} 1\n"), std::string::npos);
    EXPECT_NE(
        t.find("voxseg_batch_stage_seconds_total{shard=\"1/4\",stage=\"inference\"} 12.500000\n"),
        std::string::npos);
    EXPECT_NE(t.find("voxseg_batch_running{shard=\"1/4\"} 1\n"), std::string::npos);
    EXPECT_NE(t.find("# TYPE voxseg_batch_stage_seconds_total counter\n"), std::string::npos);
}

TEST(Devices, ParseDevices) {
    using engine::DeviceSpec;
    auto names = [](const Result<std::vector<DeviceSpec>>& r) {
        std::vector<std::string> out;
        if (r.isOk())
            for (const auto& d : *r) out.push_back(d.toString());
        return out;
    };
    auto cpu2 = parseDevices("0,1", DeviceSpec::cpu());
    ASSERT_TRUE(cpu2.isOk());
    EXPECT_EQ(names(cpu2), (std::vector<std::string>{"cpu", "cpu"}));
    auto cuda = parseDevices("0, 1", DeviceSpec::cuda());
    ASSERT_TRUE(cuda.isOk());
    EXPECT_EQ(*cuda, (std::vector<DeviceSpec>{DeviceSpec::cuda(0), DeviceSpec::cuda(1)}));
    // Regression: "" gave {base}, so the CLI never reached runBatch's two-CPU-worker default.
    EXPECT_TRUE(parseDevices("", DeviceSpec::automatic())->empty());
    EXPECT_TRUE(parseDevices(" ", DeviceSpec::cpu())->empty());
    EXPECT_EQ(names(parseDevices("cpu,cuda:1", DeviceSpec::automatic())),
              (std::vector<std::string>{"cpu", "cuda:1"}));
    EXPECT_EQ(names(parseDevices("cuda,reference", DeviceSpec::automatic())),
              (std::vector<std::string>{"cuda:0", "reference"}));
    EXPECT_FALSE(parseDevices("0,0", DeviceSpec::cuda()).isOk());
    EXPECT_FALSE(parseDevices("cuda,cuda:0", DeviceSpec::automatic()).isOk());  // same GPU
    EXPECT_FALSE(parseDevices("gpu0", DeviceSpec::automatic()).isOk());
}

}  // namespace
}  // namespace voxseg::batch
