// CZlib: zlib's inflate, as the test kit's PNG reader sees it. Only ProximityTesting imports this
// module.
#ifndef CZLIB_SHIM_H
#define CZLIB_SHIM_H

#include <zlib.h>

// inflateInit is a macro; Swift sees this function instead.
static inline int czlib_inflate_init(z_stream *stream) { return inflateInit(stream); }

#endif
