#pragma once
// KVP_UNROLL(n): `#pragma GCC unroll n` on the loop that follows it. Unrolling is for speed only:
// the loop's operations and their order are the same either way, so no result changes.
// Sanitizer and fuzzing builds define KVP_NO_UNROLL and leave the loops rolled. They are built to
// check memory and undefined behaviour, not for speed, and clang instruments every copy of an
// unrolled Highway loop: quant_gemv_simd.cpp took 99 s to compile under ASan + UBSan unrolled and
// 4.5 s rolled, invariant_simd.cpp 56 s and 29 s.
#if defined(KVP_NO_UNROLL)
#define KVP_UNROLL(n)
#else
#define KVP_UNROLL_PRAGMA(text) _Pragma(#text)
#define KVP_UNROLL(n) KVP_UNROLL_PRAGMA(GCC unroll n)
#endif
