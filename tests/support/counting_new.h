// Heap-allocation counting for the allocation-free tests. A test binary that adds
// counting_new.cpp to its sources replaces the global operator new/delete (every form,
// nothrow included, so sanitizers see matching pairs) with malloc/free plus a counter.
// Link it only into binaries that assert on allocation counts.
#pragma once

#include <cstdint>

namespace edgelm::test {

// Heap allocations (operator new of any form) since the process started.
int64_t heap_allocations();

}  // namespace edgelm::test
