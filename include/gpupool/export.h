// GPUPOOL_EXPORT marks gpupool's public API. A shared build
// (BUILD_SHARED_LIBS=ON) compiles every library with hidden visibility, so
// that libgpupool.so exports the names declared under include/gpupool and
// nothing else: no internal helper and no Abseil or standard-library code
// instantiated inside the library. A static build is unaffected.

#ifndef GPUPOOL_EXPORT_H_
#define GPUPOOL_EXPORT_H_

#if defined(__GNUC__) || defined(__clang__)
#define GPUPOOL_EXPORT __attribute__((visibility("default")))
#else
#define GPUPOOL_EXPORT
#endif

#endif  // GPUPOOL_EXPORT_H_
