// A fixture for the layering check's own test: the lifetime layer includes the
// allocation cache, a layer above it. check_layering.cmake must fail here.
#include "src/allocation/cache_core.h"
