// release_free_heap(): hands the pages that malloc keeps in its arenas after large frees (a
// model's load buffers, a replaced model, a vocabulary loader's maps) back to the system, so the
// resident set follows what is live rather than the high-water mark.
//
// Invariants: best effort and cheap to call rarely (it walks glibc's arenas); a no-op where the
// allocator is not glibc's: on other C libraries and under AddressSanitizer / ThreadSanitizer,
// whose allocators own the heap (glibc's malloc_trim then walks arenas they race with, and ASan
// caught a SEGV in it on a server reload).
#pragma once

namespace edgelm {

void release_free_heap();

}  // namespace edgelm
