/* relax-mlir's CPU run-time library: matrix products on a contention-aware thread pool.

   `relax_rt_sgemm` has CBLAS sgemm's signature (row-major only) and is what compiled modules call
   for relax.call_library products (backend/cpu_library.py). It splits a large product into chunks
   of C (columns when B is the larger operand, else rows) and runs each chunk as a one-thread BLAS
   call (sgemv when a side is 1: OpenBLAS's sgemm at one row reads B at a fifth of sgemv's rate).

   Why not OpenBLAS's own threads (measured on a shared 2-core machine, runtime/library.py): its
   threads split a product statically, so a call ends when its slowest thread ends, and a thread
   whose core is taken by another process waits for a scheduler tick: 10-250x slower calls under
   load. Here:
   - chunks are claimed dynamically (one atomic word: job generation and next chunk), and the
     calling thread claims too: a worker that is not running never holds up a product, the caller
     simply does its chunks;
   - the one remaining stall is a worker preempted in the middle of a chunk it claimed. The caller
     measures how long it waited for the others after its last chunk; a wait far above a chunk's
     time is a stall, after which products run on the calling thread alone for a back-off period
     (doubling per stall, up to a second; halving after clean parallel products). A worker that
     repeatedly shows up too late to claim anything counts the same way (its core is busy);
   - workers spin briefly between products (a decode step's products follow each other within
     microseconds), then sleep on a futex.
   Chunks are never executed twice: a worker still inside a chunk may read A and B, which the
   caller's caller may free once the product returns, so the caller always waits for claimed
   chunks. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#ifdef RELAX_RT_BLAS_PREFIX
#define BLAS_NAME2(p, n) p##n
#define BLAS_NAME(p, n) BLAS_NAME2(p, n)
#else
#define RELAX_RT_BLAS_PREFIX scipy_
#define BLAS_NAME2(p, n) p##n
#define BLAS_NAME(p, n) BLAS_NAME2(p, n)
#endif
#define CBLAS_SGEMM BLAS_NAME(RELAX_RT_BLAS_PREFIX, cblas_sgemm)
#define CBLAS_SGEMV BLAS_NAME(RELAX_RT_BLAS_PREFIX, cblas_sgemv)

void CBLAS_SGEMM(int order, int ta, int tb, int m, int n, int k, float alpha, const float *a, int lda,
                 const float *b, int ldb, float beta, float *c, int ldc);
void CBLAS_SGEMV(int order, int trans, int m, int n, float alpha, const float *a, int lda, const float *x,
                 int incx, float beta, float *y, int incy);
/* OpenBLAS's own thread count: 1, always (every chunk is a one-thread call). Left at OpenBLAS's
   default (the cores), each chunk call would start OpenBLAS's threads, and concurrent multi-threaded
   calls run one at a time (OpenBLAS serializes them): a 512x2048x512 product split in two took
   8.8 ms instead of 4.3 in a process that had not set it (an exported artifact's). Weak: a BLAS
   without it is one-threaded already. */
#define BLAS_SET_THREADS BLAS_NAME(RELAX_RT_BLAS_PREFIX, openblas_set_num_threads)
void BLAS_SET_THREADS(int threads) __attribute__((weak));

enum { ROW_MAJOR = 101, NO_TRANS = 111, TRANS = 112 };
enum { MAX_THREADS = 16 };

/* Tunables (relax_rt_configure). */
static int max_threads = 1;            /* threads a product may use, the caller included */
static long parallel_min = 1L << 20;   /* multiply-adds from which a product is split */
static long chunk_min = 1L << 18;      /* fewest multiply-adds per chunk */
static long spin_ns = 100000;          /* a worker spins this long for the next product */
static long backoff_min_ns = 20000000; /* first back-off after a stall: 20 ms */
static long backoff_max_ns = 2000000000;
static int adaptive = 1;               /* 0: split whenever allowed (tests), ignoring contention */

/* Statistics (relax_rt_stats). */
static atomic_long st_parallel, st_serial, st_stalls, st_absent, st_worker_chunks, st_chunks, st_wait_ns;
static atomic_long st_tasks, st_tasks_inline, st_tasks_by_workers, st_busy;

static long now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1000000000L + t.tv_nsec;
}

static void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

/* One product in flight at a time (products are issued by one host program at a time per
   thread; a second caller thread while one runs takes the serial path). */
struct job {
  int kind; /* 0: sgemm chunk over rows or columns; 1: sgemv */
  int split_rows;
  int ta, tb, m, n, k, lda, ldb, ldc, incx, incy;
  float alpha, beta;
  const float *a, *b;
  float *c;
  int trans_v; /* sgemv: the CBLAS transpose of the chunked matrix */
  long dim, step; /* split dimension and chunk size along it */
  long n_chunks;
  unsigned fp; /* the caller's FP control bits */
};

static struct job job;
/* generation << 32 | next chunk (0xffffffff: closed). Closed from the start: a worker woken for a
   task claimed chunk 0 of the open generation 0 and ran the first one-chunk product a second time,
   unsynchronized, beside its caller (wrong f16 / bf16 products, probe s22/big F1). */
static _Atomic uint64_t claim_word = 0xffffffffu;
static atomic_uint pub_gen;           /* futex word: the generation of the last published job */
static atomic_long done_chunks;
static atomic_int sleepers;
static atomic_int busy;               /* a product is in flight (the pool has one job slot) */
static pthread_mutex_t start_lock = PTHREAD_MUTEX_INITIALIZER;
static int started;                   /* workers running in this process */
/* Contention state: a product's caller or a task's awaiter updates it (races only blur the
   heuristic). */
static _Atomic long serial_until, backoff;
static _Atomic int absent_run;

static void run_chunk(const struct job *j, long i) {
  long lo = i * j->step, len = j->dim - lo < j->step ? j->dim - lo : j->step;
  if (j->kind == 1) {
    /* y[lo:lo+len] = alpha * op(mat)[lo:lo+len, :] x + beta * y[lo:lo+len] */
    const float *mat = j->a;
    long off = j->trans_v == NO_TRANS ? lo * (long)j->lda : lo;
    int rows = j->trans_v == NO_TRANS ? (int)len : j->m, cols = j->trans_v == NO_TRANS ? j->n : (int)len;
    CBLAS_SGEMV(ROW_MAJOR, j->trans_v, rows, cols, j->alpha, mat + off, j->lda, j->b, j->incx, j->beta,
                j->c + lo * (long)j->incy, j->incy);
    return;
  }
  if (j->split_rows) {
    const float *a = j->a + (j->ta == NO_TRANS ? lo * (long)j->lda : lo);
    CBLAS_SGEMM(ROW_MAJOR, j->ta, j->tb, (int)len, j->n, j->k, j->alpha, a, j->lda, j->b, j->ldb, j->beta,
                j->c + lo * (long)j->ldc, j->ldc);
  } else {
    const float *b = j->b + (j->tb == NO_TRANS ? lo : lo * (long)j->ldb);
    CBLAS_SGEMM(ROW_MAJOR, j->ta, j->tb, j->m, (int)len, j->k, j->alpha, j->a, j->lda, b, j->ldb, j->beta,
                j->c + lo, j->ldc);
  }
}

/* Claim the next chunk of generation `gen`; -1 when there is none. */
static long claim(uint32_t gen) {
  uint64_t w = atomic_load_explicit(&claim_word, memory_order_acquire);
  for (;;) {
    if ((uint32_t)(w >> 32) != gen) return -1;
    uint32_t next = (uint32_t)w;
    /* n_chunks is read after the word: the job cannot change before the word is closed. */
    if (next == 0xffffffffu || (long)next >= job.n_chunks) return -1;
    if (atomic_compare_exchange_weak_explicit(&claim_word, &w, w + 1, memory_order_acq_rel,
                                              memory_order_acquire))
      return (long)next;
  }
}

static void futex_wait(atomic_uint *addr, unsigned val) {
  syscall(SYS_futex, addr, FUTEX_WAIT_PRIVATE, val, NULL, NULL, 0);
}

static void futex_wake_all(atomic_uint *addr) {
  syscall(SYS_futex, addr, FUTEX_WAKE_PRIVATE, 0x7fffffff, NULL, NULL, 0);
}

static int run_one_task(void);

/* The floating-point control bits (x86 MXCSR: rounding, exception masks, FTZ and DAZ; not the
   sticky status flags) of the thread that submits a product or a task travel with it: a worker runs
   chunks and tasks as their caller would (the caller's own mode, or denormals flushed to zero with
   RELAX_MLIR_DENORMALS=flush: backend/cpu_fpmode.py), so a threaded build computes as the
   one-thread build. */
#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>
#define FP_CONTROL 0xffc0u
static unsigned fp_control(void) { return _mm_getcsr() & FP_CONTROL; }
static void fp_adopt(unsigned want) {
  unsigned csr = _mm_getcsr();
  if ((csr & FP_CONTROL) != want) _mm_setcsr((csr & ~FP_CONTROL) | want);
}
#else
static unsigned fp_control(void) { return 0; }
static void fp_adopt(unsigned want) { (void)want; }
#endif

/* New work (a product's chunks or a task): wake the sleeping workers. */
static void publish(void) {
  atomic_fetch_add(&pub_gen, 1);
  if (atomic_load(&sleepers) > 0) futex_wake_all(&pub_gen);
}

static void *worker_main(void *arg) {
  (void)arg;
  unsigned seen = atomic_load(&pub_gen);
  for (;;) {
    if (run_one_task()) {
      atomic_fetch_add_explicit(&st_tasks_by_workers, 1, memory_order_relaxed);
      continue;
    }
    unsigned g = atomic_load_explicit(&pub_gen, memory_order_acquire);
    if (g == seen) {
      /* Spin briefly, then yield while waiting (a caller sharing this core gets it back). */
      long t = now_ns(), until = t + spin_ns, yield_after = t + 10000;
      while ((g = atomic_load_explicit(&pub_gen, memory_order_acquire)) == seen && (t = now_ns()) < until) {
        if (t < yield_after)
          for (int i = 0; i < 64; i++) cpu_relax();
        else
          sched_yield();
      }
      if (g == seen) {
        atomic_fetch_add(&sleepers, 1);
        if (atomic_load(&pub_gen) == seen) futex_wait(&pub_gen, seen);
        atomic_fetch_sub(&sleepers, 1);
        continue;
      }
    }
    seen = g;
    uint32_t job_gen = (uint32_t)(atomic_load_explicit(&claim_word, memory_order_acquire) >> 32);
    long i;
    fp_adopt(job.fp);
    while ((i = claim(job_gen)) >= 0) {
      run_chunk(&job, i);
      atomic_fetch_add_explicit(&st_worker_chunks, 1, memory_order_relaxed);
      atomic_fetch_add_explicit(&done_chunks, 1, memory_order_release);
    }
  }
  return NULL;
}

static void reset_tasks(void);

static void after_fork_child(void) {
  /* The workers do not exist in a forked child: start them again at its first product. */
  started = 0;
  atomic_store(&claim_word, (atomic_load(&claim_word) & ~(uint64_t)0xffffffffu) | 0xffffffffu);
  atomic_store(&busy, 0);
  reset_tasks();
  atomic_store(&sleepers, 0);
  pthread_mutex_init(&start_lock, NULL);
}

static int ensure_started(void) {
  if (started) return started;
  pthread_mutex_lock(&start_lock);
  if (!started) {
    static int atfork_done;
    if (!atfork_done) {
      pthread_atfork(NULL, NULL, after_fork_child);
      atfork_done = 1;
    }
    int n = 0;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 1 << 20);
    for (int t = 1; t < max_threads && t < MAX_THREADS; t++) {
      pthread_t th;
      if (pthread_create(&th, &attr, worker_main, NULL) != 0) break;
      pthread_detach(th);
      n++;
    }
    pthread_attr_destroy(&attr);
    started = n + 1;
  }
  pthread_mutex_unlock(&start_lock);
  return started;
}

/* Run on the calling thread alone for a while: twice the last back-off, and at least 20 times
   what the stall cost (a stall on a loaded machine lasts until the preempted worker's next time
   slice, up to ~100 ms: probing again soon would pay it again). */
static void back_off(long cost_ns) {
  long b = backoff;
  b = b ? 2 * b : backoff_min_ns;
  if (b < 20 * cost_ns) b = 20 * cost_ns;
  if (b > backoff_max_ns) b = backoff_max_ns;
  backoff = b;
  serial_until = now_ns() + b;
}

/* A caller waited far longer for a worker than the work takes: the worker was preempted. */
static void stalled(long cost_ns) {
  atomic_fetch_add_explicit(&st_stalls, 1, memory_order_relaxed);
  back_off(cost_ns);
}

static long thread_cpu_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return t.tv_sec * 1000000000L + t.tv_nsec;
}

/* Is another process keeping the cores a worker would need? Sampled at most every 5 ms from the
   kernel's count of runnable threads (/proc/loadavg's fourth field), less this process's own
   caller and awake workers, against the online cores; a running average of the free cores. On a
   machine whose cores are all busy a worker would only take turns with another process's thread
   and stall the products it joins. Without /proc the answer is no (the stall back-off remains). */
static _Atomic long next_sample_ns;
static _Atomic int free_cores_x4 = 8; /* running average of free cores, times 4 */
static int loadavg_fd = -2;

static int machine_busy(void) {
  long now = now_ns(), next = next_sample_ns;
  if (now >= next && atomic_compare_exchange_strong(&next_sample_ns, &next, now + 5000000)) {
    if (loadavg_fd == -2) loadavg_fd = open("/proc/loadavg", O_RDONLY | O_CLOEXEC);
    char buf[128];
    ssize_t n = loadavg_fd >= 0 ? pread(loadavg_fd, buf, sizeof buf - 1, 0) : -1;
    if (n > 0) {
      buf[n] = 0;
      const char *p = buf;
      for (int field = 0; field < 3 && p; field++) { /* skip the three averages */
        p = strchr(p, ' ');
        if (p) p++;
      }
      long running = p ? strtol(p, NULL, 10) : 0;
      long mine = 1 + (started > 1 ? started - 1 - atomic_load(&sleepers) : 0);
      long cores = sysconf(_SC_NPROCESSORS_ONLN);
      long free_now = cores - (running - mine > 0 ? running - mine : 0) - 1;
      if (free_now < 0) free_now = 0;
      if (free_now > 4) free_now = 4;
      int avg = free_cores_x4;
      free_cores_x4 = (3 * avg + 4 * (int)free_now + 2) / 4;
    }
  }
  return free_cores_x4 < 3; /* fewer than 0.75 free cores on average */
}

static void went_well(void) {
  long b = backoff;
  if (b) backoff = b / 2 >= backoff_min_ns ? b / 2 : 0;
}

/* Keep work of about `work_ns` on the calling thread? After a stall, for the back-off period;
   while the machine's cores are busy, unless the work is long (>= 4 ms: its share of a time
   slice on a second thread outweighs waiting for that thread's turn; measured on the shared
   2-core machine, a 2-layer LLM decode step whose vocabulary product ran on one thread while
   busy took 44 ms against 38 ms split in two). */
static int backing_off(long work_ns) {
  if (!adaptive) return 0;
  long until = serial_until;
  if (until && now_ns() < until) return 1;
  if (work_ns < 4000000 && machine_busy()) {
    atomic_fetch_add_explicit(&st_busy, 1, memory_order_relaxed);
    return 1;
  }
  return 0;
}

/* Run the prepared `job` (n_chunks >= 2) on the pool; the caller takes part. */
static void run_parallel(long work) {
  static uint32_t gen;
  (void)work;
  gen++;
  atomic_store_explicit(&done_chunks, 0, memory_order_relaxed);
  atomic_store_explicit(&claim_word, (uint64_t)gen << 32, memory_order_release);
  publish();
  long mine = 0, t_chunk = 0, i;
  while ((i = claim(gen)) >= 0) {
    long t0 = thread_cpu_ns(); /* CPU time: a preempted caller does not inflate a chunk's cost */
    run_chunk(&job, i);
    t_chunk += thread_cpu_ns() - t0;
    mine++;
  }
  long t_wait = now_ns();
  long expected = mine > 0 ? t_chunk / mine : 0;
  /* Close the job: no late worker can claim a chunk now. */
  uint64_t closed = ((uint64_t)gen << 32) | 0xffffffffu;
  uint64_t w = atomic_exchange(&claim_word, closed);
  long claimed = (long)(uint32_t)w;
  if (claimed > job.n_chunks) claimed = job.n_chunks;
  long others = claimed - mine;
  int spins = 0;
  while (atomic_load_explicit(&done_chunks, memory_order_acquire) < others) {
    if (++spins < 2000)
      cpu_relax();
    else
      sched_yield();
  }
  long waited = now_ns() - t_wait;
  atomic_fetch_add_explicit(&st_wait_ns, waited, memory_order_relaxed);
  atomic_fetch_add_explicit(&st_chunks, job.n_chunks, memory_order_relaxed);
  atomic_fetch_add_explicit(&st_parallel, 1, memory_order_relaxed);
  /* Contention: a wait far beyond a chunk's time is a worker preempted inside its chunk. */
  long limit = 4 * expected > 200000 ? 4 * expected : 200000;
  if (waited > limit) {
    stalled(waited);
    return;
  }
  if (others == 0) {
    /* Nobody came: the workers' cores are busy. A few in a row count as a stall. */
    atomic_fetch_add_explicit(&st_absent, 1, memory_order_relaxed);
    if (++absent_run >= 4) {
      absent_run = 0;
      back_off(0);
    }
    return;
  }
  absent_run = 0;
  went_well();
}

/* Whether a product of `work` multiply-adds goes to the pool now; takes the pool if so. */
static int take_pool(long work) {
  if (max_threads < 2 || work < parallel_min) return 0;
  if (backing_off(work / 4)) return 0; /* ~4 multiply-adds per ns on one core (AVX2 sgemm: 8-30) */
  int expected = 0;
  if (!atomic_compare_exchange_strong(&busy, &expected, 1)) return 0;
  if (ensure_started() < 2) {
    atomic_store(&busy, 0);
    return 0;
  }
  return 1;
}

static long chunks_for(long dim, long work, long quantum) {
  /* About 4 chunks per thread for balance, each at least chunk_min multiply-adds and `quantum`
     wide along the split dimension. */
  long per_unit = work / (dim > 0 ? dim : 1);
  long want = 4L * max_threads;
  long min_len = per_unit > 0 ? (chunk_min + per_unit - 1) / per_unit : dim;
  long len = (dim + want - 1) / want;
  if (len < min_len) len = min_len;
  len = (len + quantum - 1) / quantum * quantum;
  return len;
}

void relax_rt_sgemm(int order, int ta, int tb, int m, int n, int k, float alpha, const float *a, int lda,
                    const float *b, int ldb, float beta, float *c, int ldc) {
  long work = (long)m * n * k;
  /* One row reads B once at memory speed: split it from twice the multiply-adds (measured, quiet
     2-core machine: a 512 x 2048 sgemv, its 4 MB in cache, took 0.09 ms longer split in two;
     the LLM's 11.5 MB weights from memory gain 9% per decode step). */
  if (order != ROW_MAJOR || m <= 0 || n <= 0 || k <= 0 || !take_pool(m == 1 ? work / 2 : work)) {
    if (m > 0 && n > 0) {
      atomic_fetch_add_explicit(&st_serial, 1, memory_order_relaxed);
      if (m == 1 && k > 0 && order == ROW_MAJOR) {
        /* One row: sgemv on B. */
        if (tb == NO_TRANS)
          CBLAS_SGEMV(ROW_MAJOR, TRANS, k, n, alpha, b, ldb, a, ta == NO_TRANS ? 1 : lda, beta, c, 1);
        else
          CBLAS_SGEMV(ROW_MAJOR, NO_TRANS, n, k, alpha, b, ldb, a, ta == NO_TRANS ? 1 : lda, beta, c, 1);
        return;
      }
      CBLAS_SGEMM(order, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    }
    return;
  }
  job.ta = ta;
  job.tb = tb;
  job.m = m;
  job.n = n;
  job.k = k;
  job.lda = lda;
  job.ldb = ldb;
  job.ldc = ldc;
  job.alpha = alpha;
  job.beta = beta;
  job.a = a;
  job.b = b;
  job.c = c;
  if (m == 1) {
    /* y[n] = op(B)^T x: chunks of y, sgemv on the matching slice of B. */
    job.kind = 1;
    job.a = b;
    job.lda = ldb;
    job.b = a;
    job.incx = ta == NO_TRANS ? 1 : lda;
    job.incy = 1;
    job.trans_v = tb == NO_TRANS ? TRANS : NO_TRANS;
    job.m = tb == NO_TRANS ? k : n; /* rows of the stored matrix */
    job.n = tb == NO_TRANS ? n : k;
    job.dim = n;
    job.step = chunks_for(n, work, 64);
  } else {
    job.kind = 0;
    job.split_rows = (long)m * k > (long)k * n; /* split the larger of A and B's partner: C's rows
                                                   when A is larger, else C's columns */
    job.dim = job.split_rows ? m : n;
    job.step = chunks_for(job.dim, work, job.split_rows ? 16 : 64);
  }
  job.n_chunks = (job.dim + job.step - 1) / job.step;
  job.fp = fp_control();
  if (job.n_chunks < 2) {
    atomic_store(&busy, 0);
    atomic_fetch_add_explicit(&st_serial, 1, memory_order_relaxed);
    run_chunk(&job, 0);
    return;
  }
  run_parallel(work);
  atomic_store(&busy, 0);
}

/* threads: the most threads a product may use (the caller included; 1: no pool); parallel_min:
   multiply-adds from which a product is split; chunk_min: fewest multiply-adds per chunk;
   spin_us: how long an idle worker spins before it sleeps; adapt: 1 to keep work on the caller
   while the machine is busy or after a stall (the default), 0 to split regardless (tests). A
   value < 0 keeps the setting. */
void relax_rt_configure(int threads, long par_min, long ch_min, long spin_us, int adapt) {
  if (BLAS_SET_THREADS) BLAS_SET_THREADS(1);
  if (adapt >= 0) adaptive = adapt;
  if (threads >= 1) max_threads = threads > MAX_THREADS ? MAX_THREADS : threads;
  if (par_min >= 0) parallel_min = par_min;
  if (ch_min >= 1) chunk_min = ch_min;
  if (spin_us >= 0) spin_ns = spin_us * 1000;
}

/* Warming the pool up (relax_rt_start, below): a small product on each thread. */
typedef void (*relax_rt_task_fn)(void *);
void mlirAsyncRuntimeExecute(void *handle, relax_rt_task_fn resume);

static atomic_int warm_done;

static void warm_blas(void *unused) {
  (void)unused;
  float a[16] = {0}, b[16] = {0}, c[16];
  CBLAS_SGEMM(ROW_MAJOR, NO_TRANS, TRANS, 4, 4, 4, 1.0f, a, 4, b, 4, 0.0f, c, 4);
  atomic_fetch_add(&warm_done, 1);
}

/* Start the pool's workers now (they spin briefly, then sleep) rather than in the first product or
   task that would split: creating the threads and faulting in their stacks took ~0.5 ms of the
   first call that reached the pool (single-head attention d = 256 at s = 64: its q @ k^T product,
   41 us in later calls). Called when a module that uses the pool is built or loaded. Returns the
   threads a product may use now (1: no pool). */
int relax_rt_start(void) {
  if (max_threads < 2) return 1;
  static atomic_int warmed;
  int n = ensure_started();
  if (n >= 2 && !atomic_exchange(&warmed, 1)) {
    /* One small product per worker, queued as tasks: OpenBLAS sets up what a thread's first
       product needs (its buffers) in the worker, not in the first product it joins. */
    warm_blas(NULL);
    for (int t = 1; t < n; t++) mlirAsyncRuntimeExecute(NULL, warm_blas);
    /* Wait for them (at most 50 ms, never running them here): the pool is idle when this returns. */
    long until = now_ns() + 50000000;
    while (atomic_load(&warm_done) < n && now_ns() < until) sched_yield();
  }
  return n;
}

/* The pool's threads running now (0: not started), without starting them. */
int relax_rt_started(void) { return started; }

/* out[0..10]: parallel products, serial products, stalls, products no worker joined, chunks run by
   workers, chunks in all, nanoseconds callers waited for workers, current back-off (ns), async
   tasks, tasks run at once by the caller (one thread or backing off), tasks run by workers,
   products and tasks kept on the caller because the machine's cores were busy. */
void relax_rt_stats(long *out) {
  out[11] = atomic_load(&st_busy);
  out[8] = atomic_load(&st_tasks);
  out[9] = atomic_load(&st_tasks_inline);
  out[10] = atomic_load(&st_tasks_by_workers);
  out[0] = atomic_load(&st_parallel);
  out[1] = atomic_load(&st_serial);
  out[2] = atomic_load(&st_stalls);
  out[3] = atomic_load(&st_absent);
  out[4] = atomic_load(&st_worker_chunks);
  out[5] = atomic_load(&st_chunks);
  out[6] = atomic_load(&st_wait_ns);
  out[7] = backoff;
}

/* ---------------------------------------------------------------------------------------------
   MLIR's async runtime API (mlir/ExecutionEngine/AsyncRuntime.h), on the same pool.

   A module's threaded build lowers each parallel loop with `async-parallel-for`: the caller
   launches a task (a coroutine) per block of iterations, runs one block itself and blocks on the
   group of the tasks' tokens. MLIR's own runtime (libmlir_async_runtime) runs the tasks on an
   LLVM thread pool and the caller sleeps until the last one ends: a barrier, the stall of the
   static split above, and 50-100 us to wake the pool's threads each time (measured,
   backend/cpu_runtime.py). Here the caller, while it awaits, runs the queued tasks no worker has
   taken (a worker that is not running holds nothing up); a wait for a task a worker took that far
   exceeds a task's time is a stall, and during the back-off that follows `Execute` runs each task
   at once in the caller (resuming a coroutine between its save and suspend points is what a fast
   worker thread does too). Objects are reference counted as in MLIR's runtime: a group is created
   with one reference, a token or value with two (the caller's, and one that its emplacement
   drops, so that it outlives a caller that drops its reference early); freed when `DropRef`
   takes the last. */

typedef void (*coro_resume_t)(void *);

struct awaiter {
  struct awaiter *next;
  void (*fn)(void *, void *);
  void *a, *b;
};

enum { OBJ_TOKEN, OBJ_VALUE, OBJ_GROUP };
enum { PENDING = 0, READY = 1, ERROR = 2 };

struct rc_obj {
  atomic_long refs;
  int kind;
  pthread_mutex_t mu;
  struct awaiter *awaiters;
};

struct async_token {
  struct rc_obj o;
  atomic_int state;
};

struct async_value {
  struct rc_obj o;
  atomic_int state;
  void *storage;
};

struct async_group {
  struct rc_obj o;
  atomic_long pending;
  atomic_long errors;
  atomic_long rank;
};

struct task {
  struct task *next;
  void *handle;
  coro_resume_t resume;
  unsigned fp; /* the submitter's FP control bits */
};

static pthread_mutex_t task_mu = PTHREAD_MUTEX_INITIALIZER;
static struct task *task_head, *task_tail, *task_free;
static atomic_long task_count;
static atomic_long task_ns_avg = 20000; /* a task's time, a running average */

static void reset_tasks(void) {
  pthread_mutex_init(&task_mu, NULL);
  task_head = task_tail = NULL;
  atomic_store(&task_count, 0);
}

static void obj_init(struct rc_obj *o, int kind, long refs) {
  atomic_init(&o->refs, refs);
  o->kind = kind;
  pthread_mutex_init(&o->mu, NULL);
  o->awaiters = NULL;
}

static void run_awaiters(struct awaiter *a) {
  while (a) {
    struct awaiter *next = a->next;
    a->fn(a->a, a->b);
    free(a);
    a = next;
  }
}

static void add_awaiter(struct rc_obj *o, void (*fn)(void *, void *), void *a, void *b) {
  struct awaiter *w = malloc(sizeof *w);
  if (!w) abort();
  w->fn = fn;
  w->a = a;
  w->b = b;
  w->next = o->awaiters;
  o->awaiters = w;
}

static void run_task(void *handle, coro_resume_t resume) {
  long t0 = now_ns();
  resume(handle);
  long dt = now_ns() - t0, avg = task_ns_avg;
  task_ns_avg = avg + (dt - avg) / 8;
}

static int run_one_task(void) {
  if (atomic_load_explicit(&task_count, memory_order_acquire) == 0) return 0;
  pthread_mutex_lock(&task_mu);
  struct task *t = task_head;
  if (t) {
    task_head = t->next;
    if (!task_head) task_tail = NULL;
    atomic_fetch_sub(&task_count, 1);
  }
  pthread_mutex_unlock(&task_mu);
  if (!t) return 0;
  void *handle = t->handle;
  coro_resume_t resume = t->resume;
  unsigned fp = t->fp, mine = fp_control(); /* an awaiting caller may run another caller's task */
  pthread_mutex_lock(&task_mu);
  t->next = task_free;
  task_free = t;
  pthread_mutex_unlock(&task_mu);
  fp_adopt(fp);
  run_task(handle, resume);
  fp_adopt(mine);
  return 1;
}

void mlirAsyncRuntimeExecute(void *handle, coro_resume_t resume) {
  atomic_fetch_add_explicit(&st_tasks, 1, memory_order_relaxed);
  if (max_threads < 2 || backing_off(task_ns_avg) || ensure_started() < 2) {
    atomic_fetch_add_explicit(&st_tasks_inline, 1, memory_order_relaxed);
    run_task(handle, resume);
    return;
  }
  pthread_mutex_lock(&task_mu);
  struct task *t = task_free;
  if (t)
    task_free = t->next;
  else if (!(t = malloc(sizeof *t)))
    abort();
  t->handle = handle;
  t->resume = resume;
  t->fp = fp_control();
  t->next = NULL;
  if (task_tail)
    task_tail->next = t;
  else
    task_head = t;
  task_tail = t;
  atomic_fetch_add(&task_count, 1);
  pthread_mutex_unlock(&task_mu);
  publish();
}

/* Block until *state leaves PENDING (or *count reaches 0), running queued tasks meanwhile. */
static void await_help(atomic_int *state, atomic_long *count) {
  long idle_since = 0;
  int spins = 0;
  for (;;) {
    if (state ? atomic_load_explicit(state, memory_order_acquire) != PENDING
              : atomic_load_explicit(count, memory_order_acquire) <= 0)
      break;
    if (run_one_task()) {
      idle_since = 0;
      continue;
    }
    if (!idle_since) idle_since = now_ns();
    if (++spins < 2000)
      cpu_relax();
    else
      sched_yield();
  }
  if (idle_since) {
    long waited = now_ns() - idle_since, avg = task_ns_avg;
    long limit = 4 * avg > 200000 ? 4 * avg : 200000;
    atomic_fetch_add_explicit(&st_wait_ns, waited, memory_order_relaxed);
    if (waited > limit) stalled(waited);
  }
}

void mlirAsyncRuntimeAddRef(void *p, int64_t count) {
  atomic_fetch_add_explicit(&((struct rc_obj *)p)->refs, count, memory_order_relaxed);
}

void mlirAsyncRuntimeDropRef(void *p, int64_t count) {
  struct rc_obj *o = p;
  if (atomic_fetch_sub_explicit(&o->refs, count, memory_order_acq_rel) != count) return;
  struct awaiter *a = o->awaiters;
  while (a) { /* never run: an object with awaiters is referenced by them */
    struct awaiter *next = a->next;
    free(a);
    a = next;
  }
  pthread_mutex_destroy(&o->mu);
  if (o->kind == OBJ_VALUE) free(((struct async_value *)o)->storage);
  free(o);
}

static void *new_obj(size_t size, int kind, long refs) {
  struct rc_obj *o = malloc(size);
  if (!o) abort();
  obj_init(o, kind, refs);
  return o;
}

void *mlirAsyncRuntimeCreateToken(void) {
  /* two references: the caller's, and the one its emplacement drops */
  struct async_token *t = new_obj(sizeof *t, OBJ_TOKEN, 2);
  atomic_init(&t->state, PENDING);
  return t;
}

void *mlirAsyncRuntimeCreateValue(int64_t size) {
  struct async_value *v = new_obj(sizeof *v, OBJ_VALUE, 2);
  atomic_init(&v->state, PENDING);
  v->storage = aligned_alloc(64, size > 0 ? (size_t)(size + 63) / 64 * 64 : 64);
  if (!v->storage) abort();
  return v;
}

void *mlirAsyncRuntimeCreateGroup(int64_t size) {
  struct async_group *g = new_obj(sizeof *g, OBJ_GROUP, 1);
  atomic_init(&g->pending, size);
  atomic_init(&g->errors, 0);
  atomic_init(&g->rank, 0);
  return g;
}

/* A token or value becomes available (or an error): wake its awaiters, then drop the reference
   that kept it alive for this moment (tokens and values are created with two). */
static void set_state(struct rc_obj *o, atomic_int *state, int s) {
  pthread_mutex_lock(&o->mu);
  atomic_store_explicit(state, s, memory_order_release);
  struct awaiter *a = o->awaiters;
  o->awaiters = NULL;
  pthread_mutex_unlock(&o->mu);
  run_awaiters(a);
  mlirAsyncRuntimeDropRef(o, 1);
}

void mlirAsyncRuntimeEmplaceToken(void *t) { set_state(t, &((struct async_token *)t)->state, READY); }
void mlirAsyncRuntimeSetTokenError(void *t) { set_state(t, &((struct async_token *)t)->state, ERROR); }
void mlirAsyncRuntimeEmplaceValue(void *v) { set_state(v, &((struct async_value *)v)->state, READY); }
void mlirAsyncRuntimeSetValueError(void *v) { set_state(v, &((struct async_value *)v)->state, ERROR); }

_Bool mlirAsyncRuntimeIsTokenError(void *t) { return atomic_load(&((struct async_token *)t)->state) == ERROR; }
_Bool mlirAsyncRuntimeIsValueError(void *v) { return atomic_load(&((struct async_value *)v)->state) == ERROR; }
_Bool mlirAsyncRuntimeIsGroupError(void *g) { return atomic_load(&((struct async_group *)g)->errors) > 0; }

void *mlirAsyncRuntimeGetValueStorage(void *v) { return ((struct async_value *)v)->storage; }

static void group_token_done(struct async_group *g, int state) {
  if (state == ERROR) atomic_fetch_add(&g->errors, 1);
  if (atomic_fetch_sub_explicit(&g->pending, 1, memory_order_acq_rel) == 1) {
    pthread_mutex_lock(&g->o.mu);
    struct awaiter *a = g->o.awaiters;
    g->o.awaiters = NULL;
    pthread_mutex_unlock(&g->o.mu);
    run_awaiters(a);
  }
}

static void on_group_token(void *group, void *token) {
  group_token_done(group, atomic_load(&((struct async_token *)token)->state));
  mlirAsyncRuntimeDropRef(group, 1);
}

int64_t mlirAsyncRuntimeAddTokenToGroup(void *token, void *group) {
  struct async_token *t = token;
  struct async_group *g = group;
  int64_t rank = atomic_fetch_add(&g->rank, 1);
  pthread_mutex_lock(&t->o.mu);
  int s = atomic_load(&t->state);
  if (s != PENDING) {
    pthread_mutex_unlock(&t->o.mu);
    group_token_done(g, s);
    return rank;
  }
  mlirAsyncRuntimeAddRef(g, 1); /* alive until the token is ready */
  add_awaiter(&t->o, on_group_token, g, t);
  pthread_mutex_unlock(&t->o.mu);
  return rank;
}

void mlirAsyncRuntimeAwaitToken(void *t) { await_help(&((struct async_token *)t)->state, NULL); }
void mlirAsyncRuntimeAwaitValue(void *v) { await_help(&((struct async_value *)v)->state, NULL); }
void mlirAsyncRuntimeAwaitAllInGroup(void *g) { await_help(NULL, &((struct async_group *)g)->pending); }

static void resume_now(void *handle, void *resume) { ((coro_resume_t)resume)(handle); }

/* Resume the coroutine once the token or value is ready: at once if it is. */
static void await_and_execute(struct rc_obj *o, atomic_int *state, void *handle, coro_resume_t resume) {
  pthread_mutex_lock(&o->mu);
  if (atomic_load(state) != PENDING) {
    pthread_mutex_unlock(&o->mu);
    resume(handle);
    return;
  }
  add_awaiter(o, resume_now, handle, (void *)resume);
  pthread_mutex_unlock(&o->mu);
}

void mlirAsyncRuntimeAwaitTokenAndExecute(void *t, void *handle, coro_resume_t resume) {
  await_and_execute(t, &((struct async_token *)t)->state, handle, resume);
}

void mlirAsyncRuntimeAwaitValueAndExecute(void *v, void *handle, coro_resume_t resume) {
  await_and_execute(v, &((struct async_value *)v)->state, handle, resume);
}

void mlirAsyncRuntimeAwaitAllInGroupAndExecute(void *group, void *handle, coro_resume_t resume) {
  struct async_group *g = group;
  pthread_mutex_lock(&g->o.mu);
  if (atomic_load(&g->pending) <= 0) {
    pthread_mutex_unlock(&g->o.mu);
    resume(handle);
    return;
  }
  add_awaiter(&g->o, resume_now, handle, (void *)resume);
  pthread_mutex_unlock(&g->o.mu);
}

int64_t mlirAsyncRuntimGetNumWorkerThreads(void) { return max_threads; }
