#include "core/heap_trim.h"

#include <cstdlib>  // defines __GLIBC__ (features.h) for the test below: without a libc header it is unset

#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define EDGELM_SANITIZED_HEAP 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define EDGELM_SANITIZED_HEAP 1
#endif

#if defined(__GLIBC__) && !defined(EDGELM_SANITIZED_HEAP)
#include <malloc.h>
#endif

namespace edgelm {

void release_free_heap() {
#if defined(__GLIBC__) && !defined(EDGELM_SANITIZED_HEAP)
  malloc_trim(0);
#endif
}

}  // namespace edgelm
