// OpenMP threads that wait at a barrier should sleep, not spin.
//
// libgomp's default makes a waiting thread spin for about 300000 iterations before it sleeps.
// On a machine where other work holds the cores (a shared workstation, a batch's loader threads,
// a second process), the spinning thread burns the time slice the thread it waits for needs:
// 2-thread inference of the CT demo model took 13.7 s instead of 2.3 s next to a 2-thread job
// on 2 cores (docs/perf-segment.md). OMP_WAIT_POLICY=passive removes that and costs nothing
// measurable on an idle machine, but libgomp reads it only once, when it is loaded, before
// main(). So:
//
//   int main(int argc, char** argv) { voxseg::usePassiveOpenMpWaiting(argv); ... }
//
// sets OMP_WAIT_POLICY=passive and re-executes the program when neither OMP_WAIT_POLICY nor
// GOMP_SPINCOUNT is set (a user's own setting always wins). It returns normally when nothing
// needs doing or the re-execution is impossible (no /proc): the program then runs as before.
// Programs decide themselves whether they need it (voxseg's convert, info and synth run no
// OpenMP code and skip it: app/main.cpp).
// Call it first in main(), before any thread exists.
#pragma once

namespace voxseg {

void usePassiveOpenMpWaiting(char** argv);

}  // namespace voxseg
