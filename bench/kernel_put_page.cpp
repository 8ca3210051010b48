// kernel_put_page: a loopback TCP stream, netperf TCP_STREAM's shape in the
// 2006 put_page thread (question 002 beside `page_free`): skb pages allocated
// by the sender (tcp_sendmsg_locked) are freed by the receiver after the copy
// (skb_release_data), on another CPU. Task 2k sends, 2k+1 receives; a lone
// task reads back its own. One op = one message sent or received; each
// window's bytes received == sent and the sequence headers are checked.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <memory>
#include <string>
#include <vector>

#include "bench/kernel_tasks.h"
#include "harness/family.h"

namespace lockline::kernel_put_page {

using kernel_tasks::Tasks;
using kernel_tasks::TaskWindow;

/// Message size: 16 KiB, netperf's classic send size.
inline constexpr std::size_t kDefaultMsg = 16384;
/// A receiver gives up when the sender is done and nothing arrives this long.
inline constexpr int64_t kDrainTimeoutNs = 2'000'000'000;

/// State one connection's two tasks share (MAP_SHARED: valid across fork).
struct alignas(64) PairShared {
  std::atomic<uint64_t> sent{0};      ///< bytes the sender wrote, all windows
  std::atomic<uint64_t> done_seq{0};  ///< windows the sender has finished
};

class PutPageWorkload : public kernel_tasks::KernelFamilyWorkload {
 public:
  PutPageWorkload(Tasks tasks, int threads, std::size_t msg)
      : KernelFamilyWorkload(tasks, threads), msg_(msg) {}
  ~PutPageWorkload() override {
    for (auto& c : conns_) {
      if (c.send_fd >= 0) close(c.send_fd);
      if (c.recv_fd >= 0) close(c.recv_fd);
    }
    if (shared_) munmap(shared_, SharedBytes());
    for (char* b : bufs_) munmap(b, msg_);
  }

  void PrepareTasks(int threads) override {
    const int n_conns = (threads + 1) / 2;
    shared_ = static_cast<PairShared*>(MapAnon(SharedBytes(), MAP_SHARED));
    if (shared_ == nullptr) {
      setup_error_ = "mmap of pair state failed";
      return;
    }
    for (int i = 0; i < n_conns; ++i) new (&shared_[i]) PairShared();
    for (int i = 0; i < threads; ++i) {
      char* b = static_cast<char*>(MapAnon(msg_));
      if (b == nullptr) {
        setup_error_ = "mmap of a message buffer failed";
        return;
      }
      std::memset(b, 0x6b, msg_);
      bufs_.push_back(b);
    }
    window_seq_.assign(static_cast<std::size_t>(threads), 0);
    received_.assign(static_cast<std::size_t>(threads), 0);
    for (int i = 0; i < n_conns; ++i) {
      Conn c;
      setup_error_ = Connect(&c);
      conns_.push_back(c);
      if (!setup_error_.empty()) return;
    }
  }

  TaskWindow RunOps(int index, const std::atomic<bool>& stop) override {
    TaskWindow r;
    const int pair = index / 2;
    const Conn& c = conns_[pair];
    PairShared& ps = shared_[pair];
    char* buf = bufs_[index];
    const uint64_t seq = ++window_seq_[index];  // this task's window number
    const bool alone = index % 2 == 0 && index + 1 == threads_;
    if (index % 2 == 0) {  // a sender; alone, it reads each message back
      do {
        uint64_t mno = ps.sent.load(std::memory_order_relaxed) / msg_;
        std::memcpy(buf, &mno, sizeof mno);
        if (!Transfer(c.send_fd, buf, msg_, false, &r)) break;
        ps.sent.fetch_add(msg_, std::memory_order_release);
        r.bytes_sent += msg_;
        if (!alone) {
          ++r.ops;
          continue;
        }
        if (!Transfer(c.recv_fd, buf, msg_, true, &r)) break;
        received_[index] += msg_;
        CheckSequence(r, mno, buf);
        r.bytes_received += msg_;
        r.ops += 2;
      } while (!stop.load(std::memory_order_relaxed) && r.error[0] == 0);
      if (!alone) ps.done_seq.store(seq, std::memory_order_release);
      return r;
    }
    // Receiver: until the sender is done and every byte it sent arrived.
    uint64_t& pos = received_[index];  // stream offset, all windows
    int64_t idle_since = -1;
    for (;;) {
      const bool done = ps.done_seq.load(std::memory_order_acquire) >= seq;
      const uint64_t sent = ps.sent.load(std::memory_order_acquire);
      if (done && pos >= sent) break;
      const ssize_t n = recv(c.recv_fd, buf, msg_, MSG_DONTWAIT);
      if (n > 0) {
        // Sequence headers that lie wholly inside this chunk.
        const uint64_t lo = pos, hi = pos + static_cast<uint64_t>(n);
        for (uint64_t m = (lo + msg_ - 1) / msg_ * msg_; m + 8 <= hi; m += msg_)
          CheckSequence(r, m / msg_, buf + (m - lo));
        pos = hi;
        r.bytes_received += static_cast<uint64_t>(n);
        idle_since = -1;
        continue;
      }
      if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK)) {
        std::snprintf(r.error, sizeof r.error, "recv failed: %s",
                      n == 0 ? "connection closed" : std::strerror(errno));
        break;
      }
      if (done) {
        timespec ts{};
        clock_gettime(CLOCK_MONOTONIC, &ts);
        const int64_t now = ts.tv_sec * 1'000'000'000ll + ts.tv_nsec;
        if (idle_since < 0) idle_since = now;
        if (now - idle_since > kDrainTimeoutNs) {
          std::snprintf(r.error, sizeof r.error,
                        "receiver timed out: %llu of %llu bytes arrived",
                        static_cast<unsigned long long>(pos),
                        static_cast<unsigned long long>(sent));
          break;
        }
      }
      pollfd p{c.recv_fd, POLLIN, 0};
      poll(&p, 1, 1);
    }
    // Whole messages completed in this window: its receive ops.
    r.ops = r.bytes_received / msg_;
    return r;
  }

  void ReportFamily(PointReport& out, const TaskWindow& total,
                    double window_seconds) override {
    out.Metric("MB_per_s", Ratio(total.bytes_received / 1e6, window_seconds));
    out.Metric("messages_per_s",
               Ratio(total.bytes_received / static_cast<double>(msg_),
                     window_seconds));
    out.Metric("bytes_sent", static_cast<double>(total.bytes_sent));
    out.Metric("bytes_received", static_cast<double>(total.bytes_received));
    auto& d = out.details;
    d["msg_bytes"] = msg_;
    d["connections"] = conns_.size();
    d["op"] =
        "one message sent, or one message received (each message counts twice)";
    d["sequence_checked_messages"] = total.checked;
    d["shape"] =
        "netperf TCP_STREAM over 127.0.0.1: task 2k sends, task 2k+1 "
        "receives; an unpaired task sends and reads back itself";
  }

  /// Per connection, at its sender: bytes received == sent.
  std::string VerifyTask(int index, const TaskWindow& snd) override {
    if (index % 2 != 0) return "";  // a receiver: checked with its sender
    const uint64_t got = index + 1 < threads_
                             ? TaskTotal(index + 1).bytes_received
                             : snd.bytes_received;
    if (got != snd.bytes_sent)
      return "connection " + std::to_string(index / 2) + ": " +
             std::to_string(got) + " bytes received, " +
             std::to_string(snd.bytes_sent) + " sent";
    return "";
  }

  /// Over all tasks: bytes received == bytes sent.
  std::string VerifyPoint() override {
    const TaskWindow s = Total();
    if (s.bytes_received != s.bytes_sent)
      return std::to_string(s.bytes_received) + " bytes received, " +
             std::to_string(s.bytes_sent) + " sent";
    return "";
  }

 private:
  struct Conn {
    int send_fd = -1, recv_fd = -1;
  };

  std::size_t SharedBytes() const {
    const std::size_t n = static_cast<std::size_t>((threads_ + 1) / 2);
    return RoundUpToPage(n * sizeof(PairShared));
  }

  // A connected 127.0.0.1 TCP pair; "" or the failing call.
  static std::string Connect(Conn* c) {
    const int l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (l < 0) return std::string("socket: ") + std::strerror(errno);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = 0;
    socklen_t len = sizeof a;
    std::string err;
    if (bind(l, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
        listen(l, 1) != 0 ||
        getsockname(l, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
      err = std::string("bind/listen on 127.0.0.1: ") + std::strerror(errno);
    } else {
      c->send_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
      if (c->send_fd < 0 ||
          connect(c->send_fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
        err = std::string("connect to 127.0.0.1: ") + std::strerror(errno);
      } else {
        c->recv_fd = accept4(l, nullptr, nullptr, SOCK_CLOEXEC);
        if (c->recv_fd < 0)
          err = std::string("accept: ") + std::strerror(errno);
      }
    }
    close(l);
    return err;
  }

  /// Checks the sequence header at `at` against message `want` (r.checked);
  /// a mismatch sets r.error unless it is set.
  static void CheckSequence(TaskWindow& r, uint64_t want, const char* at) {
    ++r.checked;
    uint64_t got = 0;
    std::memcpy(&got, at, sizeof got);
    if (got != want && r.error[0] == 0)
      std::snprintf(r.error, sizeof r.error,
                    "message %llu arrived with sequence %llu",
                    static_cast<unsigned long long>(want),
                    static_cast<unsigned long long>(got));
  }

  /// Sends (or, `receive`, receives) all `n` bytes at `p`, retrying EINTR;
  /// false with r->error set.
  static bool Transfer(int fd, char* p, std::size_t n, bool receive,
                       TaskWindow* r) {
    while (n > 0) {
      const ssize_t g =
          receive ? recv(fd, p, n, MSG_WAITALL) : send(fd, p, n, MSG_NOSIGNAL);
      if (g <= 0) {
        if (g < 0 && errno == EINTR) continue;
        std::snprintf(
            r->error, sizeof r->error, "%s failed: %s",
            receive ? "recv" : "send",
            receive && g == 0 ? "connection closed" : std::strerror(errno));
        return false;
      }
      p += g;
      n -= static_cast<std::size_t>(g);
    }
    return true;
  }

  std::size_t msg_;
  std::vector<Conn> conns_;
  std::vector<char*> bufs_;
  PairShared* shared_ = nullptr;
  // Per task, touched only by that task (in a child: its own copy).
  std::vector<uint64_t> window_seq_, received_;
};

Variant MakeVariant(Tasks tasks, Suite suite, std::vector<int> threads) {
  return kernel_tasks::KernelVariant(
      {{"msg", std::to_string(kDefaultMsg)},
       {"tasks", kernel_tasks::TasksName(tasks)}},
      suite, std::move(threads),
      "netperf TCP_STREAM shape over 127.0.0.1: 16 KiB messages, sender and "
      "receiver pinned to their own PUs (one PU: send and read back); tasks "
      "as " +
          std::string(kernel_tasks::TasksName(tasks)),
      [=](int n) {
        return std::make_unique<PutPageWorkload>(tasks, n, kDefaultMsg);
      });
}

/// Default: threads at 1 and all PUs; full: processes too.
std::vector<Variant> PlannedVariants(const std::vector<PuInfo>& order) {
  std::vector<Variant> v;
  v.push_back(MakeVariant(Tasks::kThreads, Suite::kDefault,
                          kernel_tasks::OneAndAll(order)));
  v.push_back(MakeVariant(Tasks::kProcesses, Suite::kFull, {}));
  return v;
}

LOCKLINE_REGISTER_FAMILY(lockline::Family{
    "kernel_put_page",
    "The running kernel's page allocation and put_page on the network path: "
    "a loopback TCP stream (netperf TCP_STREAM shape), sender and receiver "
    "on their own PUs, MB/s and bytes received == sent checked",
    {},
    PlannedVariants});

}  // namespace lockline::kernel_put_page
