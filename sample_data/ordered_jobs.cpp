#include "ordered_jobs.hpp"

#include <algorithm>
#include <atomic>
#include <exception>
#include <future>
#include <thread>

namespace tessera::sample {

void run_ordered_jobs(const std::vector<SummaryJob>& jobs, unsigned workers,
                      const std::function<void(const std::string&)>& report) {
  std::vector<std::packaged_task<std::string()>> tasks;
  std::vector<std::future<std::string>> results;
  for (const SummaryJob& job : jobs) {
    tasks.emplace_back(job);
    results.push_back(tasks.back().get_future());
  }
  std::atomic<size_t> next{0};
  std::vector<std::thread> pool;
  const size_t threads = std::clamp<size_t>(workers, 1, std::max<size_t>(jobs.size(), 1));
  for (size_t t = 0; t < threads; ++t)
    pool.emplace_back([&] {
      for (size_t i = next++; i < tasks.size(); i = next++) tasks[i]();
    });

  std::exception_ptr failure;
  for (auto& result : results) {
    try {
      std::string text = result.get();
      if (!failure) report(text);
    } catch (...) {
      if (!failure) failure = std::current_exception();
    }
  }
  for (std::thread& thread : pool) thread.join();
  if (failure) std::rethrow_exception(failure);
}

}  // namespace tessera::sample
