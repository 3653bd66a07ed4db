//! MD5 of several messages at once, one per 32-bit lane of an AVX2 register (eight lanes).
//!
//! MD5 is one long dependency chain, so a single digest leaves most of a core idle; a
//! SendMessageBatch brings up to ten bodies whose digests are independent. Running them side
//! by side costs little more than running one, which took MD5 from the top of the send
//! profile. [`md5_many`] picks what the CPU has at run time and falls back to the scalar
//! digest, which also takes the last one or two messages of a batch.

use super::digest::{md5, Digest16};

/// The MD5 digests of `inputs`, in order.
pub(crate) fn md5_many(inputs: &[&[u8]]) -> Vec<Digest16> {
    let mut out = Vec::with_capacity(inputs.len());
    let mut rest = inputs;
    #[cfg(target_arch = "x86_64")]
    let lanes = crate::simd::enabled(crate::simd::Simd::Md5Lanes);
    #[cfg(target_arch = "x86_64")]
    if lanes && std::is_x86_feature_detected!("avx2") {
        // Three or more digests pay for a pass of all eight lanes.
        while rest.len() >= 3 {
            let (now, later) = rest.split_at(rest.len().min(LANES));
            // SAFETY: AVX2 is present (checked above).
            let digests = unsafe { avx2::digest(now) };
            out.extend_from_slice(&digests[..now.len()]);
            rest = later;
        }
    }
    out.extend(rest.iter().map(|d| md5(d)));
    out
}

const LANES: usize = 8;

/// The per-step additive constants: floor(|sin(i + 1)| × 2³²).
const K: [u32; 64] = [
    0xd76aa478, 0xe8c7b756, 0x242070db, 0xc1bdceee, 0xf57c0faf, 0x4787c62a, 0xa8304613, 0xfd469501,
    0x698098d8, 0x8b44f7af, 0xffff5bb1, 0x895cd7be, 0x6b901122, 0xfd987193, 0xa679438e, 0x49b40821,
    0xf61e2562, 0xc040b340, 0x265e5a51, 0xe9b6c7aa, 0xd62f105d, 0x02441453, 0xd8a1e681, 0xe7d3fbc8,
    0x21e1cde6, 0xc33707d6, 0xf4d50d87, 0x455a14ed, 0xa9e3e905, 0xfcefa3f8, 0x676f02d9, 0x8d2a4c8a,
    0xfffa3942, 0x8771f681, 0x6d9d6122, 0xfde5380c, 0xa4beea44, 0x4bdecfa9, 0xf6bb4b60, 0xbebfbc70,
    0x289b7ec6, 0xeaa127fa, 0xd4ef3085, 0x04881d05, 0xd9d4d039, 0xe6db99e5, 0x1fa27cf8, 0xc4ac5665,
    0xf4292244, 0x432aff97, 0xab9423a7, 0xfc93a039, 0x655b59c3, 0x8f0ccc92, 0xffeff47d, 0x85845dd1,
    0x6fa87e4f, 0xfe2ce6e0, 0xa3014314, 0x4e0811a1, 0xf7537e82, 0xbd3af235, 0x2ad7d2bb, 0xeb86d391,
];

/// One lane's input as 64-byte blocks: whole blocks straight from the message, then one or
/// two blocks holding its tail and the padding.
struct Lane<'a> {
    data: &'a [u8],
    full: usize,
    tail: [u8; 128],
    blocks: usize,
}

impl<'a> Lane<'a> {
    fn new(data: &'a [u8]) -> Lane<'a> {
        let full = data.len() / 64;
        let rem = &data[full * 64..];
        let mut tail = [0u8; 128];
        tail[..rem.len()].copy_from_slice(rem);
        tail[rem.len()] = 0x80;
        let tail_blocks = if rem.len() + 9 <= 64 { 1 } else { 2 };
        let bits = (data.len() as u64).wrapping_mul(8);
        tail[tail_blocks * 64 - 8..tail_blocks * 64].copy_from_slice(&bits.to_le_bytes());
        Lane {
            data,
            full,
            tail,
            blocks: full + tail_blocks,
        }
    }

    /// Block `b`, or `None` once the lane is done.
    fn block(&self, b: usize) -> Option<&[u8]> {
        if b < self.full {
            Some(&self.data[b * 64..b * 64 + 64])
        } else if b < self.blocks {
            let t = (b - self.full) * 64;
            Some(&self.tail[t..t + 64])
        } else {
            None
        }
    }
}

/// The lanes of one pass: each input's blocks, how many each has, and the most of any.
fn lanes<'a, const N: usize>(inputs: &[&'a [u8]]) -> ([Option<Lane<'a>>; N], [i32; N], usize) {
    debug_assert!(inputs.len() <= N);
    let lanes: [Option<Lane>; N] = std::array::from_fn(|i| inputs.get(i).map(|d| Lane::new(d)));
    let counts: [i32; N] =
        std::array::from_fn(|i| lanes[i].as_ref().map_or(0, |l| l.blocks as i32));
    let blocks = counts.iter().copied().max().unwrap_or(0) as usize;
    (lanes, counts, blocks)
}

/// The digests from the final state words (`words[w][lane]`: a, b, c, d).
fn digests<const N: usize>(words: [[u32; N]; 4]) -> [Digest16; N] {
    std::array::from_fn(|lane| {
        let mut digest = Digest16([0; 16]);
        for (w, word) in words.iter().enumerate() {
            digest.0[4 * w..4 * w + 4].copy_from_slice(&word[lane].to_le_bytes());
        }
        digest
    })
}

/// MD5's four rounds of sixteen steps over message words `m`, with the caller's `step`
/// macro (`step!(round, a, b, c, d, word, k, shift)`, `round` being 1 to 4).
#[cfg(target_arch = "x86_64")]
macro_rules! rounds {
    ($step:ident, $a:ident, $b:ident, $c:ident, $d:ident, $m:ident) => {
        for q in 0..4 {
            let n = 4 * q;
            $step!(1, $a, $b, $c, $d, $m[n], K[n], 7);
            $step!(1, $d, $a, $b, $c, $m[n + 1], K[n + 1], 12);
            $step!(1, $c, $d, $a, $b, $m[n + 2], K[n + 2], 17);
            $step!(1, $b, $c, $d, $a, $m[n + 3], K[n + 3], 22);
        }
        for q in 0..4 {
            let n = 16 + 4 * q;
            let w = |s: usize| (5 * (n + s) + 1) % 16;
            $step!(2, $a, $b, $c, $d, $m[w(0)], K[n], 5);
            $step!(2, $d, $a, $b, $c, $m[w(1)], K[n + 1], 9);
            $step!(2, $c, $d, $a, $b, $m[w(2)], K[n + 2], 14);
            $step!(2, $b, $c, $d, $a, $m[w(3)], K[n + 3], 20);
        }
        for q in 0..4 {
            let n = 32 + 4 * q;
            let w = |s: usize| (3 * (n + s) + 5) % 16;
            $step!(3, $a, $b, $c, $d, $m[w(0)], K[n], 4);
            $step!(3, $d, $a, $b, $c, $m[w(1)], K[n + 1], 11);
            $step!(3, $c, $d, $a, $b, $m[w(2)], K[n + 2], 16);
            $step!(3, $b, $c, $d, $a, $m[w(3)], K[n + 3], 23);
        }
        for q in 0..4 {
            let n = 48 + 4 * q;
            let w = |s: usize| (7 * (n + s)) % 16;
            $step!(4, $a, $b, $c, $d, $m[w(0)], K[n], 6);
            $step!(4, $d, $a, $b, $c, $m[w(1)], K[n + 1], 10);
            $step!(4, $c, $d, $a, $b, $m[w(2)], K[n + 2], 15);
            $step!(4, $b, $c, $d, $a, $m[w(3)], K[n + 3], 21);
        }
    };
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use std::arch::x86_64::*;

    use super::{digests, lanes, Digest16, Lane, K, LANES};

    /// The round function of MD5 round `r`, on all lanes.
    #[inline(always)]
    unsafe fn fun<const R: u8>(b: __m256i, c: __m256i, d: __m256i) -> __m256i {
        match R {
            1 => _mm256_xor_si256(d, _mm256_and_si256(b, _mm256_xor_si256(c, d))),
            2 => _mm256_xor_si256(c, _mm256_and_si256(d, _mm256_xor_si256(b, c))),
            3 => _mm256_xor_si256(_mm256_xor_si256(b, c), d),
            _ => {
                let not_d = _mm256_xor_si256(d, _mm256_set1_epi32(-1));
                _mm256_xor_si256(c, _mm256_or_si256(b, not_d))
            }
        }
    }

    /// `a = b + rotl(a + fun(b, c, d) + m + k, s)`, for all lanes.
    macro_rules! step {
        ($r:literal, $a:ident, $b:ident, $c:ident, $d:ident, $m:expr, $k:expr, $s:literal) => {
            let sum = _mm256_add_epi32(
                _mm256_add_epi32($a, fun::<$r>($b, $c, $d)),
                _mm256_add_epi32($m, _mm256_set1_epi32($k as i32)),
            );
            let rotated = _mm256_or_si256(
                _mm256_slli_epi32::<$s>(sum),
                _mm256_srli_epi32::<{ 32 - $s }>(sum),
            );
            $a = _mm256_add_epi32($b, rotated);
        };
    }

    /// Rows are lanes, columns words; returns columns.
    #[inline(always)]
    unsafe fn transpose(r: [__m256i; 8]) -> [__m256i; 8] {
        let t0 = _mm256_unpacklo_epi32(r[0], r[1]);
        let t1 = _mm256_unpackhi_epi32(r[0], r[1]);
        let t2 = _mm256_unpacklo_epi32(r[2], r[3]);
        let t3 = _mm256_unpackhi_epi32(r[2], r[3]);
        let t4 = _mm256_unpacklo_epi32(r[4], r[5]);
        let t5 = _mm256_unpackhi_epi32(r[4], r[5]);
        let t6 = _mm256_unpacklo_epi32(r[6], r[7]);
        let t7 = _mm256_unpackhi_epi32(r[6], r[7]);
        let u0 = _mm256_unpacklo_epi64(t0, t2);
        let u1 = _mm256_unpackhi_epi64(t0, t2);
        let u2 = _mm256_unpacklo_epi64(t1, t3);
        let u3 = _mm256_unpackhi_epi64(t1, t3);
        let u4 = _mm256_unpacklo_epi64(t4, t6);
        let u5 = _mm256_unpackhi_epi64(t4, t6);
        let u6 = _mm256_unpacklo_epi64(t5, t7);
        let u7 = _mm256_unpackhi_epi64(t5, t7);
        [
            _mm256_permute2x128_si256::<0x20>(u0, u4),
            _mm256_permute2x128_si256::<0x20>(u1, u5),
            _mm256_permute2x128_si256::<0x20>(u2, u6),
            _mm256_permute2x128_si256::<0x20>(u3, u7),
            _mm256_permute2x128_si256::<0x31>(u0, u4),
            _mm256_permute2x128_si256::<0x31>(u1, u5),
            _mm256_permute2x128_si256::<0x31>(u2, u6),
            _mm256_permute2x128_si256::<0x31>(u3, u7),
        ]
    }

    /// The sixteen message words of block `blk` of eight lanes, one vector per word.
    #[inline(always)]
    pub(super) unsafe fn words(lanes: &[Option<Lane>], blk: usize) -> [__m256i; 16] {
        const IDLE: [u8; 64] = [0; 64];
        let mut lo = [_mm256_setzero_si256(); 8];
        let mut hi = [_mm256_setzero_si256(); 8];
        for lane in 0..LANES {
            let bytes = lanes[lane]
                .as_ref()
                .and_then(|l| l.block(blk))
                .unwrap_or(&IDLE);
            lo[lane] = _mm256_loadu_si256(bytes.as_ptr().cast());
            hi[lane] = _mm256_loadu_si256(bytes.as_ptr().add(32).cast());
        }
        let mut m = [_mm256_setzero_si256(); 16];
        m[..8].copy_from_slice(&transpose(lo));
        m[8..].copy_from_slice(&transpose(hi));
        m
    }

    /// Digests of up to eight inputs; entries past `inputs.len()` are meaningless.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn digest(inputs: &[&[u8]]) -> [Digest16; LANES] {
        let (lanes, counts, blocks) = lanes::<LANES>(inputs);
        let counts = _mm256_loadu_si256(counts.as_ptr().cast());

        let mut a = _mm256_set1_epi32(0x67452301);
        let mut b = _mm256_set1_epi32(0xefcdab89u32 as i32);
        let mut c = _mm256_set1_epi32(0x98badcfeu32 as i32);
        let mut d = _mm256_set1_epi32(0x10325476);

        for blk in 0..blocks {
            let m = words(&lanes, blk);
            let (a0, b0, c0, d0) = (a, b, c, d);
            rounds!(step, a, b, c, d, m);

            // Lanes whose message has no block `blk` keep their state.
            let active = _mm256_cmpgt_epi32(counts, _mm256_set1_epi32(blk as i32));
            a = _mm256_blendv_epi8(a0, _mm256_add_epi32(a0, a), active);
            b = _mm256_blendv_epi8(b0, _mm256_add_epi32(b0, b), active);
            c = _mm256_blendv_epi8(c0, _mm256_add_epi32(c0, c), active);
            d = _mm256_blendv_epi8(d0, _mm256_add_epi32(d0, d), active);
        }

        let mut words = [[0u32; LANES]; 4];
        for (dst, v) in words.iter_mut().zip([a, b, c, d]) {
            _mm256_storeu_si256(dst.as_mut_ptr().cast(), v);
        }
        digests(words)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agrees_with_the_scalar_digest() {
        // Lengths around every padding boundary, in mixed batches of every size.
        let data: Vec<u8> = (0..1100u32).map(|i| (i * 31 + 7) as u8).collect();
        let lengths = [
            0, 1, 3, 55, 56, 57, 63, 64, 65, 119, 120, 127, 128, 256, 999,
        ];
        for n in 0..=20 {
            let inputs: Vec<&[u8]> = (0..n)
                .map(|i| &data[i..i + lengths[(i * 7 + n) % lengths.len()]])
                .collect();
            let want: Vec<Digest16> = inputs.iter().map(|d| md5(d)).collect();
            assert_eq!(md5_many(&inputs), want, "batch of {n}");
        }
    }

    #[test]
    fn known_vectors() {
        let inputs: [&[u8]; 4] = [b"", b"a", b"abc", b"message digest"];
        let hex: Vec<String> = md5_many(&inputs).iter().map(|d| d.to_string()).collect();
        assert_eq!(
            hex,
            [
                "d41d8cd98f00b204e9800998ecf8427e",
                "0cc175b9c0f1b6a831c399e269772661",
                "900150983cd24fb0d6963f7d28e17f72",
                "f96b697d7cb7938d525a2f31aaf161d0",
            ]
        );
    }
}
