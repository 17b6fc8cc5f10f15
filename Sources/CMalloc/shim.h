// CMalloc: glibc's allocator tuning (<malloc.h>: mallopt, malloc_trim), which Swift's Glibc module
// leaves out. Only ProximityNode's SystemAllocator imports this module. Part of libc: nothing to
// link.
#ifndef CMALLOC_SHIM_H
#define CMALLOC_SHIM_H

#include <malloc.h>

#endif
