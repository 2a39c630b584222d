// A stand-in for "another library" in the lifecycle tests: a shared library
// with a namespace-scope static object whose destructor runs callbacks. The
// library is loaded (and its static constructed) before main, so at exit its
// destructor runs after every atexit hook registered later — gpupool's exit
// drain included. It does not link gpupool (that would duplicate gpupool's
// process-wide state); the callbacks come from the test.

#ifndef GPUPOOL_TESTS_PROCESS_LIFECYCLE_STATIC_HOLDER_H_
#define GPUPOOL_TESTS_PROCESS_LIFECYCLE_STATIC_HOLDER_H_

#include <functional>

namespace gpupool_test_support {

// Runs `callback` from the library's static destructor at process exit.
void RunAtLibraryStaticDestruction(std::function<void()> callback);

}  // namespace gpupool_test_support

#endif  // GPUPOOL_TESTS_PROCESS_LIFECYCLE_STATIC_HOLDER_H_
