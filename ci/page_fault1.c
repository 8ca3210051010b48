/*
 * A minimal equivalent of will-it-scale's page_fault1 for ci/side_by_side.sh
 * (will-it-scale is not packaged; docs/kernel-ab.md), following its
 * tests/page_fault1.c loop: mmap 128 MiB private anonymous, write one byte per
 * page counting iterations, munmap; and main.c's shape: N tasks as threads or
 * processes, task i bound to CPU i, counters in their own cache lines.
 * Not will-it-scale's: one summary line, -n (MADV_NOHUGEPAGE), -p PAGES and
 * pages per CPU-second.
 *
 * Usage: page_fault1 -t TASKS -m threads|processes -s SECONDS [-n] [-p PAGES]
 * Output: "pages_per_s=<rate> tasks=<n> mode=<m> seconds=<s> pages_per_cpu_s=<rate>"
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* will-it-scale's 128 MiB; -p PAGES sets another size (side_by_side.sh matches
   kernel_zone's batch with it). */
static unsigned long memsize = 128UL * 1024 * 1024;

struct slot {
  volatile unsigned long long iterations;
  /* Every 4096 pages: the task's CPU time and iterations (pages per CPU-s). */
  volatile unsigned long long cpu_ns, iterations_at_cpu;
  char pad[128 - 3 * sizeof(unsigned long long)];
};

static struct slot *slots;
static int nohuge;
static volatile int *stop_flag;

static void bind_to(int index) {
  cpu_set_t allowed, one;
  if (sched_getaffinity(0, sizeof allowed, &allowed) != 0) return;
  int n = CPU_COUNT(&allowed), want = index % (n > 0 ? n : 1), seen = 0;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (!CPU_ISSET(c, &allowed)) continue;
    if (seen++ == want) {
      CPU_ZERO(&one);
      CPU_SET(c, &one);
      sched_setaffinity(0, sizeof one, &one);
      return;
    }
  }
}

static unsigned long long thread_cpu_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (unsigned long long)ts.tv_sec * 1000000000ULL + ts.tv_nsec;
}

static void testcase(struct slot *slot) {
  unsigned long long volatile *iterations = &slot->iterations;
  long pgsize = sysconf(_SC_PAGESIZE);
  while (!*stop_flag) {
    char *c = mmap(NULL, memsize, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (c == MAP_FAILED) {
      perror("mmap");
      exit(1);
    }
    if (nohuge) madvise(c, memsize, MADV_NOHUGEPAGE);
    for (unsigned long i = 0; i < memsize; i += pgsize) {
      c[i] = 0;
      (*iterations)++;
      if ((*iterations & 4095) == 0) {
        slot->cpu_ns = thread_cpu_ns();
        slot->iterations_at_cpu = *iterations;
      }
    }
    munmap(c, memsize);
  }
}

static void *thread_main(void *arg) {
  int index = (int)(intptr_t)arg;
  bind_to(index);
  testcase(&slots[index]);
  return NULL;
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
  int tasks = 1, opt;
  double seconds = 5;
  const char *mode = "threads";
  while ((opt = getopt(argc, argv, "t:m:s:np:")) != -1) {
    switch (opt) {
      case 't': tasks = atoi(optarg); break;
      case 'm': mode = optarg; break;
      case 's': seconds = atof(optarg); break;
      case 'n': nohuge = 1; break;
      case 'p': memsize = strtoul(optarg, NULL, 10) * 4096UL; break;
      default:
        fprintf(stderr,
                "usage: %s -t TASKS -m threads|processes -s SECONDS [-n] [-p PAGES]\n",
                argv[0]);
        return 2;
    }
  }
  int processes = strcmp(mode, "processes") == 0;
  if (tasks < 1 || seconds <= 0 || memsize == 0 ||
      (!processes && strcmp(mode, "threads"))) {
    fprintf(stderr, "page_fault1: bad -t, -m, -s or -p\n");
    return 2;
  }
  /* Counters and the stop flag in shared memory, as will-it-scale's main.c
     does, so processes report through it too. */
  void *shm = mmap(NULL, (tasks + 1) * sizeof(struct slot),
                   PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (shm == MAP_FAILED) return 1;
  slots = shm;
  stop_flag = (volatile int *)&slots[tasks];
  pthread_t *th = calloc(tasks, sizeof *th);
  pid_t *pids = calloc(tasks, sizeof *pids);
  for (int i = 0; i < tasks; ++i) {
    if (processes) {
      pid_t p = fork();
      if (p == 0) {
        bind_to(i);
        testcase(&slots[i]);
        _exit(0);
      }
      pids[i] = p;
    } else {
      pthread_create(&th[i], NULL, thread_main, (void *)(intptr_t)i);
    }
  }
  /* Warm-up second (will-it-scale discards its first samples too), then
     the measured interval: the parent sleeps through it. */
  sleep(1);
  unsigned long long a = 0, b = 0, ca = 0, cb = 0, ia = 0, ib = 0;
  for (int i = 0; i < tasks; ++i) {
    a += slots[i].iterations;
    ca += slots[i].cpu_ns;
    ia += slots[i].iterations_at_cpu;
  }
  double t0 = now_s();
  struct timespec d = {(time_t)seconds,
                       (long)((seconds - (time_t)seconds) * 1e9)};
  while (nanosleep(&d, &d) != 0 && errno == EINTR) {
  }
  for (int i = 0; i < tasks; ++i) {
    b += slots[i].iterations;
    cb += slots[i].cpu_ns;
    ib += slots[i].iterations_at_cpu;
  }
  double t1 = now_s();
  *stop_flag = 1;
  for (int i = 0; i < tasks; ++i) {
    if (processes)
      waitpid(pids[i], NULL, 0);
    else
      pthread_join(th[i], NULL);
  }
  printf("pages_per_s=%.0f tasks=%d mode=%s seconds=%.3f pages_per_cpu_s=%.0f\n",
         (double)(b - a) / (t1 - t0), tasks, mode, t1 - t0,
         cb > ca ? (double)(ib - ia) / ((cb - ca) * 1e-9) : 0.0);
  return 0;
}
