/*===- FakeCuda.c - A CUDA driver without a GPU, for host-side tests -----===*\
|*                                                                            *|
|* Built as libcuda.so.1 in its own folder: a process that finds it first on *|
|* its library path runs the runtime's whole host path (device query, module *|
|* load, argument packing, workspace allocation, launches) on a machine with *|
|* no GPU. It describes one H200 (sm_90, 132 SMs, 227 KB of shared memory a  *|
|* block), hands out distinct fake device addresses that are never           *|
|* dereferenced, copies nothing, records the first 64 launches so that a    *|
|* test can read what the runtime asked for, and fails a chosen call on     *|
|* request (fake_cuda_* below). One thread at a time; function handles live *|
|* until the process ends.                                                    *|
|*                                                                            *|
\*===----------------------------------------------------------------------===*/
#include <cuda.h>

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define FAKE_MAX_LAUNCHES 64
#define FAKE_NAME_BYTES 128

typedef struct fake_function {
  char name[FAKE_NAME_BYTES];
} fake_function;

typedef struct fake_launch {
  char name[FAKE_NAME_BYTES];
  unsigned grid[3], block[3], shared_bytes;
  int dependent; /* launched with programmatic stream serialization */
} fake_launch;

static fake_launch launches[FAKE_MAX_LAUNCHES];
/* An injected failure: the `fail_after`-th next call (0 = the next) of the
   function named fail_name returns an error. */
static char fail_name[64];
static int64_t fail_after = -1;
static int64_t launch_count, allocations, frees, modules_loaded;
/* The swizzle spans (bytes) of the tensor maps encoded since the reset. */
#define FAKE_MAX_TENSOR_MAPS 64
static int tensor_map_swizzles[FAKE_MAX_TENSOR_MAPS];
static int64_t tensor_map_count;
static uint64_t next_address = 0x7f0000000000ull;
static int context_token, module_token;

/* What the tests read. */
__attribute__((visibility("default"))) int64_t fake_cuda_launch_count(void) {
  return launch_count;
}
__attribute__((visibility("default"))) const char *
fake_cuda_launch(int64_t i, unsigned grid[3], unsigned block[3],
                 unsigned *shared_bytes) {
  if (i < 0 || i >= launch_count || i >= FAKE_MAX_LAUNCHES)
    return NULL;
  memcpy(grid, launches[i].grid, sizeof(launches[i].grid));
  memcpy(block, launches[i].block, sizeof(launches[i].block));
  *shared_bytes = launches[i].shared_bytes;
  return launches[i].name;
}
/* 1 when launch i may overlap the one before it (programmatic dependent
   launch), 0 when not, -1 past the last. */
__attribute__((visibility("default"))) int
fake_cuda_launch_dependent(int64_t i) {
  if (i < 0 || i >= launch_count || i >= FAKE_MAX_LAUNCHES)
    return -1;
  return launches[i].dependent;
}
__attribute__((visibility("default"))) void
fake_cuda_allocations(int64_t *allocated, int64_t *freed, int64_t *loaded) {
  *allocated = allocations;
  *freed = frees;
  *loaded = modules_loaded;
}
/* The swizzle span of tensor map i (0 = none), -1 past the last. */
__attribute__((visibility("default"))) int fake_cuda_tensor_map_swizzle(
    int64_t i) {
  if (i < 0 || i >= tensor_map_count || i >= FAKE_MAX_TENSOR_MAPS)
    return -1;
  return tensor_map_swizzles[i];
}
__attribute__((visibility("default"))) void fake_cuda_reset(void) {
  launch_count = allocations = frees = modules_loaded = 0;
  tensor_map_count = 0;
  fail_after = -1;
}
/* Makes the `after`-th next call of `name` (0 = the next) fail. */
__attribute__((visibility("default"))) void fake_cuda_fail(const char *name,
                                                           int64_t after) {
  strncpy(fail_name, name, sizeof(fail_name) - 1);
  fail_after = after;
}
static int fails(const char *name) {
  if (fail_after < 0 || strcmp(name, fail_name) != 0)
    return 0;
  return fail_after-- == 0;
}

CUresult cuInit(unsigned flags) {
  (void)flags;
  return CUDA_SUCCESS;
}
CUresult cuDriverGetVersion(int *version) {
  *version = 13000;
  return CUDA_SUCCESS;
}
CUresult cuDeviceGet(CUdevice *device, int ordinal) {
  if (ordinal != 0)
    return CUDA_ERROR_INVALID_DEVICE;
  *device = 0;
  return CUDA_SUCCESS;
}
CUresult cuDeviceGetCount(int *count) {
  *count = 1;
  return CUDA_SUCCESS;
}
CUresult cuDeviceGetAttribute(int *value, CUdevice_attribute attribute,
                              CUdevice device) {
  (void)device;
  switch (attribute) {
  case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR:
    *value = 9;
    break;
  case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR:
    *value = 0;
    break;
  case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN:
    *value = 232448;
    break;
  case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT:
    *value = 132;
    break;
  default:
    *value = 0;
  }
  return CUDA_SUCCESS;
}
CUresult cuDevicePrimaryCtxRetain(CUcontext *context, CUdevice device) {
  (void)device;
  *context = (CUcontext)&context_token;
  return CUDA_SUCCESS;
}
CUresult cuDevicePrimaryCtxRelease_v2(CUdevice device) {
  (void)device;
  return CUDA_SUCCESS;
}
CUresult cuCtxSetCurrent(CUcontext context) {
  (void)context;
  return CUDA_SUCCESS;
}
CUresult cuCtxGetCurrent(CUcontext *context) {
  *context = (CUcontext)&context_token;
  return CUDA_SUCCESS;
}
CUresult cuCtxSynchronize(void) { return CUDA_SUCCESS; }
CUresult cuModuleLoadData(CUmodule *module, const void *image) {
  /* A cubin (ELF) or PTX text, as the runtime passes them. */
  if (!image || fails("cuModuleLoadData"))
    return CUDA_ERROR_INVALID_IMAGE;
  ++modules_loaded;
  *module = (CUmodule)&module_token;
  return CUDA_SUCCESS;
}
CUresult cuModuleLoadDataEx(CUmodule *module, const void *image,
                            unsigned options, CUjit_option *keys,
                            void **values) {
  (void)options;
  (void)keys;
  (void)values;
  return cuModuleLoadData(module, image);
}
CUresult cuModuleUnload(CUmodule module) {
  (void)module;
  return CUDA_SUCCESS;
}
CUresult cuModuleGetFunction(CUfunction *function, CUmodule module,
                             const char *name) {
  (void)module;
  fake_function *f = calloc(1, sizeof(fake_function));
  if (!f)
    return CUDA_ERROR_OUT_OF_MEMORY;
  strncpy(f->name, name, FAKE_NAME_BYTES - 1);
  *function = (CUfunction)f;
  return CUDA_SUCCESS;
}
CUresult cuFuncSetAttribute(CUfunction function, CUfunction_attribute attribute,
                            int value) {
  (void)function;
  (void)attribute;
  (void)value;
  return CUDA_SUCCESS;
}
CUresult cuFuncGetAttribute(int *value, CUfunction_attribute attribute,
                            CUfunction function) {
  (void)function;
  *value = attribute == CU_FUNC_ATTRIBUTE_NUM_REGS ? 128 : 0;
  return CUDA_SUCCESS;
}
CUresult cuLaunchKernel(CUfunction function, unsigned gx, unsigned gy,
                        unsigned gz, unsigned bx, unsigned by, unsigned bz,
                        unsigned shared_bytes, CUstream stream, void **params,
                        void **extra) {
  (void)stream;
  (void)extra;
  if (!function || !params)
    return CUDA_ERROR_INVALID_VALUE;
  if (fails("cuLaunchKernel"))
    return CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES;
  if (launch_count < FAKE_MAX_LAUNCHES) {
    fake_launch *l = &launches[launch_count];
    memcpy(l->name, ((fake_function *)function)->name, FAKE_NAME_BYTES);
    l->grid[0] = gx, l->grid[1] = gy, l->grid[2] = gz;
    l->block[0] = bx, l->block[1] = by, l->block[2] = bz;
    l->shared_bytes = shared_bytes;
    l->dependent = 0;
  }
  ++launch_count;
  return CUDA_SUCCESS;
}
CUresult cuLaunchKernelEx(const CUlaunchConfig *config, CUfunction function,
                          void **params, void **extra) {
  if (!config || (config->numAttrs && !config->attrs))
    return CUDA_ERROR_INVALID_VALUE;
  if (fails("cuLaunchKernelEx"))
    return CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES;
  CUresult result = cuLaunchKernel(
      function, config->gridDimX, config->gridDimY, config->gridDimZ,
      config->blockDimX, config->blockDimY, config->blockDimZ,
      config->sharedMemBytes, config->hStream, params, extra);
  if (result != CUDA_SUCCESS || launch_count > FAKE_MAX_LAUNCHES)
    return result;
  for (unsigned i = 0; i < config->numAttrs; ++i)
    if (config->attrs[i].id ==
            CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION &&
        config->attrs[i].value.programmaticStreamSerializationAllowed)
      launches[launch_count - 1].dependent = 1;
  return CUDA_SUCCESS;
}
CUresult cuGetErrorName(CUresult error, const char **name) {
  (void)error;
  *name = "FAKE_CUDA_ERROR";
  return CUDA_SUCCESS;
}
CUresult cuGetErrorString(CUresult error, const char **text) {
  (void)error;
  *text = "an error of the fake CUDA driver";
  return CUDA_SUCCESS;
}
static CUresult allocate(CUdeviceptr *pointer, size_t bytes) {
  if (fails("cuMemAlloc"))
    return CUDA_ERROR_OUT_OF_MEMORY;
  ++allocations;
  *pointer = (CUdeviceptr)next_address;
  next_address += (bytes + 4095) / 4096 * 4096 + 4096;
  return CUDA_SUCCESS;
}
CUresult cuMemAlloc_v2(CUdeviceptr *pointer, size_t bytes) {
  return allocate(pointer, bytes);
}
CUresult cuMemAllocAsync(CUdeviceptr *pointer, size_t bytes, CUstream stream) {
  (void)stream;
  return allocate(pointer, bytes);
}
CUresult cuMemFree_v2(CUdeviceptr pointer) {
  (void)pointer;
  ++frees;
  return CUDA_SUCCESS;
}
CUresult cuMemFreeAsync(CUdeviceptr pointer, CUstream stream) {
  (void)pointer;
  (void)stream;
  ++frees;
  return CUDA_SUCCESS;
}
CUresult cuMemcpyHtoD_v2(CUdeviceptr to, const void *from, size_t bytes) {
  (void)to;
  (void)from;
  (void)bytes;
  return CUDA_SUCCESS;
}
CUresult cuMemcpyDtoH_v2(void *to, CUdeviceptr from, size_t bytes) {
  (void)from;
  memset(to, 0, bytes);
  return CUDA_SUCCESS;
}
CUresult cuMemsetD16_v2(CUdeviceptr to, unsigned short value, size_t count) {
  (void)to;
  (void)value;
  (void)count;
  return CUDA_SUCCESS;
}
CUresult cuMemsetD32_v2(CUdeviceptr to, unsigned value, size_t count) {
  (void)to;
  (void)value;
  (void)count;
  return CUDA_SUCCESS;
}
CUresult cuMemsetD32Async(CUdeviceptr to, unsigned value, size_t count,
                          CUstream stream) {
  (void)to;
  (void)value;
  (void)count;
  (void)stream;
  return CUDA_SUCCESS;
}
CUresult cuStreamSynchronize(CUstream stream) {
  (void)stream;
  return CUDA_SUCCESS;
}
CUresult cuEventCreate(CUevent *event, unsigned flags) {
  (void)flags;
  *event = (CUevent)calloc(1, 16);
  return *event ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}
CUresult cuEventRecord(CUevent event, CUstream stream) {
  (void)event;
  (void)stream;
  return CUDA_SUCCESS;
}
CUresult cuEventSynchronize(CUevent event) {
  (void)event;
  return CUDA_SUCCESS;
}
CUresult cuEventElapsedTime_v2(float *ms, CUevent start, CUevent end) {
  (void)start;
  (void)end;
  *ms = 1.0f;
  return CUDA_SUCCESS;
}
CUresult cuEventDestroy_v2(CUevent event) {
  free(event);
  return CUDA_SUCCESS;
}
CUresult cuTensorMapEncodeTiled(
    CUtensorMap *map, CUtensorMapDataType type, cuuint32_t rank, void *address,
    const cuuint64_t *sizes, const cuuint64_t *strides, const cuuint32_t *box,
    const cuuint32_t *element_strides, CUtensorMapInterleave interleave,
    CUtensorMapSwizzle swizzle, CUtensorMapL2promotion promotion,
    CUtensorMapFloatOOBfill fill) {
  (void)sizes;
  (void)strides;
  (void)element_strides;
  (void)interleave;
  (void)promotion;
  (void)fill;
  /* The driver's own limits that the runtime must respect: a swizzled
     box's inner dimension spans at most the swizzle's bytes. */
  int span = swizzle == CU_TENSOR_MAP_SWIZZLE_128B  ? 128
             : swizzle == CU_TENSOR_MAP_SWIZZLE_64B ? 64
             : swizzle == CU_TENSOR_MAP_SWIZZLE_32B ? 32
                                                    : 0;
  int element_bytes = type == CU_TENSOR_MAP_DATA_TYPE_UINT8     ? 1
                      : type == CU_TENSOR_MAP_DATA_TYPE_FLOAT32 ? 4
                                                                : 2;
  if (rank < 1 || rank > 5 || ((uintptr_t)address & 15) != 0 ||
      (span && box[0] * (cuuint32_t)element_bytes > (cuuint32_t)span) ||
      fails("cuTensorMapEncodeTiled"))
    return CUDA_ERROR_INVALID_VALUE;
  if (tensor_map_count < FAKE_MAX_TENSOR_MAPS)
    tensor_map_swizzles[tensor_map_count] = span;
  ++tensor_map_count;
  memset(map, 0, sizeof(*map));
  return CUDA_SUCCESS;
}
