#include "cpu_devices.h"

#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>

#include "env_number.h"
#include "error.h"

namespace kiln {

namespace {

std::mutex g_mu;
int g_count = 0;        // 0: not fixed yet
int g_requested = 0;    // set_num_cpu_devices before the first read

int read_env() {
  return static_cast<int>(detail::env_whole_number("KILN_CPU_DEVICES", 1, 1, 1024, "a number of CPU devices"));
}

// One worker thread per CPU device: a queue of jobs run in order.
class Worker {
 public:
  Worker() : th_([this] { loop(); }) {}
  ~Worker() {
    {
      std::lock_guard<std::mutex> lk(mu_);
      stop_ = true;
    }
    cv_.notify_one();
    th_.join();
  }
  void post(std::function<void()> job) {
    {
      std::lock_guard<std::mutex> lk(mu_);
      jobs_.push_back(std::move(job));
    }
    cv_.notify_one();
  }

 private:
  void loop();
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> jobs_;
  bool stop_ = false;
  std::thread th_;
};

thread_local bool t_on_worker = false;

void Worker::loop() {
  t_on_worker = true;
  for (;;) {
    std::function<void()> job;
    {
      std::unique_lock<std::mutex> lk(mu_);
      cv_.wait(lk, [&] { return stop_ || !jobs_.empty(); });
      if (jobs_.empty()) return;
      job = std::move(jobs_.front());
      jobs_.pop_front();
    }
    job();
  }
}

Worker& worker(int i) {
  static std::mutex mu;
  static std::vector<std::unique_ptr<Worker>> workers;
  std::lock_guard<std::mutex> lk(mu);
  if (workers.size() <= static_cast<size_t>(i)) workers.resize(static_cast<size_t>(i) + 1);
  if (!workers[i]) workers[i] = std::make_unique<Worker>();
  return *workers[i];
}

}  // namespace

int num_cpu_devices() {
  std::lock_guard<std::mutex> lk(g_mu);
  if (!g_count) g_count = g_requested ? g_requested : read_env();
  return g_count;
}

void set_num_cpu_devices(int n) {
  if (n < 1 || n > 1024)
    throw ValueError("set_num_cpu_devices: expected a number of CPU devices in [1, 1024], got " + std::to_string(n));
  std::lock_guard<std::mutex> lk(g_mu);
  if (g_count && g_count != n)
    throw ValueError("set_num_cpu_devices(" + std::to_string(n) + "): the number of CPU devices is already fixed at " +
                     std::to_string(g_count) + " (call it before the first use of a CPU device other than 0)");
  g_requested = n;
}

namespace detail {
void ensure_cpu_devices(int n) {
  std::lock_guard<std::mutex> lk(g_mu);
  if (g_count) {
    if (g_count < n)
      throw ValueError("distributed: " + std::to_string(n) + " processes need " + std::to_string(n) +
                       " CPU device ids, but the count is already fixed at " + std::to_string(g_count) +
                       " (call distributed::init() first)");
    return;
  }
  if (!g_requested) g_requested = read_env();
  if (g_requested < n) g_requested = n;
}
}  // namespace detail

void check_cpu_device(Device d, const char* who) {
  if (!d.is_cpu() || d.index == 0) return;
  const int n = num_cpu_devices();
  if (d.index < 0 || d.index >= n)
    throw DeviceError(std::string(who) + ": CPU device " + std::to_string(d.index) + " does not exist: this process has " +
                      std::to_string(n) + " CPU device(s) (set KILN_CPU_DEVICES=N or call set_num_cpu_devices(N) "
                      "before the first use)");
}

Device cpu_device(int i) {
  const Device d{DeviceType::cpu, i};
  if (i < 0) throw DeviceError("cpu_device: CPU device " + std::to_string(i) + " does not exist (negative index)");
  check_cpu_device(d, "cpu_device");
  return d;
}

void run_on_cpu_devices(const std::vector<Device>& devices, const std::function<void(size_t)>& fn) {
  std::set<int> seen;
  for (Device d : devices) {
    if (!d.is_cpu()) throw ValueError("run_on_cpu_devices: " + d.str() + " is not a CPU device");
    check_cpu_device(d, "run_on_cpu_devices");
    if (!seen.insert(d.index).second) throw ValueError("run_on_cpu_devices: " + d.str() + " appears twice");
  }
  const size_t n = devices.size();
  if (n == 0) return;
  if (n == 1) return fn(0);
  std::vector<std::exception_ptr> errs(n);
  std::mutex mu;
  std::condition_variable cv;
  size_t done = 0;
  auto job = [&](size_t k) {
    try {
      fn(k);
    } catch (...) {
      errs[k] = std::current_exception();
    }
    std::lock_guard<std::mutex> lk(mu);
    if (++done == n) cv.notify_all();
  };
  std::vector<std::thread> fresh;
  for (size_t k = 0; k < n; ++k) {
    if (t_on_worker) fresh.emplace_back(job, k);  // nested: never queue behind ourselves
    else worker(devices[k].index).post([&job, k] { job(k); });
  }
  {
    std::unique_lock<std::mutex> lk(mu);
    cv.wait(lk, [&] { return done == n; });
  }
  for (auto& t : fresh) t.join();
  for (auto& e : errs)
    if (e) std::rethrow_exception(e);
}

}  // namespace kiln
