// zeroing: fill throughput of each page-zeroing method over a buffer past the
// LLC, one thread, with a non-zero fill as the control (zero lines may be
// special-cased). Not measured: page faults (`fault`).
#include "harness/measure/zeroing.h"

#include <benchmark/benchmark.h>
#include <sys/mman.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "bench/common.h"
#include "harness/family.h"
#include "harness/machine/memory.h"

namespace lockline::zeroing_bench {

inline constexpr std::size_t kPage = 4096;
/// Bytes between stop-flag checks: 1 MiB, ~50-100 µs.
inline constexpr std::size_t kChunk = 1u << 20;
/// Non-zero control byte (the pre-zeroing thread's "other pattern").
inline constexpr uint8_t kPatternByte = 0x5a;

/// Refills a first-touched buffer holding the value chunk by chunk with
/// `method`; one op = one 4 KiB page.
class ZeroingWorkload : public Workload {
 public:
  ZeroingWorkload(ZeroMethod method, uint8_t value, std::size_t bytes,
                  const ZeroingCpu& cpu = DetectZeroingCpu())
      : method_(method),
        value_(value),
        bytes_(bytes / kChunk * kChunk),
        unsupported_(ZeroMethodUnsupportedReason(method, value, cpu)) {}
  ~ZeroingWorkload() override {
    if (buf_ != nullptr) munmap(buf_, bytes_);
  }

  bool shares_lines() const override { return false; }

  void SetupThread(const ThreadCtx& ctx) override {
    if (ctx.index != 0 || !unsupported_.empty()) return;
    buf_ = static_cast<char*>(MapAnon(bytes_));
    if (buf_ == nullptr) {
      map_error_ = MapFailure(bytes_, errno);
      return;
    }
    std::memset(buf_, value_, bytes_);
  }

  uint64_t RunWindow(const ThreadCtx& ctx,
                     const std::atomic<bool>& stop) override {
    if (ctx.index != 0 || buf_ == nullptr) return 0;
    uint64_t bytes = 0;
    std::size_t off = 0;
    while (!stop.load(std::memory_order_relaxed)) {
      FillWith(method_, buf_ + off, kChunk, value_);
      benchmark::ClobberMemory();
      bytes += kChunk;
      off = (off + kChunk) % bytes_;
    }
    benchmark::DoNotOptimize(buf_[off]);
    bytes_filled_ += bytes;
    return bytes / kPage;
  }

  void Report(PointReport& out, double window_seconds,
              uint64_t /*ops*/) override {
    out.Metric("gb_per_s", Ratio(bytes_filled_, window_seconds) / 1e9);
    auto& d = out.details;
    d["method"] = ZeroMethodName(method_);
    d["method_native"] = FillMethodIsNative(method_);
    d["fill_byte"] = value_;
    d["buffer_bytes"] = bytes_;
    d["note"] =
        "fill throughput of this method and value, not memory bandwidth: zeros "
        "can be written faster than other patterns (a host or memory "
        "controller may special-case zero lines), so compare fill:zero with "
        "fill:pattern of the same method";
    if (!unsupported_.empty()) d["skipped"] = unsupported_;
  }

  std::string SetupError() override { return map_error_; }

  std::string Verify() override {
    if (!unsupported_.empty()) return "skipped: " + unsupported_;
    // The fill value in a sample: first, middle and last byte of each chunk.
    for (std::size_t off = 0; off < bytes_; off += kChunk) {
      for (std::size_t at : {off, off + kChunk / 2, off + kChunk - 1}) {
        if (static_cast<uint8_t>(buf_[at]) != value_)
          return "byte " + std::to_string(at) + " is " +
                 std::to_string(static_cast<uint8_t>(buf_[at])) +
                 ", expected " + std::to_string(value_);
      }
    }
    return "";
  }

 private:
  ZeroMethod method_;
  uint8_t value_;
  std::size_t bytes_;
  std::string unsupported_, map_error_;
  char* buf_ = nullptr;
  uint64_t bytes_filled_ = 0;
};

/// MiB: twice a 32 MiB L3 (Zen 4 CCD), so fills go to memory; --quick too
/// (one row key, one meaning).
inline constexpr std::size_t kBufferMb = 64;

std::vector<Variant> Variants() {
  std::vector<Variant> v;
  for (ZeroMethod m : AllZeroMethods()) {
    for (bool zero : {true, false}) {
      if (m == ZeroMethod::kClzero && !zero)
        continue;  // clzero writes only zeros
      Variant x;
      x.params = {{"method", ZeroMethodName(m)},
                  {"fill", zero ? "zero" : "pattern"}};
      x.suite = (m == ZeroMethod::kMemset) ? Suite::kQuick : Suite::kDefault;
      x.threads = {1};
      x.cost_mib = kBufferMb;  // for the budget: the buffer, first touched
      x.description = std::string("fill a ") + std::to_string(kBufferMb) +
                      " MiB buffer with " + (zero ? "zeros" : "0x5a") + " by " +
                      ZeroMethodName(m);
      const uint8_t value = zero ? 0 : kPatternByte;
      x.unavailable = ZeroMethodUnsupportedReason(m, value);
      x.make = [m, value](const PointEnv&) -> std::unique_ptr<Workload> {
        return std::make_unique<ZeroingWorkload>(m, value, kBufferMb << 20);
      };
      v.push_back(std::move(x));
    }
  }
  return v;
}

}  // namespace lockline::zeroing_bench

LOCKLINE_REGISTER_FAMILY(lockline::Family{
    "zeroing",
    "Zeroing throughput per method (memset, rep stosb, non-temporal stores, "
    "clzero) with a "
    "non-zero fill as control: fill throughput, not memory bandwidth",
    lockline::zeroing_bench::Variants,
    {}});
