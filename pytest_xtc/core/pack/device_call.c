/* The device side of one kernel call, for a processor with no Python: built once with the
 * target's cross compiler and run on the device (or under QEMU user mode). Standard C and
 * libdl only.
 *
 *   device_call RUNTIME_COUNT [RUNTIME...] KERNEL ENTRY REPEAT NUMBER MIN_REPEAT_MS TIMES
 *               [FILE SHIFT SKIP]...
 *
 * The runtime libraries are loaded globally, in order, then the kernel library. Each
 * operand (inputs, then outputs) is a region the caller owns, FILE's bytes: guard bands
 * holding the unwritten sentinel around the operand, which starts SKIP bytes in. The
 * region is placed SHIFT bytes past a 256-byte boundary, as it was on the caller's side;
 * the entry is called with a bare pointer to each operand (XTC's bare-pointer ABI); the
 * whole region is written back to FILE: the caller sees what the kernel wrote, out of
 * bounds included. The call is timed as XTC's evaluate_perf does (REPEAT times NUMBER
 * calls, NUMBER doubled until the first repeat lasts MIN_REPEAT_MS); seconds per call go
 * to TIMES, one per line. Exit status: 0 done; 2 bad arguments; 3 a file or library that
 * cannot be read or loaded (named on stderr). A kernel that faults ends the process by
 * its signal (SIGILL, SIGSEGV...), which the caller reports. */
#define _POSIX_C_SOURCE 200809L
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define ALIGN 256
#define MAX_OPERANDS 16

typedef void (*entry_t)(void *, void *, void *, void *, void *, void *, void *, void *,
                        void *, void *, void *, void *, void *, void *, void *, void *);

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int fail(const char *what, const char *name) {
  fprintf(stderr, "device_call: %s: %s\n", what, name);
  return 3;
}

int main(int argc, char **argv) {
  int at = 1;
  if (argc < 2) return 2;
  int libs = atoi(argv[at++]);
  if (libs < 0 || argc < at + libs + 6) return 2;
  for (int i = 0; i < libs; i++, at++)
    if (!dlopen(argv[at], RTLD_NOW | RTLD_GLOBAL)) return fail("cannot load", dlerror());
  void *kernel = dlopen(argv[at++], RTLD_NOW | RTLD_LOCAL);
  if (!kernel) return fail("cannot load", dlerror());
  entry_t entry = (entry_t)dlsym(kernel, argv[at++]);
  if (!entry) return fail("no entry", argv[at - 1]);
  long repeat = atol(argv[at++]), number = atol(argv[at++]);
  double min_s = atof(argv[at++]) / 1000.0;
  const char *times_file = argv[at++];
  int count = (argc - at) / 3;
  if ((argc - at) % 3 || count > MAX_OPERANDS || repeat < 1 || number < 1) return 2;
  void *args[MAX_OPERANDS] = {0};
  char *regions[MAX_OPERANDS] = {0};
  long sizes[MAX_OPERANDS] = {0};
  for (int i = 0; i < count; i++) {
    const char *name = argv[at + 3 * i];
    long shift = atol(argv[at + 3 * i + 1]), skip = atol(argv[at + 3 * i + 2]);
    FILE *in = fopen(name, "rb");
    if (!in) return fail("cannot open", name);
    fseek(in, 0, SEEK_END);
    sizes[i] = ftell(in);
    rewind(in);
    if (shift < 0 || shift >= ALIGN || skip < 0 || skip > sizes[i]) return 2;
    char *raw = malloc((size_t)sizes[i] + 2 * ALIGN);
    if (!raw) return fail("out of memory for", name);
    /* where the caller's region began past a 256-byte boundary: the operands keep their
       alignment (a case's misaligned operands stay misaligned) */
    char *base = raw + ((ALIGN - (uintptr_t)raw % ALIGN) % ALIGN) + shift;
    regions[i] = base;
    if (sizes[i] && fread(base, 1, (size_t)sizes[i], in) != (size_t)sizes[i])
      return fail("cannot read", name);
    fclose(in);
    args[i] = base + skip;
  }
  FILE *out = fopen(times_file, "w");
  if (!out) return fail("cannot write", times_file);
  for (long r = 0; r < repeat; r++) {
    double took;
    for (;;) {
      double start = now();
      for (long n = 0; n < number; n++)
        entry(args[0], args[1], args[2], args[3], args[4], args[5], args[6], args[7],
              args[8], args[9], args[10], args[11], args[12], args[13], args[14], args[15]);
      took = now() - start;
      if (took >= min_s || r > 0) break;
      number *= 2;
    }
    fprintf(out, "%.17g\n", took / (double)number);
  }
  fclose(out);
  for (int i = 0; i < count; i++) {
    const char *name = argv[at + 3 * i];
    FILE *back = fopen(name, "wb");
    if (!back || fwrite(regions[i], 1, (size_t)sizes[i], back) != (size_t)sizes[i])
      return fail("cannot write", name);
    fclose(back);
  }
  return 0;
}
