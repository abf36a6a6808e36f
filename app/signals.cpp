#include "app/signals.h"

#include <csignal>

namespace voxseg::app {
namespace {
// The token is copied into static storage; the handler only performs a lock-free atomic store
// on the flag it shares with every copy, which is async-signal-safe.
CancelToken* g_token = nullptr;

extern "C" void onSignal(int) {
    if (g_token) g_token->cancel();
}
}  // namespace

void installCancelOnSignals(const CancelToken& token) {
    static CancelToken stored = token;
    g_token = &stored;
    struct sigaction sa {};
    sa.sa_handler = onSignal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESETHAND;  // a second signal gets the default action (terminate)
    sigaction(SIGINT, &sa, nullptr);
    sigaction(SIGTERM, &sa, nullptr);
}

void ignoreFileSizeSignal() { std::signal(SIGXFSZ, SIG_IGN); }

void keepRunningOnRepeatedSigterm() {
    struct sigaction sa {};
    sa.sa_handler = onSignal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = 0;  // stays installed
    sigaction(SIGTERM, &sa, nullptr);
}

}  // namespace voxseg::app
