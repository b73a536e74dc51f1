// What each driver call a ferrocuda launch makes costs, alone on one thread (ns per call), and
// cuLaunchKernel with and without them: the per-launch price of the launch path's guarantees
// (pointer checks, the capture-state query, the caller's context kept) in driver time.
// Build anywhere (no CUDA headers: the driver is opened with dlopen):
//   gcc -O2 -o driver_calls bench/driver_calls.c -ldl
// and run it on the GPU machine: ./driver_calls (two rounds; the BENCHMARKS.md figures).
#include <dlfcn.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>
typedef int CUresult; typedef void* CUcontext; typedef void* CUstream; typedef void* CUmodule; typedef void* CUfunction; typedef unsigned long long CUdeviceptr; typedef int CUdevice;
#define F(name, ...) static CUresult (*name)(__VA_ARGS__)
F(cuInit, unsigned); F(cuDeviceGet, CUdevice*, int); F(cuDevicePrimaryCtxRetain, CUcontext*, CUdevice);
F(cuCtxSetCurrent, CUcontext); F(cuCtxGetCurrent, CUcontext*); F(cuMemAlloc_v2, CUdeviceptr*, size_t);
F(cuPointerGetAttributes, unsigned, int*, void**, CUdeviceptr); F(cuPointerGetAttribute, void*, int, CUdeviceptr);
F(cuMemGetAddressRange_v2, CUdeviceptr*, size_t*, CUdeviceptr);
F(cuStreamGetCaptureInfo_v3, CUstream, int*, unsigned long long*, void*, void*, void*, void*);
F(cuStreamIsCapturing, CUstream, int*); F(cuStreamGetId, CUstream, unsigned long long*);
F(cuModuleLoadData, CUmodule*, const void*); F(cuModuleGetFunction, CUfunction*, CUmodule, const char*);
F(cuLaunchKernel, CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, CUstream, void**, void**);
F(cuCtxSynchronize, void); F(cuStreamCreate, CUstream*, unsigned); F(cuThreadExchangeStreamCaptureMode, int*);
static const char *ptx =
".version 7.0\n.target sm_70\n.address_size 64\n"
".visible .entry k(.param .u64 a, .param .u64 b, .param .u64 c, .param .u64 n) {\n ret;\n}\n";
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec * 1e9 + t.tv_nsec; }
#define CK(x) do { CUresult r_ = (x); if (r_) { printf("%s -> %d\n", #x, r_); exit(1); } } while (0)
#define BENCH(label, n, body) do { for (int i_ = 0; i_ < (n) / 10; i_++) { body; } cuCtxSynchronize(); \
  double t0_ = now(); for (int i_ = 0; i_ < (n); i_++) { body; } double t1_ = now(); cuCtxSynchronize(); \
  printf("%-58s %8.1f ns\n", label, (t1_ - t0_) / (n)); } while (0)
int main(void) {
  void *h = dlopen("libcuda.so.1", RTLD_NOW); if (!h) { printf("no libcuda\n"); return 1; }
#define L(name) name = dlsym(h, #name); if (!name) { printf("missing %s\n", #name); }
  L(cuInit) L(cuDeviceGet) L(cuDevicePrimaryCtxRetain) L(cuCtxSetCurrent) L(cuCtxGetCurrent) L(cuMemAlloc_v2)
  L(cuPointerGetAttributes) L(cuPointerGetAttribute) L(cuMemGetAddressRange_v2) L(cuStreamGetCaptureInfo_v3)
  L(cuStreamIsCapturing) L(cuStreamGetId) L(cuModuleLoadData) L(cuModuleGetFunction) L(cuLaunchKernel)
  L(cuCtxSynchronize) L(cuStreamCreate) L(cuThreadExchangeStreamCaptureMode)
  CUdevice d; CUcontext c; CK(cuInit(0)); CK(cuDeviceGet(&d, 0)); CK(cuDevicePrimaryCtxRetain(&c, d)); CK(cuCtxSetCurrent(c));
  CUdeviceptr a, b, o; CK(cuMemAlloc_v2(&a, 4096)); CK(cuMemAlloc_v2(&b, 4096)); CK(cuMemAlloc_v2(&o, 4096));
  CUmodule m; CUfunction f; CK(cuModuleLoadData(&m, ptx)); CK(cuModuleGetFunction(&f, m, "k"));
  CUstream side; CK(cuStreamCreate(&side, 1));
  unsigned long long n = 1024; void *params[] = {&a, &b, &o, &n};
  int N = 200000;
  // attribute codes: MEMORY_TYPE 2, DEVICE_ORDINAL 9, IS_MANAGED 8, RANGE_START 11, RANGE_SIZE 12, BUFFER_ID 7
  int at5[] = {2, 8, 9, 11, 12}; unsigned mt; int man; int ord; CUdeviceptr rs; size_t rz; unsigned long long bid;
  void *v5[] = {&mt, &man, &ord, &rs, &rz};
  int at3[] = {2, 9, 12}; void *v3[] = {&mt, &ord, &rz};
  int at1[] = {2}; void *v1[] = {&mt};
  int atb[] = {7}; void *vb[] = {&bid};
  CUcontext cur; int st; unsigned long long id;
  for (int rep = 0; rep < 2; rep++) {
    printf("-- round %d\n", rep);
    BENCH("cuLaunchKernel (null stream), the floor", N, cuLaunchKernel(f, 4,1,1, 256,1,1, 0, 0, params, 0));
    BENCH("cuLaunchKernel (side stream)", N, cuLaunchKernel(f, 4,1,1, 256,1,1, 0, side, params, 0));
    BENCH("cuCtxGetCurrent", N, cuCtxGetCurrent(&cur));
    BENCH("cuCtxSetCurrent (same)", N, cuCtxSetCurrent(c));
    BENCH("cuPointerGetAttributes, 5 attributes (ours)", N, cuPointerGetAttributes(5, at5, v5, a + 64));
    BENCH("cuPointerGetAttributes, 3 attributes", N, cuPointerGetAttributes(3, at3, v3, a + 64));
    BENCH("cuPointerGetAttributes, MEMORY_TYPE", N, cuPointerGetAttributes(1, at1, v1, a + 64));
    BENCH("cuPointerGetAttributes, BUFFER_ID", N, cuPointerGetAttributes(1, atb, vb, a + 64));
    BENCH("cuPointerGetAttribute RANGE_SIZE", N, cuPointerGetAttribute(&rz, 12, a + 64));
    BENCH("cuMemGetAddressRange", N, cuMemGetAddressRange_v2(&rs, &rz, a + 64));
    BENCH("cuStreamGetCaptureInfo_v3 (null stream)", N, cuStreamGetCaptureInfo_v3(0, &st, &id, 0,0,0,0));
    BENCH("cuStreamGetCaptureInfo_v3 (side stream)", N, cuStreamGetCaptureInfo_v3(side, &st, &id, 0,0,0,0));
    BENCH("cuStreamIsCapturing (null stream)", N, cuStreamIsCapturing(0, &st));
    BENCH("cuStreamGetId (null stream)", N, cuStreamGetId(0, &id));
    int mode = 2; BENCH("cuThreadExchangeStreamCaptureMode", N, cuThreadExchangeStreamCaptureMode(&mode));
    BENCH("launch + 3 x ptr attrs(5) + capture + 6 ctx gets (ours)", N,
      cuPointerGetAttributes(5, at5, v5, a); cuPointerGetAttributes(5, at5, v5, b); cuPointerGetAttributes(5, at5, v5, o);
      cuCtxGetCurrent(&cur); cuCtxGetCurrent(&cur); cuCtxGetCurrent(&cur); cuStreamGetCaptureInfo_v3(0, &st, &id, 0,0,0,0);
      cuCtxGetCurrent(&cur); cuCtxGetCurrent(&cur); cuCtxGetCurrent(&cur);
      cuLaunchKernel(f, 4,1,1, 256,1,1, 0, 0, params, 0));
    BENCH("launch + capture + 6 ctx gets (bound)", N,
      cuCtxGetCurrent(&cur); cuCtxGetCurrent(&cur); cuCtxGetCurrent(&cur); cuStreamGetCaptureInfo_v3(0, &st, &id, 0,0,0,0);
      cuCtxGetCurrent(&cur); cuCtxGetCurrent(&cur); cuCtxGetCurrent(&cur);
      cuLaunchKernel(f, 4,1,1, 256,1,1, 0, 0, params, 0));
    BENCH("launch + capture", N, cuStreamGetCaptureInfo_v3(0, &st, &id, 0,0,0,0); cuLaunchKernel(f, 4,1,1, 256,1,1, 0, 0, params, 0));
    BENCH("launch + 3 x ptr attrs(5)", N, cuPointerGetAttributes(5, at5, v5, a); cuPointerGetAttributes(5, at5, v5, b); cuPointerGetAttributes(5, at5, v5, o);
      cuLaunchKernel(f, 4,1,1, 256,1,1, 0, 0, params, 0));
  }
  return 0;
}
