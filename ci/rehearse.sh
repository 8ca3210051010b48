#!/usr/bin/env bash
# Rehearsal: runs lockline on an emulated multi-socket NUMA machine (QEMU, TCG) and checks that
# what only big machines exercise works: placement across packages and NUMA nodes, --mem
# policies, zones:per_numa, the c2c matrix beyond 2x2, plots and USL fits over real sweeps.
# Timing under TCG means nothing (16 vCPUs on 2 host CPUs, no PMU): every row is marked
# "emulated" and the checks are about function only.
#
# Usage: ci/rehearse.sh [TOPOLOGY]        (default 4s4n; an empty or second argument: exit 2)
#   4s4n       4 sockets x 4 cores, 4 NUMA nodes, distance matrix 10/20/30 (CI's rehearsal)
#   2s2n-smt2  2 sockets x 4 cores x 2 threads (SMT), 2 NUMA nodes
#   32         4 sockets x 8 cores, 4 NUMA nodes, no SMT: 32 vCPUs for a longer local run
# Environment (all optional):
#   BUILD            build directory with the lockline binary (default: build); it is built if absent
#   OUT              run directory on the host (default: results/rehearsal-TOPOLOGY-<UTC time>)
#   REHEARSAL_CAP    wall-clock cap, seconds, of the runs in the guest (default: 240; 900 for 32);
#                    split between them; QEMU itself is stopped at the cap + 120 s (guest clocks
#                    lag under TCG overcommit, so the guest's own timeouts run late)
#   REHEARSAL_NO_INSTALL=1  do not run ci/install_deps.sh (the packages are managed otherwise)
#   KERNEL           guest kernel (default: the newest /boot/vmlinuz-*: Debian's linux-image-amd64)
# Leaves in OUT: lockline.json (the main run, emulated), mem-*/lockline.json (the --mem runs),
# c2c/lockline.json and c2c/plots/ (the core-to-core matrix, run on its own),
# console.log (the guest's serial console), plots/, report.html, rehearsal.json (topology, wall
# times, exit statuses). Exit 0 when the guest ran and the result came back with a good
# checksum and plots and report were written; 3 when the guest did not reach init on two boots
# (QEMU or the host, before lockline ran: its console's end is printed); 2 for bad arguments;
# 1 for everything else. The checks themselves are tests/python/test_rehearsal.py
# (LOCKLINE_REHEARSAL_DIR=OUT).
# Results come back checksummed on the guest's ttyS1; why, and the guest: docs/rehearsal.md.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
if (($# > 1)); then
  echo "rehearse.sh: error: $# arguments ('$*'); accepted: one TOPOLOGY (4s4n, 2s2n-smt2, 32)" \
       "or none" >&2
  exit 2
fi
if (($# == 1)) && [[ -z "$1" ]]; then
  echo "rehearse.sh: error: empty TOPOLOGY argument; accepted: 4s4n, 2s2n-smt2, 32 (or no" \
       "argument for 4s4n)" >&2
  exit 2
fi
topology=${1:-4s4n}
PYTHON=/usr/bin/python3
BUILD=${BUILD:-$root/build}
# Relative BUILD / OUT are taken from the repository root (the script changes directory).
[[ "$BUILD" == /* ]] || BUILD=$root/$BUILD
LOCKLINE=$BUILD/lockline

# ---- topology -> QEMU machine, and the lockline runs inside ----------------------------------
# numa_args: -numa options; smp: -smp value; mem_mb: guest RAM (split evenly over nodes).
# The distance matrix (4 nodes): 10 local, 20 to the neighbour, 30 across (a ring of 4 packages).
numa_nodes() {  # NODES VCPUS_PER_NODE MB_PER_NODE
  local n=$1 per=$2 mb=$3 i j d
  mem_mb=$((n * mb)) nodes=$n
  for ((i = 0; i < n; i++)); do
    numa_args+=(-object "memory-backend-ram,id=m$i,size=${mb}M"
                -numa "node,nodeid=$i,cpus=$((i * per))-$((i * per + per - 1)),memdev=m$i")
  done
  for ((i = 0; i < n; i++)); do
    for ((j = 0; j < n; j++)); do
      ((i == j)) && continue
      d=$(( (i - j + n) % n )); ((d > n / 2)) && d=$((n - d))
      numa_args+=(-numa "dist,src=$i,dst=$j,val=$((10 + 10 * d))")
    done
  done
}
numa_args=()
case "$topology" in
  4s4n)
    smp=16,sockets=4,cores=4,threads=1; numa_nodes 4 4 512; cores_per_node=4; c2c_pus=0-7; default_cap=240 ;;
  2s2n-smt2)
    smp=16,sockets=2,cores=4,threads=2; numa_nodes 2 8 1024; cores_per_node=4; c2c_pus=0-3,8-11; default_cap=240 ;;
  32)
    smp=32,sockets=4,cores=8,threads=1; numa_nodes 4 8 768; cores_per_node=8; c2c_pus=0-31; default_cap=900 ;;
  -h|--help) sed -n '2,22p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
  *) echo "rehearse.sh: error: unknown topology '$topology' (accepted: 4s4n, 2s2n-smt2, 32)" >&2
     exit 2 ;;
esac
CAP=${REHEARSAL_CAP:-$default_cap}
if ! [[ "$CAP" =~ ^[0-9]+$ ]] || ((CAP < 30)); then
  echo "rehearse.sh: error: REHEARSAL_CAP='$CAP' (accepted: whole seconds >= 30)" >&2
  exit 2
fi
OUT=${OUT:-$root/results/rehearsal-$topology-$(date -u +%Y%m%dT%H%M%SZ)}
[[ "$OUT" == /* ]] || OUT=$root/$OUT
if [[ -e "$OUT/lockline.json" ]]; then
  echo "rehearse.sh: error: $OUT already holds a run (choose another OUT)" >&2
  exit 2
fi

# The runs inside the guest: NAME SECONDS LOCKLINE_ARGS... (run NAME lands in OUT/NAME/, "main"
# in OUT itself), each under its own busybox timeout; what each exercises and why fair spinlocks
# and all-PU c2c are left out: docs/rehearsal.md "What runs inside".
main_filter="^(calibration/op:|locks/lock:(pthread_mutex/cs:0/stats:on/|tas/cs:0/stats:on/threads:(1|2|4|8)$)|zone_lock/layout:lock_before_free_area/lock:pthread_mutex/pcp_batch:0/line:64/config:[^/]+/zones:[^/]+/work_ns:0/threads:|pagevec/mode:deferred/slots:15/offset:0/policy:fixed/lock:(pthread_mutex/work_ns:0/zones:1|ttas/work_ns:cal/zones:per_numa)/kernel:2.6.9/release:unmap/)"
mem_filter="^pagevec/mode:deferred/slots:15/offset:0/policy:fixed/lock:pthread_mutex/work_ns:0/zones:1/kernel:2.6.9/"
common=(--emulated --benchmark_repetitions=1 --events=none)
runs="main $((CAP * 48 / 100)) --full ${common[*]} --window=2ms --benchmark_filter=$main_filter"
for mem in node:$((nodes / 2)) interleave local; do
  runs+=$'\n'"mem-${mem%%:*} $((CAP * 5 / 100)) --full ${common[*]} --window=2ms --mem=$mem --threads=1,$cores_per_node --benchmark_filter=$mem_filter"
done
runs+=$'\n'"c2c $((CAP * 37 / 100)) --quick ${common[*]} --window=1ms --benchmark_filter=^calibration/c2c:"

# ---- dependencies and the binary -------------------------------------------------------------
if [[ "${REHEARSAL_NO_INSTALL:-0}" != 1 ]]; then
  LOCKLINE_WITH_REHEARSAL=1 timeout 900 bash ci/install_deps.sh
fi
if [[ ! -x "$LOCKLINE" ]]; then
  timeout 1200 bash ci/configure.sh "$BUILD" >/dev/null
  timeout 1800 cmake --build "$BUILD" -j"$(nproc)" --target lockline
fi
KERNEL=${KERNEL:-$(ls -1 /boot/vmlinuz-* 2>/dev/null | sort -V | tail -n1)}
if [[ -z "$KERNEL" || ! -r "$KERNEL" ]]; then
  echo "rehearse.sh: error: no readable guest kernel (/boot/vmlinuz-*: Debian's" \
       "linux-image-amd64; or set KERNEL)" >&2
  exit 2
fi
BUSYBOX=/bin/busybox
if ! file -L "$BUSYBOX" 2>/dev/null | grep -q 'statically linked' &&
   ! ldd "$BUSYBOX" 2>&1 | grep -q 'not a dynamic executable'; then
  echo "rehearse.sh: error: $BUSYBOX is not static (install busybox-static)" >&2
  exit 2
fi
QEMU=$(command -v qemu-system-x86_64) || {
  echo "rehearse.sh: error: qemu-system-x86_64 not found (qemu-system-x86)" >&2; exit 2; }

# ---- initramfs ---------------------------------------------------------------------------------
work=$BUILD/rehearsal-$topology
rm -rf "$work"
mkdir -p "$work/root"/{bin,sbin,proc,sys,dev,tmp,run,etc} "$OUT"
t0=$(date +%s)
initrd=$work/initramfs.cpio.gz
(
  cd "$work/root"
  cp "$BUSYBOX" bin/busybox
  # Stripped: the debug info is 90 % of the binary and only slows the boot.
  strip -o lockline "$LOCKLINE"
  # The libraries the dynamic loader resolves for lockline, and the loader, at their paths.
  ldd "$LOCKLINE" | awk '/=> \//{print $3} /^[[:space:]]*\//{print $1}' | sort -u |
    while read -r lib; do
      mkdir -p ".$(dirname "$lib")"
      cp -L "$lib" ".$lib"
    done
  printf '%s\n' "$runs" >rehearsal.runs
  echo "$topology" >rehearsal.topology
  echo "$c2c_pus" >rehearsal.c2c_pus
  cat >init <<'INIT'
#!/bin/busybox sh
/bin/busybox --install -s /bin
export PATH=/bin:/sbin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
mount -t tmpfs tmp /tmp
hostname "rehearsal-$(cat /rehearsal.topology)"
echo "rehearsal: guest up: $(nproc) CPUs, $(ls -d /sys/devices/system/node/node* | wc -l) NUMA nodes, hypervisor sig $(grep -c hypervisor /proc/cpuinfo) cpus flagged"
mkdir -p /run/out
cd /run/out
: >status
stty -F /dev/ttyS1 raw -echo 2>/dev/null
# Sends files of /run/out as one checksummed block on ttyS1, right after each run.
send() {
  name=$1; shift
  tar czf "/run/$name.tgz" -C /run/out "$@" 2>/dev/null
  {
    echo "LOCKLINE-BEGIN $name $(wc -c <"/run/$name.tgz") $(sha256sum "/run/$name.tgz" | cut -d' ' -f1)"
    base64 "/run/$name.tgz"
    echo "LOCKLINE-END $name"
  } >/dev/ttyS1
}
while read -r name cap args; do
  [ -n "$name" ] || continue
  if [ "$name" = main ]; then dir=/run/out/main; else dir=/run/out/$name; fi
  echo "rehearsal: run $name (cap ${cap}s): lockline $args --out=$dir"
  start=$(date +%s)
  # shellcheck disable=SC2086
  if [ "$name" = c2c ]; then
    # A cgroup v2 cpuset, not taskset: lockline's usable PUs are hwloc's allowed cpuset
    # (cgroups), not the inherited affinity mask.
    mkdir -p /sys/fs/cgroup
    mount -t cgroup2 none /sys/fs/cgroup 2>/dev/null
    echo +cpuset >/sys/fs/cgroup/cgroup.subtree_control
    mkdir -p /sys/fs/cgroup/c2c
    cat /rehearsal.c2c_pus >/sys/fs/cgroup/c2c/cpuset.cpus
    echo $$ >/sys/fs/cgroup/c2c/cgroup.procs
    echo "rehearsal: c2c in cpuset $(cat /sys/fs/cgroup/c2c/cpuset.cpus.effective)"
  fi
  ( timeout -s TERM "$cap" /lockline $args --out="$dir" </dev/null 2>&1; echo "rc=$?" >"/run/rc.$name" ) |
    tee "/run/out/$name.log"
  echo "$name $(cat "/run/rc.$name") seconds=$(( $(date +%s) - start ))" >>status
  send "$name" "$name" "$name.log" status
done </rehearsal.runs
cat status
sync
echo "rehearsal: result sent; powering off"
poweroff -f
INIT
  chmod +x init
  find . -print0 | timeout 120 cpio --null -o -H newc --quiet | gzip -1 >"$initrd"
)
echo "rehearse.sh: initramfs $(du -h "$initrd" | cut -f1) ($(($(date +%s) - t0)) s)"

# ---- the guest ---------------------------------------------------------------------------------
# loglevel=6: a guest that hangs while booting shows where in console.log.
append="console=ttyS0 panic=-1 nowatchdog nmi_watchdog=0 nosoftlockup"
append+=" rcupdate.rcu_cpu_stall_suppress=1 rcupdate.rcu_cpu_stall_timeout=300"
append+=" rcupdate.rcu_task_stall_timeout=0 tsc=reliable clocksource=tsc"
append+=" hung_task_panic=0 loglevel=6"
# lpj: 2 GHz at Debian's HZ=250, so no vCPU runs calibrate_delay() (fails under overcommit).
append+=" lpj=8000000"
data=$work/serial1.txt
console=$OUT/console.log
# A boot that has not reached init ("rehearsal: guest up") in BOOT_TIMEOUT s is tried once more.
BOOT_TIMEOUT=${REHEARSAL_BOOT_TIMEOUT:-150}
# `timeout` puts QEMU in a process group of its own, out of reach of a Ctrl-C or a TERM to this
# script: on INT / TERM / HUP / exit, stop it (timeout passes the TERM on).
qemu_pid=
stop_guest() {
  if [[ -n "$qemu_pid" ]] && kill -0 "$qemu_pid" 2>/dev/null; then
    kill -TERM "$qemu_pid" 2>/dev/null
    wait "$qemu_pid" 2>/dev/null
  fi
  qemu_pid=
}
trap 'echo "rehearse.sh: interrupted; stopping the guest" >&2; stop_guest; exit 130' INT
trap 'echo "rehearse.sh: terminated; stopping the guest" >&2; stop_guest; exit 143' TERM
trap 'stop_guest; exit 129' HUP
trap stop_guest EXIT
host_facts() {  # one line: what the host gives the 16 vCPU threads (for a slow or stuck guest)
  local cg quota=none pids=none
  cg=$(awk -F: '$1 == "0" {print $3}' /proc/self/cgroup 2>/dev/null)
  [[ -r /sys/fs/cgroup$cg/cpu.max ]] && quota=$(cat "/sys/fs/cgroup$cg/cpu.max")
  [[ -r /sys/fs/cgroup$cg/pids.max ]] && pids=$(cat "/sys/fs/cgroup$cg/pids.max")
  echo "rehearse.sh: host: $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)," \
       "MemAvailable $(awk '/MemAvailable/ {print int($2 / 1024)}' /proc/meminfo) MiB," \
       "cgroup cpu.max '$quota', pids.max '$pids'"
}
# One boot under the overall cap, shown as it comes (not the kernel's "[ seconds ]" lines);
# returns 1 (QEMU stopped) when the guest does not come up in BOOT_TIMEOUT s.
boot_guest() {
  rm -f "$data"
  : >"$console"
  timeout -k 10 $((CAP + 120)) "$QEMU" -accel tcg,thread=multi -machine q35 -cpu max \
    -smp "$smp" -m "${mem_mb}M" \
    "${numa_args[@]}" \
    -kernel "$KERNEL" -initrd "$initrd" -append "$append" \
    -nic none -display none -monitor none -no-reboot \
    -serial "file:$console" -serial "file:$data" </dev/null &
  local pid=$! waited=0
  qemu_pid=$pid
  while ! grep -q '^rehearsal: guest up' "$console"; do
    if ! kill -0 "$pid" 2>/dev/null || ((waited >= BOOT_TIMEOUT)); then
      echo "rehearse.sh: the guest did not reach init (${waited} s); its console ends:" >&2
      tail -n 30 "$console" | sed 's/^/  | /' >&2
      kill "$pid" 2>/dev/null
      wait "$pid"
      qemu_rc=$?
      qemu_pid=
      return 1
    fi
    sleep 2
    waited=$((waited + 2))
  done
  # In the background, waited for with `wait`: bash runs a trap only once a foreground
  # pipeline ends, but interrupts `wait` at once.
  { tail -n +1 -f --pid="$pid" "$console" | grep --line-buffered -av '^\[ *[0-9]*\.[0-9]*\]' ||
      true; } &
  local follower=$!
  wait "$pid"
  qemu_rc=$?
  qemu_pid=
  wait "$follower" 2>/dev/null
  return 0
}
host_facts
t1=$(date +%s)
qemu_rc=0
set +e
if ! boot_guest; then
  echo "rehearse.sh: booting again" >&2
  host_facts
  t1=$(date +%s)
  if ! boot_guest; then
    echo "rehearse.sh: error: the guest did not reach init twice; kernel" \
         "$KERNEL, console: $console" >&2
    exit 3  # the emulated machine, not lockline: ci/test.sh reports it as not run
  fi
fi
set -e
guest_s=$(($(date +%s) - t1))
echo "rehearse.sh: guest ran ${guest_s} s (QEMU exit $qemu_rc)"
if [[ ! -s "$data" ]] || ! grep -q '^LOCKLINE-BEGIN main ' "$data"; then
  echo "rehearse.sh: the guest sent no main block; its console ends:" >&2
  grep -av '^\[ *[0-9]*\.[0-9]*\]' "$console" | tail -n 15 | sed 's/^/  | /' >&2
  tail -n 15 "$console" | sed 's/^/  | /' >&2
fi

# ---- the result: check size and checksum, unpack ----------------------------------------------
mkdir -p "$work/out"
"$PYTHON" - "$data" "$work/out" <<'PY'
"""Unpacks every complete block the guest sent on ttyS1 whose size and SHA-256 match."""
import base64, hashlib, io, sys, tarfile
data, out = sys.argv[1:]
lines = open(data, "rb").read().replace(b"\r", b"").decode("ascii", "replace").splitlines()
i, good = 0, 0
while i < len(lines):
    head = lines[i].split()
    i += 1
    if len(head) != 4 or head[0] != "LOCKLINE-BEGIN":
        continue
    name, size, sha = head[1], int(head[2]), head[3]
    body = []
    while i < len(lines) and not lines[i].startswith("LOCKLINE-"):
        body.append(lines[i])
        i += 1
    if i >= len(lines) or lines[i] != f"LOCKLINE-END {name}":
        print(f"rehearse.sh: block {name} incomplete (the guest was stopped while sending)")
        continue
    blob = base64.b64decode("".join(body))
    if len(blob) != size or hashlib.sha256(blob).hexdigest() != sha:
        print(f"rehearse.sh: block {name} garbled ({len(blob)} bytes, sent {size}); dropped")
        continue
    tarfile.open(fileobj=io.BytesIO(blob), mode="r:gz").extractall(out)
    good += 1
print(f"rehearse.sh: {good} result block(s) received intact")
PY
if [[ ! -s "$work/out/main/lockline.json" ]]; then
  echo "rehearse.sh: error: the main run wrote no lockline.json (see $OUT/main.log)" >&2
  cp "$work/out"/*.log "$work/out/status" "$OUT/" 2>/dev/null || true
  exit 1
fi
cp "$work/out/main/lockline.json" "$OUT/lockline.json"
for d in "$work/out"/*/; do
  name=$(basename "$d")
  [[ "$name" == main || ! -s "$d/lockline.json" ]] && continue
  mkdir -p "$OUT/$name" && cp "$d/lockline.json" "$OUT/$name/"
done
cp "$work/out"/*.log "$work/out/status" "$OUT/" 2>/dev/null || true

# ---- plots and report on the host ----------------------------------------------------------------
t2=$(date +%s)
timeout 300 "$PYTHON" plots/plot.py "$OUT" -o "$OUT/plots"
timeout 300 "$PYTHON" plots/report.py "$OUT"
if [[ -s "$OUT/c2c/lockline.json" ]]; then  # the c2c matrix: its own run, its own figure
  timeout 300 "$PYTHON" plots/plot.py "$OUT/c2c" -o "$OUT/c2c/plots"
fi
host_s=$(($(date +%s) - t2))
"$PYTHON" - "$OUT" "$topology" "$smp" "$guest_s" "$host_s" "$qemu_rc" <<'PY'
"""Writes OUT/rehearsal.json: what was emulated, how long each part took, each run's status."""
import json, sys
out, topology, smp, guest_s, host_s, qemu_rc = sys.argv[1:]
runs = {}
try:
    for line in open(f"{out}/status"):
        name, rc, secs = line.split()
        runs[name] = {"exit": int(rc.split("=")[1]), "seconds": int(secs.split("=")[1])}
except OSError:
    pass
json.dump({"emulated": True, "topology": topology, "smp": smp, "guest_wall_s": int(guest_s),
           "host_plots_report_s": int(host_s), "qemu_exit": int(qemu_rc), "runs": runs},
          open(f"{out}/rehearsal.json", "w"), indent=1)
PY
echo "rehearse.sh: emulated run directory $OUT (report: $OUT/report.html);" \
     "check it: LOCKLINE_REHEARSAL_DIR=$OUT $PYTHON -m pytest -q tests/python/test_rehearsal.py"
