package metastore

import "testing"

// FuzzParseSK: sort keys parse back to the seq that formats them, and
// anything else is refused without a panic.
func FuzzParseSK(f *testing.F) {
	f.Add(RefSK(0))
	f.Add(RefSK(18446744073709551615))
	f.Add(EpochSK(7))
	f.Add("REF#-1")
	f.Fuzz(func(t *testing.T, sk string) {
		if seq, err := ParseRefSK(sk); err == nil && RefSK(seq) != sk {
			t.Fatalf("ParseRefSK(%q) = %d, which formats as %q", sk, seq, RefSK(seq))
		}
		if e, err := ParseEpochSK(sk); err == nil && EpochSK(e) != sk {
			t.Fatalf("ParseEpochSK(%q) = %d, which formats as %q", sk, e, EpochSK(e))
		}
		_, _ = ParseClass(sk)
	})
}
