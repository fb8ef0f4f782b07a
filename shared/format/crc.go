package format

// CRC-32C arithmetic (issue 36): the CRC of a concatenation from the CRCs
// of its parts, so a writer that learns a prefix last (a settled
// object's segment header: its count and length) computes its CRC from
// the CRC of the body it took while the body was in cache, with no second
// pass over the body. The method is zlib's crc32_combine (multmodp,
// x2nmodp): polynomial arithmetic modulo the CRC's polynomial, in the
// reflected bit order hash/crc32 uses; the initial and final inversions
// of a standard CRC cancel in it.

// castagnoliReversed is the CRC-32C polynomial, bit-reflected
// (crc32.Castagnoli).
const castagnoliReversed = 0x82f63b78

// crcMulModP is a*b modulo the polynomial (a must not be 0).
func crcMulModP(a, b uint32) uint32 {
	m := uint32(1) << 31
	var p uint32
	for {
		if a&m != 0 {
			p ^= b
			if a&(m-1) == 0 {
				return p
			}
		}
		m >>= 1
		if b&1 != 0 {
			b = b>>1 ^ castagnoliReversed
		} else {
			b >>= 1
		}
	}
}

// crcX2n[k] is x^(2^k) modulo the polynomial.
var crcX2n = func() (t [32]uint32) {
	p := uint32(1) << 30 // x^1
	t[0] = p
	for k := 1; k < len(t); k++ {
		p = crcMulModP(p, p)
		t[k] = p
	}
	return t
}()

// crcShift is x^(8n) modulo the polynomial: appending n bytes shifts a
// CRC by it. Never 0.
func crcShift(n uint64) uint32 {
	p, k := uint32(1)<<31, 3 // x^0; a byte is 2^3 bits
	for ; n != 0; n >>= 1 {
		if n&1 != 0 {
			p = crcMulModP(crcX2n[k&31], p)
		}
		k++
	}
	return p
}

// CRCCombine returns CRC(a || b) given CRC(a), CRC(b) and len(b).
func CRCCombine(crcA, crcB uint32, lenB int) uint32 {
	if lenB <= 0 {
		return crcA
	}
	return crcMulModP(crcShift(uint64(lenB)), crcA) ^ crcB
}
