/* One-pass kernels over float32 tensors for graph_dap.runtime.passes (loaded with ctypes).

   numpy takes one pass over memory per operation: a value against its reference is a difference, three dot
   products and two extremes, about 1 ns an element on this project's machines; here it is one pass at the speed
   memory streams (0.3-0.5 ns). compare_arrays' metrics (in double, with the tolerance's mismatches) took 44 ns an
   element in numpy's passes, 3 here. Plain C without Python's headers: the arguments are pointers and sizes.

   Sums go in float32 lanes over blocks of BLOCK elements, then in double across blocks (as numpy's float32 dot
   products of cache-sized chunks add up in double in quant/errors.measure). Division, rounding (half to even) and the
   product with the scale are IEEE float32 operations, the same as numpy's: the round trip's values are bit for bit
   numpy's. The avx2 clone is chosen at load time where the CPU has it. */

#include <math.h>
#include <stdint.h>
#include <stddef.h>

/* An avx2 clone beside the baseline one, chosen when the library loads (x86 only; elsewhere the baseline alone). */
#if defined(__x86_64__) || defined(__i386__)
#define CLONES __attribute__((target_clones("avx2", "default")))
#else
#define CLONES
#endif

#define LANES 16
#define BLOCK 4096

enum { GD_NOISE, GD_SIGNAL, GD_CROSS, GD_HIGH, GD_LOW, GD_CLIPPED, GD_NAN }; /* the out[] slots of gd_diff and gd_round_trip */

/* a - b: out[NOISE] = sum d*d, out[SIGNAL] = sum b*b, out[CROSS] = sum d*b, out[HIGH] = max d, out[LOW] = min d.
   A NaN or an infinity makes the sums non-finite (the caller then measures another way). */
CLONES
void gd_diff(const float *a, const float *b, int64_t n, double *out) {
    double noise = 0, signal = 0, cross = 0;
    float high = -INFINITY, low = INFINITY;
    for (int64_t s = 0; s < n; s += BLOCK) {
        int64_t e = s + BLOCK < n ? s + BLOCK : n;
        float nz[LANES] = {0}, sg[LANES] = {0}, cr[LANES] = {0}, mx[LANES], mn[LANES];
        for (int k = 0; k < LANES; k++) {
            mx[k] = -INFINITY;
            mn[k] = INFINITY;
        }
        int64_t i = s;
        for (; i + LANES <= e; i += LANES) {
            for (int k = 0; k < LANES; k++) {
                float y = b[i + k];
                float d = a[i + k] - y;
                nz[k] += d * d;
                sg[k] += y * y;
                cr[k] += d * y;
                mx[k] = d > mx[k] ? d : mx[k];
                mn[k] = d < mn[k] ? d : mn[k];
            }
        }
        for (; i < e; i++) {
            float y = b[i];
            float d = a[i] - y;
            nz[0] += d * d;
            sg[0] += y * y;
            cr[0] += d * y;
            mx[0] = d > mx[0] ? d : mx[0];
            mn[0] = d < mn[0] ? d : mn[0];
        }
        for (int k = 0; k < LANES; k++) {
            noise += nz[k];
            signal += sg[k];
            cross += cr[k];
            high = mx[k] > high ? mx[k] : high;
            low = mn[k] < low ? mn[k] : low;
        }
    }
    out[GD_NOISE] = noise;
    out[GD_SIGNAL] = signal;
    out[GD_CROSS] = cross;
    out[GD_HIGH] = high;
    out[GD_LOW] = low;
}

/* The integer types the round trip writes (passes/__init__.py's _INT_KINDS). */
enum { GD_NONE, GD_INT8, GD_UINT8, GD_INT16, GD_UINT16 }; /* not int32: its range is not float32's */

/* q[s..s+m) = r + zp in the type of kind (r: integers less the zero point, in range). */
static void put(void *q, int kind, int64_t s, const float *r, int64_t m, float zp) {
    switch (kind) {
    case GD_INT8: for (int64_t j = 0; j < m; j++) ((int8_t *)q)[s + j] = (int8_t)(r[j] + zp); break;
    case GD_UINT8: for (int64_t j = 0; j < m; j++) ((uint8_t *)q)[s + j] = (uint8_t)(r[j] + zp); break;
    case GD_INT16: for (int64_t j = 0; j < m; j++) ((int16_t *)q)[s + j] = (int16_t)(r[j] + zp); break;
    case GD_UINT16: for (int64_t j = 0; j < m; j++) ((uint16_t *)q)[s + j] = (uint16_t)(r[j] + zp); break;
    default: break;
    }
}

/* One tensor's Q/DQ round trip, per tensor: r = clamp(rint(x / scale), low, high) is the integer less its zero point
   (low, high: the type's range less it); trip = r * scale; where kind is not GD_NONE, q = r + zp in that type (and
   -0.0, rint of -0.3, becomes the 0.0 that DequantizeLinear writes, as quant/params.py does). The error of the trip
   in the same pass: out[NOISE] = sum (trip - x)^2, out[SIGNAL] = sum x*x, out[HIGH], out[LOW] its extremes,
   out[CLIPPED] the elements clamped, out[NAN] 1 where x holds a NaN (then trip and q are not to be used). */
CLONES
void gd_round_trip(const float *x, int64_t n, float scale, float zp, float low, float high, float *trip, void *q, int kind,
                   double *out) {
    double noise = 0, signal = 0, clipped = 0;
    float hi = -INFINITY, lo = INFINITY;
    int nan = 0;
    const float zero = kind == GD_NONE ? -0.0f : 0.0f; /* x + -0.0 is x; x + 0.0 turns -0.0 into 0.0 */
    float rb[BLOCK];
    for (int64_t s = 0; s < n; s += BLOCK) {
        int64_t e = s + BLOCK < n ? s + BLOCK : n;
        float nz[LANES] = {0}, sg[LANES] = {0}, cl[LANES] = {0}, mx[LANES], mn[LANES];
        for (int k = 0; k < LANES; k++) {
            mx[k] = -INFINITY;
            mn[k] = INFINITY;
        }
        int64_t i = s;
        for (; i + LANES <= e; i += LANES) {
            for (int k = 0; k < LANES; k++) {
                float v = x[i + k];
                float r = rintf(v / scale);
                cl[k] += (r < low) + (r > high);
                r = r < low ? low : r;
                r = r > high ? high : r;
                r = r + zero;
                rb[i + k - s] = r;
                float t = r * scale;
                trip[i + k] = t;
                float d = t - v;
                nz[k] += d * d;
                sg[k] += v * v;
                mx[k] = d > mx[k] ? d : mx[k];
                mn[k] = d < mn[k] ? d : mn[k];
            }
        }
        for (; i < e; i++) {
            float v = x[i];
            float r = rintf(v / scale);
            cl[0] += (r < low) + (r > high);
            r = r < low ? low : r;
            r = r > high ? high : r;
            r = r + zero;
            rb[i - s] = r;
            float t = r * scale;
            trip[i] = t;
            float d = t - v;
            nz[0] += d * d;
            sg[0] += v * v;
            mx[0] = d > mx[0] ? d : mx[0];
            mn[0] = d < mn[0] ? d : mn[0];
        }
        for (int k = 0; k < LANES; k++) {
            noise += nz[k];
            signal += sg[k];
            clipped += cl[k];
            hi = mx[k] > hi ? mx[k] : hi;
            lo = mn[k] < lo ? mn[k] : lo;
        }
        if (noise != noise) { /* a NaN: the whole-array way handles it (the integers onnxruntime writes for it) */
            nan = 1;
            break;
        }
        put(q, kind, s, rb, e - s, zp);
    }
    out[GD_NOISE] = noise;
    out[GD_SIGNAL] = signal;
    out[GD_HIGH] = hi;
    out[GD_LOW] = lo;
    out[GD_CLIPPED] = clipped;
    out[GD_NAN] = nan;
}

/* a (a run's value) against b (its reference), in double as metrics.compare_arrays' numpy passes compute it, for
   arrays finite on both sides: out[0] elements with |a-b| > atol + rtol |b|, out[1] max |a-b|, out[2] max |a-b| / |b|
   (0 where equal, inf where b is 0 and a is not), out[3] sum (a-b)^2, out[4] sum a b, out[5] sum a a, out[6] sum b b,
   out[7] 1 where an element is NaN or infinite on either side (then the rest is not to be used). */
#define DLANES 8

CLONES
void gd_compare(const float *a, const float *b, int64_t n, double atol, double rtol, double *out) {
    double bad[DLANES] = {0}, mabs[DLANES] = {0}, mrel[DLANES] = {0}, sq[DLANES] = {0}, ab[DLANES] = {0}, aa[DLANES] = {0},
           bb[DLANES] = {0}, check[DLANES] = {0};
    int64_t i = 0;
    for (; i + DLANES <= n; i += DLANES) {
        for (int k = 0; k < DLANES; k++) {
            double x = a[i + k], y = b[i + k];
            double d = fabs(x - y), ref = fabs(y);
            check[k] += x * 0.0 + y * 0.0; /* NaN where either is NaN or infinite */
            bad[k] += d > atol + rtol * ref;
            mabs[k] = d > mabs[k] ? d : mabs[k];
            double rel = d == 0 ? 0.0 : d / ref;
            mrel[k] = rel > mrel[k] ? rel : mrel[k];
            sq[k] += d * d;
            ab[k] += y * x;
            aa[k] += x * x;
            bb[k] += y * y;
        }
    }
    for (; i < n; i++) {
        double x = a[i], y = b[i];
        double d = fabs(x - y), ref = fabs(y);
        check[0] += x * 0.0 + y * 0.0;
        bad[0] += d > atol + rtol * ref;
        mabs[0] = d > mabs[0] ? d : mabs[0];
        double rel = d == 0 ? 0.0 : d / ref;
        mrel[0] = rel > mrel[0] ? rel : mrel[0];
        sq[0] += d * d;
        ab[0] += y * x;
        aa[0] += x * x;
        bb[0] += y * y;
    }
    double sums[8] = {0};
    int nonfinite = 0;
    for (int k = 0; k < DLANES; k++) {
        sums[0] += bad[k];
        sums[1] = mabs[k] > sums[1] ? mabs[k] : sums[1];
        sums[2] = mrel[k] > sums[2] ? mrel[k] : sums[2];
        sums[3] += sq[k];
        sums[4] += ab[k];
        sums[5] += aa[k];
        sums[6] += bb[k];
        nonfinite |= check[k] != 0;
    }
    for (int k = 0; k < 7; k++) out[k] = sums[k];
    out[7] = nonfinite;
}

/* The out[] slots of gd_summary (passes/__init__.py's summary reads them in this order). */
enum { GS_COUNT, GS_SUM, GS_M2, GS_MIN, GS_MAX, GS_NAN, GS_POSINF, GS_NEGINF, GS_ZEROS };

/* The sum of m floats in double, lane by lane. */
static double block_sum(const float *v, int64_t m) {
    double sm[DLANES] = {0};
    int64_t i = 0;
    for (; i + DLANES <= m; i += DLANES)
        for (int k = 0; k < DLANES; k++) sm[k] += v[i + k];
    for (; i < m; i++) sm[0] += v[i];
    double s = 0;
    for (int k = 0; k < DLANES; k++) s += sm[k];
    return s;
}

/* The squared deviations of m floats from mean, in double, lane by lane. */
static double block_m2(const float *v, int64_t m, double mean) {
    double dev[DLANES] = {0};
    int64_t i = 0;
    for (; i + DLANES <= m; i += DLANES) {
        for (int k = 0; k < DLANES; k++) {
            double d = v[i + k] - mean;
            dev[k] += d * d;
        }
    }
    for (; i < m; i++) dev[0] += (v[i] - mean) * (v[i] - mean);
    double s = 0;
    for (int k = 0; k < DLANES; k++) s += dev[k];
    return s;
}

/* One block's count, sum and squared deviations from its mean (bc, bs, bm2) over its finite elements, its extremes
   into lo and hi, and its counts of NaN, +inf, -inf and zeros added to st[4]. Where every element is finite (the
   usual case) plain passes over the block, in the core's cache after the first; else element by element. */
static void block_stats(const float *v, int64_t m, double *bc, double *bs, double *bm2, float *lo, float *hi, double *st) {
    float zz[LANES] = {0}, chk[LANES] = {0}, mn[LANES], mx[LANES];
    for (int k = 0; k < LANES; k++) {
        mn[k] = INFINITY;
        mx[k] = -INFINITY;
    }
    int64_t i = 0;
    for (; i + LANES <= m; i += LANES) {
        for (int k = 0; k < LANES; k++) {
            float a = v[i + k];
            chk[k] += a * 0.0f; /* NaN where a is NaN or infinite */
            zz[k] += a == 0.0f;
            mn[k] = a < mn[k] ? a : mn[k];
            mx[k] = a > mx[k] ? a : mx[k];
        }
    }
    for (; i < m; i++) {
        float a = v[i];
        chk[0] += a * 0.0f;
        zz[0] += a == 0.0f;
        mn[0] = a < mn[0] ? a : mn[0];
        mx[0] = a > mx[0] ? a : mx[0];
    }
    int finite = 1;
    for (int k = 0; k < LANES; k++) {
        finite &= chk[k] == 0.0f;
        st[3] += zz[k];
    }
    if (finite) {
        for (int k = 0; k < LANES; k++) {
            *lo = mn[k] < *lo ? mn[k] : *lo;
            *hi = mx[k] > *hi ? mx[k] : *hi;
        }
        *bc = (double)m;
        *bs = block_sum(v, m);
        *bm2 = m ? block_m2(v, m, *bs / m) : 0.0;
        return;
    }
    double c = 0, s = 0;
    for (i = 0; i < m; i++) { /* a NaN or an infinity here: the finite elements alone */
        float a = v[i];
        if (a != a) {
            st[0] += 1;
        } else if (a == INFINITY) {
            st[1] += 1;
        } else if (a == -INFINITY) {
            st[2] += 1;
        } else {
            c += 1;
            s += a;
            *lo = a < *lo ? a : *lo;
            *hi = a > *hi ? a : *hi;
        }
    }
    double d2 = 0, mean = c ? s / c : 0.0;
    for (i = 0; i < m; i++) {
        float a = v[i];
        if (a - a == 0.0f) d2 += (a - mean) * (a - mean);
    }
    *bc = c;
    *bs = s;
    *bm2 = d2;
}

/* A tensor's summary (tensor.summarize_chunks'): out[COUNT] finite elements, out[SUM] their sum, out[M2] their squared
   deviations from their mean, out[MIN], out[MAX] their extremes (inf, -inf where none), and the counts of NaN, +inf,
   -inf and zeros. Each block's mean first, then its squared deviations from it (the block is in the core's cache),
   blocks combined as Chan et al. combine them: what numpy's two passes per chunk compute, in one pass over memory. */
CLONES
void gd_summary(const float *x, int64_t n, double *out) {
    double count = 0, total = 0, m2 = 0, st[4] = {0};
    float lo = INFINITY, hi = -INFINITY;
    for (int64_t s = 0; s < n; s += BLOCK) {
        double bc, bs, bm2;
        block_stats(x + s, s + BLOCK < n ? BLOCK : n - s, &bc, &bs, &bm2, &lo, &hi, st);
        if (bc == 0) continue;
        if (count > 0) {
            double delta = bs / bc - total / count;
            m2 += bm2 + delta * delta * count * bc / (count + bc);
        } else {
            m2 = bm2;
        }
        total += bs;
        count += bc;
    }
    out[GS_COUNT] = count;
    out[GS_SUM] = total;
    out[GS_M2] = m2;
    out[GS_MIN] = lo;
    out[GS_MAX] = hi;
    out[GS_NAN] = st[0];
    out[GS_POSINF] = st[1];
    out[GS_NEGINF] = st[2];
    out[GS_ZEROS] = st[3];
}
