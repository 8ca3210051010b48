#include "harness/run/runs.h"

#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "harness/measure/shared_calibration.h"
#include "harness/run/until_resolved.h"

namespace lockline {
namespace {

volatile sig_atomic_t g_child = 0;
volatile sig_atomic_t g_stop = 0;

// The signal that stopped the runs (0: none), so the parent exits 128 + it.
void ForwardSignal(int sig) {
  g_stop = sig;
  if (g_child > 0) kill(static_cast<pid_t>(g_child), sig);
}

// mkdir -p of `path`'s parents, then `path` itself; true when it was created
// now or exists empty.
bool ClaimDir(const std::string& path, std::string* why) {
  for (size_t i = 1; i < path.size(); ++i)
    if (path[i] == '/') mkdir(path.substr(0, i).c_str(), 0777);
  if (mkdir(path.c_str(), 0777) == 0) return true;
  const int err = errno;
  std::error_code ec;
  const std::filesystem::directory_iterator entries(path, ec);
  if (err != EEXIST || ec) {
    *why = err != EEXIST ? std::strerror(err) : ec.message();
    return false;
  }
  const bool empty = entries == std::filesystem::directory_iterator();
  if (!empty) *why = "it exists and is not empty";
  return empty;
}

// Runs argv0 `args` and waits; returns its exit status (128 + signal).
int RunChild(const std::string& exe, const std::vector<std::string>& args) {
  std::vector<std::string> all = {exe};
  all.insert(all.end(), args.begin(), args.end());
  std::vector<char*> cargs;
  for (auto& a : all) cargs.push_back(a.data());
  cargs.push_back(nullptr);
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) return 1;
  if (pid == 0) {
    // A parent killed outright (SIGKILL, the OOM killer) must not leave its
    // current run measuring on: the child gets SIGTERM when the parent dies,
    // and ends now if that happened before prctl.
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != parent) _exit(128 + SIGTERM);
    execv(exe.c_str(), cargs.data());
    std::fprintf(stderr, "lockline: error: cannot run %s: %s\n", exe.c_str(),
                 std::strerror(errno));
    _exit(127);
  }
  g_child = pid;
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  g_child = 0;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

bool WriteFile(const std::string& path, const std::string& text) {
  FILE* f = std::fopen(path.c_str(), "w");
  if (!f) return false;
  const bool ok = std::fwrite(text.data(), 1, text.size(), f) == text.size();
  return std::fclose(f) == 0 && ok;
}

}  // namespace

std::string DefaultRunDir() {
  char host[256] = "host";
  gethostname(host, sizeof host - 1);
  char stamp[32];
  const time_t now = time(nullptr);
  strftime(stamp, sizeof stamp, "%Y%m%dT%H%M%SZ", gmtime(&now));
  return std::string("results/") + host + "-" + stamp;
}

std::string SelfPath() {
  char self[4096];
  const ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  return n > 0 ? std::string(self, static_cast<size_t>(n)) : "";
}

std::vector<std::string> RunArguments(const std::vector<std::string>& args,
                                      const std::string& dir, int index) {
  std::vector<std::string> out;
  for (const std::string& a : args)
    if (a.rfind("--runs=", 0) != 0 && a.rfind("--out=", 0) != 0)
      out.push_back(a);
  out.push_back("--out=" + dir + "/run-" + std::to_string(index));
  return out;
}

int RunIndependentProcesses(int argc, char** argv, const Options& o) {
  std::string dir = o.out;
  std::string why;
  if (!dir.empty()) {
    if (!ClaimDir(dir, &why))
      return FailWithError("--out=" + dir +
                           ": cannot be the run directory of --runs=" +
                           std::to_string(o.runs) + ": " + why);
  } else {
    const std::string base = DefaultRunDir();
    for (int i = 1;; ++i) {
      dir = i == 1 ? base : base + "-" + std::to_string(i);
      if (ClaimDir(dir, &why)) break;
      if (i >= 1000)
        return FailWithError("cannot create a run directory " + base + ": " +
                             why);
    }
  }
  std::string exe = SelfPath();
  if (exe.empty()) exe = argv[0];
  std::vector<std::string> args(argv + 1, argv + argc);

  struct sigaction sa {};
  sa.sa_handler = ForwardSignal;
  sigemptyset(&sa.sa_mask);
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) sigaction(sig, &sa, nullptr);

  // The N runs time the same work: the per-process calibrations (ThinkNs,
  // work_ns:cal's fault and model cost per page) are measured by the first
  // run and read by the others (shared_calibration.h). Processes calibrate
  // several per cent apart, which is not the measurement's run-to-run noise.
  std::string calibration;
  if (std::getenv(kSharedCalibrationEnv) == nullptr) {
    calibration = dir + "/calibration";
    if (mkdir(calibration.c_str(), 0700) == 0)
      setenv(kSharedCalibrationEnv, calibration.c_str(), 1);
    else
      calibration.clear();
  }
  nlohmann::json doc = {{"runs", o.runs},
                        {"dirs", nlohmann::json::array()},
                        {"exit_status", nlohmann::json::array()},
                        {"command_line", nlohmann::json(args)},
                        {"shared_calibration", calibration}};
  const std::string runs_json = dir + "/runs.json";
  if (!WriteFile(runs_json, doc.dump(1) + "\n"))
    return FailWithError("cannot write " + runs_json + ": " +
                         std::strerror(errno));
  std::printf(
      "lockline: %d independent runs into %s (each a whole run with the "
      "whole budget, one after the other)\n",
      o.runs, dir.c_str());
  int first_bad = 0;
  for (int k = 1; k <= o.runs && !g_stop; ++k) {
    std::printf("lockline: run %d of %d\n", k, o.runs);
    const int rc = RunChild(exe, RunArguments(args, dir, k));
    doc["dirs"].push_back("run-" + std::to_string(k));
    doc["exit_status"].push_back(rc);
    WriteFile(runs_json, doc.dump(1) + "\n");
    if (rc != 0 && first_bad == 0) first_bad = rc;
    // Exit 4 (a result could not be written) and 3 (a window never ended)
    // would repeat in every later run: stop here.
    if (rc == 3 || rc == 4) {
      std::printf(
          "lockline: run %d exited %d; the later runs are not started\n", k,
          rc);
      return rc;
    }
  }
  if (g_stop) {
    std::printf("lockline: interrupted; %s keeps the runs finished so far\n",
                dir.c_str());
    return first_bad ? first_bad : 128 + g_stop;
  }
  const std::string script = PlotsDir() + "/reproduce.py";
  const int rc = RunChild(kVerdictsPython, {script, dir});
  if (first_bad) return first_bad;
  return rc == 0 ? 0 : 1;
}

}  // namespace lockline
