// The raw-driver floor: what a launch, and the ordering around it, costs when nothing but the
// CUDA driver API stands between the host and the GPU. Host code only (the kernels come as
// PTX), so it builds with
//
//     nvcc -O2 -o /tmp/floor bench/floor.cu -lcuda
//
// and runs as `/tmp/floor path/to/ferrocuda_kernels.ptx`. It loads the bundled PTX (for
// `add_f32`) and a one-instruction empty kernel embedded below, and prints one JSON line per
// measurement on stdout:
//
//     {"bench": "floor", "name": ..., "us_per_call": <median>, "min_us": ..., "p10_us": ...,
//      "p90_us": ..., "batches": B, "per_batch": N, "what": "..."}
//
// With -DFLOOR_LIB it builds as a shared library instead (see "Library mode" below).
//
// Method: warm-up, then B batches of N calls back to back followed by one cuCtxSynchronize;
// per-call time = batch wall time / N; the median over batches is reported. Every driver call
// is checked (a failure prints the call and exits 1). add_f32's output is poisoned before and
// checked against a + b after each add_f32 measurement.
#include <cuda.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#define CK(call)                                                                        \
    do {                                                                                \
        CUresult r_ = (call);                                                           \
        if (r_ != CUDA_SUCCESS) fail(r_, #call, __LINE__);                              \
    } while (0)

static void fail(CUresult r, const char* call, int line) {
    const char* name = nullptr;
    const char* text = nullptr;
    if (cuGetErrorName(r, &name) != CUDA_SUCCESS) name = nullptr;
    if (cuGetErrorString(r, &text) != CUDA_SUCCESS) text = nullptr;
    std::fprintf(stderr, "floor: %s failed (floor.cu:%d): %s (code %d): %s\n", call, line,
                 name ? name : "CUDA_ERROR_?", static_cast<int>(r), text ? text : "?");
    std::exit(1);
}

// An empty kernel, same ISA and target as the bundled PTX (7.0, sm_80: JIT-compiled for the GPU).
static const char kEmptyPtx[] =
    ".version 7.0\n"
    ".target sm_80\n"
    ".address_size 64\n"
    "\n"
    ".visible .entry empty_kernel()\n"
    "{\n"
    "\tret;\n"
    "}\n";

// The bundled kernels take a slice as a 16-byte {pointer, length} struct by value.
struct SliceArg {
    CUdeviceptr ptr;
    unsigned long long len;
};
static_assert(sizeof(SliceArg) == 16, "slice parameter is 16 bytes");

static const unsigned kN = 1024;
static const unsigned kBlock = 256;
static const unsigned kGrid = (kN + kBlock - 1) / kBlock;

struct Stats {
    double median, min, p10, p90;
};

static double quantile(const std::vector<double>& s, double q) {
    double pos = q * static_cast<double>(s.size() - 1);
    size_t lo = static_cast<size_t>(std::floor(pos));
    size_t hi = static_cast<size_t>(std::ceil(pos));
    return s[lo] + (s[hi] - s[lo]) * (pos - static_cast<double>(lo));
}

static double now_us() {
    return std::chrono::duration<double, std::micro>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

// Runs `body` warmup times, then `batches` x `per_batch` times; each batch ends with one
// cuCtxSynchronize (inside the timed region). Returns per-call microseconds.
template <class F>
static Stats measure(F body, int per_batch, int batches, int warmup) {
    for (int i = 0; i < warmup; ++i) body();
    CK(cuCtxSynchronize());
    std::vector<double> per_call;
    per_call.reserve(batches);
    for (int b = 0; b < batches; ++b) {
        double t0 = now_us();
        for (int i = 0; i < per_batch; ++i) body();
        CK(cuCtxSynchronize());
        double t1 = now_us();
        per_call.push_back((t1 - t0) / per_batch);
    }
    std::sort(per_call.begin(), per_call.end());
    return Stats{quantile(per_call, 0.5), per_call.front(), quantile(per_call, 0.1),
                 quantile(per_call, 0.9)};
}

static void emit(const char* name, const Stats& s, int per_batch, int batches, const char* what) {
    std::printf(
        "{\"bench\": \"floor\", \"name\": \"%s\", \"us_per_call\": %.4f, \"min_us\": %.4f, "
        "\"p10_us\": %.4f, \"p90_us\": %.4f, \"batches\": %d, \"per_batch\": %d, "
        "\"what\": \"%s\"}\n",
        name, s.median, s.min, s.p10, s.p90, batches, per_batch, what);
    std::fflush(stdout);
}

// The contents of the file at `path` into `out`; false when it cannot be read.
static bool slurp(const char* path, std::string& out) {
    std::ifstream f(path, std::ios::in | std::ios::binary);
    if (!f) return false;
    std::ostringstream ss;
    ss << f.rdbuf();
    out = ss.str();
    return true;
}

static std::string read_file(const char* path) {
    std::string s;
    if (!slurp(path, s)) {
        std::fprintf(stderr, "floor: cannot read PTX file %s\n", path);
        std::exit(1);
    }
    return s;
}

// What both modes launch: add_f32 from the bundled PTX and the empty kernel, and three
// float32[kN] arrays (a and b uploaded, out left as allocated), with a + b on the host.
struct Fixture {
    CUmodule bundled = nullptr, empty_mod = nullptr;
    CUfunction add_f32 = nullptr, empty = nullptr;
    SliceArg pa{}, pb{}, po{};
    std::vector<float> expected;
};

#define TRY(call)                                 \
    do {                                          \
        CUresult r_ = (call);                     \
        if (r_ != CUDA_SUCCESS) return r_;        \
    } while (0)

// Fills `fx` in the current context; returns the first failing CUresult.
static CUresult make_fixture(const std::string& ptx, Fixture& fx) {
    TRY(cuModuleLoadData(&fx.bundled, ptx.c_str()));
    TRY(cuModuleLoadData(&fx.empty_mod, kEmptyPtx));
    TRY(cuModuleGetFunction(&fx.add_f32, fx.bundled, "add_f32"));
    TRY(cuModuleGetFunction(&fx.empty, fx.empty_mod, "empty_kernel"));
    std::vector<float> ha(kN), hb(kN);
    fx.expected.resize(kN);
    for (unsigned i = 0; i < kN; ++i) {
        ha[i] = static_cast<float>(i) * 0.25f - 100.0f;
        hb[i] = 3.0f - static_cast<float>(i % 17) * 1.5f;
        fx.expected[i] = ha[i] + hb[i];
    }
    CUdeviceptr da, db, dout;
    TRY(cuMemAlloc(&da, kN * sizeof(float)));
    TRY(cuMemAlloc(&db, kN * sizeof(float)));
    TRY(cuMemAlloc(&dout, kN * sizeof(float)));
    TRY(cuMemcpyHtoD(da, ha.data(), kN * sizeof(float)));
    TRY(cuMemcpyHtoD(db, hb.data(), kN * sizeof(float)));
    fx.pa = SliceArg{da, kN};
    fx.pb = SliceArg{db, kN};
    fx.po = SliceArg{dout, kN};
    return CUDA_SUCCESS;
}

// Poisons out with NaN (0x7fc00000).
static void poison(CUdeviceptr out) {
    CK(cuMemsetD32(out, 0x7fc00000u, kN));
}

// Copies out back and compares it with a + b; exits 1 on a mismatch.
static void check_add(CUdeviceptr out, const std::vector<float>& expected, const char* name) {
    CK(cuCtxSynchronize());
    std::vector<float> got(kN);
    CK(cuMemcpyDtoH(got.data(), out, kN * sizeof(float)));
    for (unsigned i = 0; i < kN; ++i) {
        if (got[i] != expected[i]) {
            std::fprintf(stderr, "floor: %s: WRONG OUTPUT out[%u] = %g, a + b = %g\n", name, i,
                         static_cast<double>(got[i]), static_cast<double>(expected[i]));
            std::exit(1);
        }
    }
}

#ifdef FLOOR_LIB
// ---------------------------------------------------------------------------------------------
// Library mode, for measuring the floor in the same process and the same rounds as the Python
// launchers (bench/python_bench.py loads it with ctypes):
//
//     nvcc -O2 -DFLOOR_LIB -shared -Xcompiler -fPIC -o /tmp/libfloor.so bench/floor.cu -lcuda
//
// Every function returns 0 or the failing CUresult (nothing exits the host process). The
// arrays and module live in the device's primary context, the one CuPy and PyTorch use.
namespace lib {
static CUcontext ctx = nullptr;
static Fixture fx;
}  // namespace lib

#define CKR(call)                                      \
    do {                                               \
        CUresult r_ = (call);                          \
        if (r_ != CUDA_SUCCESS) return static_cast<int>(r_); \
    } while (0)

// Loads the bundled PTX at `ptx_path` (add_f32) and the empty kernel, and makes three
// float32[1024] arrays a, b, out. Returns 0, a CUresult, or -1 when the file cannot be read.
extern "C" int floor_open(const char* ptx_path) {
    std::string ptx;
    if (!slurp(ptx_path, ptx)) return -1;
    CKR(cuInit(0));
    CUdevice dev;
    CKR(cuDeviceGet(&dev, 0));
    CKR(cuDevicePrimaryCtxRetain(&lib::ctx, dev));
    CKR(cuCtxSetCurrent(lib::ctx));
    CKR(make_fixture(ptx, lib::fx));
    return 0;
}

// `n` launches back to back on the legacy stream: add_f32 (`which` 0) or the empty kernel
// (`which` 1). No synchronization (the caller times the batch and then synchronizes).
extern "C" int floor_launch(int n, int which) {
    CKR(cuCtxSetCurrent(lib::ctx));
    Fixture& fx = lib::fx;
    void* params[] = {&fx.pa, &fx.pb, &fx.po};
    for (int i = 0; i < n; ++i) {
        if (which == 0) {
            CKR(cuLaunchKernel(fx.add_f32, kGrid, 1, 1, kBlock, 1, 1, 0, CU_STREAM_LEGACY,
                               params, nullptr));
        } else {
            CKR(cuLaunchKernel(fx.empty, kGrid, 1, 1, kBlock, 1, 1, 0, CU_STREAM_LEGACY,
                               nullptr, nullptr));
        }
    }
    return 0;
}

extern "C" int floor_synchronize() {
    CKR(cuCtxSetCurrent(lib::ctx));
    CKR(cuCtxSynchronize());
    return 0;
}

// Poisons out, launches add_f32 once, and compares out with a + b: 0 when every element is
// right, -2 on a mismatch, or a CUresult.
extern "C" int floor_check() {
    CKR(cuCtxSetCurrent(lib::ctx));
    CKR(cuMemsetD32(lib::fx.po.ptr, 0x7fc00000u, kN));
    CKR(cuCtxSynchronize());
    int r = floor_launch(1, 0);
    if (r != 0) return r;
    CKR(cuCtxSynchronize());
    std::vector<float> got(kN);
    CKR(cuMemcpyDtoH(got.data(), lib::fx.po.ptr, kN * sizeof(float)));
    for (unsigned i = 0; i < kN; ++i)
        if (got[i] != lib::fx.expected[i]) return -2;
    return 0;
}
#else
int main(int argc, char** argv) {
    if (argc < 2) {
        std::fprintf(stderr, "usage: %s path/to/ferrocuda_kernels.ptx [batches]\n", argv[0]);
        return 2;
    }
    const int batches = argc > 2 ? std::max(5, std::atoi(argv[2])) : 50;
    const std::string ptx = read_file(argv[1]);

    CK(cuInit(0));
    CUdevice dev;
    CK(cuDeviceGet(&dev, 0));
    CUcontext ctx;
    CK(cuDevicePrimaryCtxRetain(&ctx, dev));
    CK(cuCtxSetCurrent(ctx));

    char name[256] = {0};
    CK(cuDeviceGetName(name, static_cast<int>(sizeof(name) - 1), dev));
    for (char* p = name; *p; ++p)
        if (*p == '"' || *p == '\\') *p = ' ';
    int driver = 0, major = 0, minor = 0, sms = 0;
    CK(cuDriverGetVersion(&driver));
    CK(cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev));
    CK(cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev));
    CK(cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev));
    std::printf(
        "{\"bench\": \"floor\", \"name\": \"device\", \"device\": \"%s\", \"driver_version\": %d, "
        "\"compute_capability\": \"%d.%d\", \"sm_count\": %d, \"n\": %u, \"grid\": %u, "
        "\"block\": %u}\n",
        name, driver, major, minor, sms, kN, kGrid, kBlock);
    std::fflush(stdout);

    Fixture fx;
    CK(make_fixture(ptx, fx));
    const CUfunction add_f32 = fx.add_f32, empty = fx.empty;
    const CUdeviceptr da = fx.pa.ptr, db = fx.pb.ptr, dout = fx.po.ptr;
    const std::vector<float>& expected = fx.expected;
    SliceArg pa = fx.pa, pb = fx.pb, po = fx.po;
    void* add_params[] = {&pa, &pb, &po};

    const CUstream legacy = CU_STREAM_LEGACY;
    CUstream side;
    CK(cuStreamCreate(&side, CU_STREAM_NON_BLOCKING));
    CUevent ev_before, ev_after;
    CK(cuEventCreate(&ev_before, CU_EVENT_DISABLE_TIMING));
    CK(cuEventCreate(&ev_after, CU_EVENT_DISABLE_TIMING));

    const int L = 1000;    // launches per batch
    const int W = 2000;    // warm-up launches
    const int P = 10000;   // cheap queries per batch

    auto launch_add = [&](CUstream s) {
        CK(cuLaunchKernel(add_f32, kGrid, 1, 1, kBlock, 1, 1, 0, s, add_params, nullptr));
    };

    emit("launch_empty",
         measure([&] { CK(cuLaunchKernel(empty, kGrid, 1, 1, kBlock, 1, 1, 0, legacy, nullptr,
                                         nullptr)); },
                 L, batches, W),
         L, batches, "cuLaunchKernel, empty kernel, legacy stream, back to back");

    poison(dout);
    emit("launch_add_f32", measure([&] { launch_add(legacy); }, L, batches, W), L, batches,
         "cuLaunchKernel, bundled add_f32 (3 x float32[1024]), legacy stream, back to back");
    check_add(dout, expected, "launch_add_f32");

    poison(dout);
    emit("launch_add_f32_side", measure([&] { launch_add(side); }, L, batches, W), L, batches,
         "cuLaunchKernel, add_f32, on a non-blocking stream, back to back");
    check_add(dout, expected, "launch_add_f32_side");

    poison(dout);
    emit("sync_launch_add_f32",
         measure([&] {
             CK(cuStreamSynchronize(legacy));
             launch_add(legacy);
         },
                 L / 4, batches, W / 4),
         L / 4, batches,
         "cuStreamSynchronize(legacy) + launch add_f32 on legacy, each time (Numba-style host "
         "sync)");
    check_add(dout, expected, "sync_launch_add_f32");

    poison(dout);
    emit("event_wait_launch_add_f32",
         measure([&] {
             CK(cuEventRecord(ev_before, legacy));
             CK(cuStreamWaitEvent(side, ev_before, 0));
             launch_add(side);
         },
                 L, batches, W),
         L, batches,
         "event record on the producer stream (legacy) + cuStreamWaitEvent + launch on a "
         "non-blocking stream");
    check_add(dout, expected, "event_wait_launch_add_f32");

    poison(dout);
    emit("event_plan_add_f32",
         measure([&] {
             CK(cuEventRecord(ev_before, legacy));
             CK(cuStreamWaitEvent(side, ev_before, 0));
             launch_add(side);
             CK(cuEventRecord(ev_after, side));
             CK(cuStreamWaitEvent(legacy, ev_after, 0));
         },
                 L, batches, W),
         L, batches,
         "ferrocuda's event plan in C: record+wait before, launch on side, record+wait after");
    check_add(dout, expected, "event_plan_add_f32");

    poison(dout);
    emit("sync_plan_add_f32",
         measure([&] {
             CK(cuStreamSynchronize(legacy));
             launch_add(side);
             CK(cuEventRecord(ev_after, side));
             CK(cuStreamWaitEvent(legacy, ev_after, 0));
         },
                 L / 4, batches, W / 4),
         L / 4, batches,
         "ferrocuda's default plan in C: cuStreamSynchronize(legacy), launch on side, "
         "record+wait after");
    check_add(dout, expected, "sync_plan_add_f32");

    // Pointer queries as the launcher makes them (one call per array).
    {
        CUpointer_attribute attrs[5] = {
            CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_IS_MANAGED,
            CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR,
            CU_POINTER_ATTRIBUTE_RANGE_SIZE};
        unsigned int memory_type = 0, managed = 0;
        int ordinal = -1;
        CUdeviceptr start = 0;
        size_t size = 0;
        void* data[5] = {&memory_type, &managed, &ordinal, &start, &size};
        CK(cuPointerGetAttributes(5, attrs, data, da));
        if (memory_type != CU_MEMORYTYPE_DEVICE || start != da || size < kN * sizeof(float)) {
            std::fprintf(stderr, "floor: cuPointerGetAttributes returned type %u start %llu size %zu\n",
                         memory_type, static_cast<unsigned long long>(start), size);
            return 1;
        }
        emit("pointer_get_attributes",
             measure([&] { CK(cuPointerGetAttributes(5, attrs, data, da + 64)); }, P, batches,
                     P / 10),
             P, batches,
             "cuPointerGetAttributes (memory type, managed, device, range start, range size), "
             "one call");
        emit("mem_get_address_range",
             measure([&] { CK(cuMemGetAddressRange(&start, &size, da + 64)); }, P, batches, P / 10),
             P, batches, "cuMemGetAddressRange");
    }
    emit("event_record_wait",
         measure([&] {
             CK(cuEventRecord(ev_before, legacy));
             CK(cuStreamWaitEvent(side, ev_before, 0));
         },
                 P, batches, P / 10),
         P, batches, "cuEventRecord on legacy + cuStreamWaitEvent on a side stream, no launch");
    emit("ctx_get_current",
         measure([&] {
             CUcontext c;
             CK(cuCtxGetCurrent(&c));
         },
                 P, batches, P / 10),
         P, batches, "cuCtxGetCurrent");

    CK(cuCtxSynchronize());
    CK(cuEventDestroy(ev_before));
    CK(cuEventDestroy(ev_after));
    CK(cuStreamDestroy(side));
    CK(cuMemFree(da));
    CK(cuMemFree(db));
    CK(cuMemFree(dout));
    CK(cuModuleUnload(fx.empty_mod));
    CK(cuModuleUnload(fx.bundled));
    CK(cuDevicePrimaryCtxRelease(dev));
    return 0;
}
#endif  // FLOOR_LIB
