// Progress reporting and cancellation for long work (loading, inference, batch).
//
// A Progress is passed by value down the call tree. Each stage reports a fraction in [0, 1] of its
// own work; sub(begin, end) maps a stage's range into the parent's, so nested stages compose
// without knowing about each other. Cancellation is a shared flag: any copy can request it
// (a cancel button, SIGTERM), and long loops call checkCancelled() at safe points.
// Callbacks may be invoked from worker threads; they must be thread-safe and cheap.
#pragma once

#include "core/status.h"

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

namespace voxseg {

class CancelToken {
  public:
    CancelToken() : flag_(std::make_shared<std::atomic<bool>>(false)) {}
    void cancel() const { flag_->store(true, std::memory_order_relaxed); }
    bool isCancelled() const { return flag_->load(std::memory_order_relaxed); }

  private:
    std::shared_ptr<std::atomic<bool>> flag_;
};

// fraction in [0, 1] of the whole job; stage is a short human label ("reading headers").
using ProgressCallback = std::function<void(double fraction, std::string_view stage)>;

class Progress {
  public:
    Progress() = default;
    explicit Progress(ProgressCallback callback, CancelToken token = {})
        : callback_(std::make_shared<ProgressCallback>(std::move(callback))),
          token_(std::move(token)) {}

    // Reports `fraction` of this (sub-)range as done.
    void report(double fraction, std::string_view stage) const {
        if (!callback_ || !*callback_) return;
        if (fraction < 0) fraction = 0;
        if (fraction > 1) fraction = 1;
        (*callback_)(begin_ + fraction * (end_ - begin_), stage);
    }
    void report(size_t done, size_t total, std::string_view stage) const {
        report(total == 0 ? 1.0 : static_cast<double>(done) / static_cast<double>(total), stage);
    }

    // A Progress whose [0, 1] maps onto [begin, end] of this one.
    Progress sub(double begin, double end) const {
        Progress p = *this;
        p.begin_ = begin_ + begin * (end_ - begin_);
        p.end_ = begin_ + end * (end_ - begin_);
        return p;
    }

    bool isCancelled() const { return token_.isCancelled(); }
    Status checkCancelled() const {
        return isCancelled() ? Status(StatusCode::kCancelled, "cancelled") : Status::ok();
    }
    const CancelToken& token() const { return token_; }

  private:
    std::shared_ptr<ProgressCallback> callback_;
    CancelToken token_;
    double begin_ = 0.0;
    double end_ = 1.0;
};

}  // namespace voxseg
