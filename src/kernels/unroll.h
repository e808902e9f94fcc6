#pragma once
// KVP_UNROLL(n): `#pragma GCC unroll n` on the loop that follows it. Unrolling is for speed only:
// the loop's operations and their order are the same either way, so no result changes.
// Sanitizer and fuzzing builds define KVP_NO_UNROLL and leave the loops rolled. They are built to
// check memory and undefined behaviour, not for speed, and clang instruments every copy of an
// unrolled Highway loop: quant_gemv_simd.cpp took 119.5 s to compile under ASan + UBSan unrolled
// and 3.8 s rolled, invariant_simd.cpp 47.3 s and 27.4 s.
#if defined(KVP_NO_UNROLL)
#define KVP_UNROLL(n)
#else
#define KVP_UNROLL_PRAGMA(text) _Pragma(#text)
#define KVP_UNROLL(n) KVP_UNROLL_PRAGMA(GCC unroll n)
#endif
