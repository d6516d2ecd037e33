/* FAKE CUDA: a stand-in for XTC's libmlir_cuda_runtime.so, for tests only
   (tests/test_pack.py, the device runner's cuda-bare path on host kernels): the entry
   points the runner calls, working on host memory.
   "Device" allocations start as 0xFF bytes (NaN as float32), so that a missing copy to
   the "device" shows as wrong results; mock_calls(i) counts the calls of each kind. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

enum { STREAM_CREATE, STREAM_SYNC, MEM_ALLOC, MEM_FREE, MEMCPY, HOST_REGISTER,
       HOST_UNREGISTER, N_KINDS };
static long calls[N_KINDS];

void *mgpuStreamCreate(void) { calls[STREAM_CREATE]++; return (void *)0x5157; }
void mgpuStreamSynchronize(void *stream) { calls[STREAM_SYNC]++; (void)stream; }
void mgpuStreamDestroy(void *stream) { (void)stream; }

void *mgpuMemAlloc(uint64_t nbytes, void *stream, bool shared) {
  calls[MEM_ALLOC]++;
  (void)stream;
  (void)shared;
  void *ptr = aligned_alloc(256, (nbytes + 255) / 256 * 256);
  if (ptr) memset(ptr, 0xFF, nbytes);
  return ptr;
}

void mgpuMemFree(void *ptr, void *stream) { calls[MEM_FREE]++; (void)stream; free(ptr); }

void mgpuMemcpy(void *dst, void *src, size_t nbytes, void *stream) {
  calls[MEMCPY]++;
  (void)stream;
  memmove(dst, src, nbytes);
}

void mgpuMemHostRegister(void *ptr, uint64_t nbytes) {
  calls[HOST_REGISTER]++;
  (void)ptr;
  (void)nbytes;
}

void mgpuMemHostUnregister(void *ptr) { calls[HOST_UNREGISTER]++; (void)ptr; }

/* What an nvgpu kernel library calls (its constructor loads its GPU binary, its entry
   launches it): accepted and ignored, so that real nvgpu packs run here too, computing
   nothing (their outputs stay unwritten: every such case must fail when judged). */
void *mgpuModuleLoad(void *data, size_t size) { (void)data; (void)size; return (void *)0x6d6f64; }
void mgpuModuleUnload(void *module) { (void)module; }
void *mgpuModuleGetFunction(void *module, const char *name) {
    (void)module; (void)name; return (void *)0x66756e;
}
void mgpuLaunchKernel(void *function, intptr_t gx, intptr_t gy, intptr_t gz, intptr_t bx,
                      intptr_t by, intptr_t bz, int32_t smem, void *stream, void **params,
                      void **extra, size_t count) {
    (void)function; (void)gx; (void)gy; (void)gz; (void)bx; (void)by; (void)bz; (void)smem;
    (void)stream; (void)params; (void)extra; (void)count;
}

long mock_calls(int kind) { return kind >= 0 && kind < N_KINDS ? calls[kind] : -1; }
