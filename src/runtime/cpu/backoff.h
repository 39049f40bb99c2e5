#pragma once
// Spin-wait pacing for worker threads. Workers may outnumber cores (CI has two), so a waiter
// spins briefly, then yields, then sleeps: the thread it waits for gets to run.

#include <chrono>
#include <thread>

namespace evt::runtime::cpu {

class Backoff {
 public:
  void pause() {
    ++spins_;
    if (spins_ < 64) {
#if defined(__x86_64__)
      __builtin_ia32_pause();
#endif
    } else if (spins_ < 512) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
  }
  void reset() { spins_ = 0; }

 private:
  int spins_ = 0;
};

}  // namespace evt::runtime::cpu
