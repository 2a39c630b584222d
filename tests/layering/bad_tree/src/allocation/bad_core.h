// A core file that reaches into a room above it: the layering check must
// reject it (tests/CMakeLists.txt, layering_rejects_back_edge).
#include "src/allocation/graph/graph_pools.h"
