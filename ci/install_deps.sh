#!/usr/bin/env bash
# Installs, with apt-get, whatever lockline needs that this Debian 12 machine lacks. Idempotent:
# a machine that has everything makes no network call. Must run as root (or with sudo on PATH).
set -euo pipefail
pkgs=(
  build-essential cmake pkg-config git    # toolchain; git for the commit in provenance
  ninja-build                              # builds the first time faster than Make
  libbenchmark-dev                         # Google Benchmark 1.7.1: registration, reporting
  libhwloc-dev hwloc                       # topology, thread and memory binding; lstopo for users
  libpfm4-dev                              # perf event encoding
  libgtest-dev                             # C++ unit tests
  nlohmann-json3-dev                       # JSON for result files
  python3-matplotlib python3-numpy python3-scipy python3-pytest  # plots, fits, report, compare
)
if [[ "${LOCKLINE_WITH_TEST_EXTRAS:-0}" == 1 ]]; then
  pkgs+=(g++-aarch64-linux-gnu   # cross-compiles the lock headers: keeps the portable path real
         chromium)               # headless check that report.html renders
fi
if [[ "${LOCKLINE_WITH_REHEARSAL:-0}" == 1 ]]; then
  pkgs+=(qemu-system-x86     # the emulated multi-socket NUMA guest of ci/rehearse.sh (TCG)
         linux-image-amd64   # its kernel (/boot/vmlinuz-*)
         busybox-static      # its shell and tools in the initramfs
         cpio)               # packs the initramfs
fi
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
((${#missing[@]})) || exit 0
echo "lockline: installing ${missing[*]}" >&2
SUDO=""
if [[ $(id -u) != 0 ]]; then SUDO=sudo; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
