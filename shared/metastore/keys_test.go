package metastore

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"testing"
)

func TestSortKeys(t *testing.T) {
	cases := []struct {
		seq  uint64
		want string
	}{
		{0, "REF#00000000000000000000"},
		{42, "REF#00000000000000000042"},
		{^uint64(0), "REF#18446744073709551615"},
	}
	for _, tc := range cases {
		if got := RefSK(tc.seq); got != tc.want {
			t.Errorf("RefSK(%d) = %q, want %q", tc.seq, got, tc.want)
		}
		if got, err := ParseRefSK(tc.want); err != nil || got != tc.seq {
			t.Errorf("ParseRefSK(%q) = %d, %v", tc.want, got, err)
		}
	}
	if got := EpochSK(7); got != "EPOCH#00000000000000000007" {
		t.Errorf("EpochSK(7) = %q", got)
	}
	if got, err := ParseEpochSK(EpochSK(1 << 40)); err != nil || got != 1<<40 {
		t.Errorf("ParseEpochSK round trip: %d, %v", got, err)
	}
	for _, bad := range []string{"", "REF#", "REF#42", "EPOCH#00000000000000000042", "REF#0000000000000000004x",
		"REF#99999999999999999999", "REF#-0000000000000000042"} {
		if _, err := ParseRefSK(bad); !errors.Is(err, ErrInvalid) {
			t.Errorf("ParseRefSK(%q): %v, want ErrInvalid", bad, err)
		}
	}

	// Lexical order of the keys is numeric order.
	seqs := []uint64{0, 1, 9, 10, 99, 100, 1 << 32, 1<<63 - 1, 1 << 63, ^uint64(0)}
	keys := make([]string, len(seqs))
	for i, s := range seqs {
		keys[i] = RefSK(s)
	}
	if !sort.StringsAreSorted(keys) {
		t.Errorf("ref sort keys out of order: %v", keys)
	}
}

func TestPartitionKeys(t *testing.T) {
	for got, want := range map[string]string{
		StreamPK("orders"): "STREAM#orders",
		RefPK("ab"):        "SID#ab",
		ChainPK(ChainID{Star: "s1", Class: Express}):  "CHAIN#s1#express",
		ChainPK(ChainID{Star: "s1", Class: Standard}): "CHAIN#s1#standard",
		TokenPK("ff"): "TOKEN#ff",
	} {
		if got != want {
			t.Errorf("got %q, want %q", got, want)
		}
	}
}

func TestEqualRef(t *testing.T) {
	a := Ref{StreamID: "x", FirstSeq: 1, LastSeq: 2}
	b := a
	b.Locations = []Location{}
	if !EqualRef(a, b) {
		t.Error("nil and empty locations differ")
	}
	b.Locations = []Location{{Key: "k"}}
	if EqualRef(a, b) {
		t.Error("refs with different locations are equal")
	}
	a.Locations = []Location{{Key: "k"}}
	if !EqualRef(a, b) {
		t.Error("equal refs differ")
	}
	a.Locations[0].Settled = true
	if EqualRef(a, b) {
		t.Error("refs with different Settled are equal")
	}
}

func TestValidateStreamName(t *testing.T) {
	long := make([]byte, MaxNameLen+1)
	for i := range long {
		long[i] = 'a'
	}
	for name, ok := range map[string]bool{
		"orders":                  true,
		"app/orders.v2-eu_1":      true,
		"ünïcode":                 true,
		string(long[:MaxNameLen]): true,
		"":                        false,
		string(long):              false,
		"a\nb":                    false,
		"a\x00b":                  false,
		"\xff":                    false,
	} {
		err := ValidateStreamName(name)
		if ok != (err == nil) || (err != nil && !errors.Is(err, ErrInvalid)) {
			t.Errorf("ValidateStreamName(%.20q) = %v, want ok=%v", name, err, ok)
		}
	}
}

// Only refs being written are bound by MaxRefBytes: a larger ref an older
// build stored can still be swapped away and deleted.
func TestRefSizeBindsOnlyWrites(t *testing.T) {
	big := Ref{StreamID: strings.Repeat("a", 32), FirstSeq: 0, LastSeq: 0}
	for i := 0; RefSize(big) <= MaxRefBytes; i++ {
		big.Locations = append(big.Locations, Location{Key: fmt.Sprintf("chains/star-0/%020d/%020d", 1, i), Length: 1})
	}
	small := big
	small.Locations = big.Locations[:1]
	if err := ValidatePutRefs([]Ref{big}); !errors.Is(err, ErrTooLarge) {
		t.Errorf("put of a ref over the bound: %v", err)
	}
	if err := ValidateSwap([]Ref{small}, big); !errors.Is(err, ErrTooLarge) {
		t.Errorf("swap in a ref over the bound: %v", err)
	}
	if err := ValidateSwap([]Ref{big}, small); err != nil {
		t.Errorf("swap away a ref over the bound: %v", err)
	}
	if err := ValidateDeleteRefs([]Ref{big}); err != nil {
		t.Errorf("delete a ref over the bound: %v", err)
	}
}

// RefChunks cuts by count and by bytes, in order, and covers every ref once.
func TestRefChunks(t *testing.T) {
	mk := func(n, locs int) []Ref {
		out := make([]Ref, n)
		for i := range out {
			out[i] = Ref{StreamID: strings.Repeat("a", 32), FirstSeq: uint64(i), LastSeq: uint64(i)}
			for j := range locs {
				out[i].Locations = append(out[i].Locations, Location{Key: fmt.Sprintf("chains/star-0/%020d/%020d", 1, j), Length: 1})
			}
		}
		return out
	}
	for _, tc := range []struct{ n, locs int }{{0, 1}, {1, 1}, {250, 1}, {99, 300}, {150, 300}} {
		refs := mk(tc.n, tc.locs)
		var got []Ref
		for c := range RefChunks(refs) {
			bytes := 0
			for _, r := range c {
				bytes += RefSize(r)
			}
			if len(c) == 0 || len(c) > MaxPutRefsPerTx || bytes > MaxTxRefBytes {
				t.Fatalf("%+v: chunk of %d refs, %d bytes", tc, len(c), bytes)
			}
			got = append(got, c...)
		}
		if len(got) != len(refs) {
			t.Fatalf("%+v: %d refs in chunks, want %d", tc, len(got), len(refs))
		}
		for i := range got {
			if got[i].FirstSeq != refs[i].FirstSeq {
				t.Fatalf("%+v: chunks out of order at %d", tc, i)
			}
		}
	}
}

// TestSettleApartBoundaries: the neighbour condition at its exact
// boundaries on both sides: a ref before that ends just below repl's
// first seq, or a ref next that starts just past repl's last seq, is
// apart; one seq further is ErrConflict. SettleReach is the last key the
// old refs hold, or repl's own.
func TestSettleApartBoundaries(t *testing.T) {
	repl := Ref{StreamID: "s", FirstSeq: 10, LastSeq: 19}
	at := func(first, last uint64) Ref { return Ref{StreamID: "s", FirstSeq: first, LastSeq: last} }
	cases := []struct {
		what         string
		before, next Ref
		hasB, hasN   bool
		wantConflict bool
	}{
		{"no neighbours", Ref{}, Ref{}, false, false, false},
		{"before ends at first-1", at(0, 9), Ref{}, true, false, false},
		{"before ends at first", at(0, 10), Ref{}, true, false, true},
		{"next starts at last+1", Ref{}, at(20, 29), false, true, false},
		{"next starts at last", Ref{}, at(19, 29), false, true, true},
		{"both apart", at(0, 9), at(20, 29), true, true, false},
	}
	for _, tc := range cases {
		err := SettleApart(repl, tc.before, tc.hasB, tc.next, tc.hasN)
		if got := errors.Is(err, ErrConflict); got != tc.wantConflict || (err != nil && !got) {
			t.Errorf("%s: %v, want conflict %v", tc.what, err, tc.wantConflict)
		}
	}
	if r := SettleReach(nil, repl); r != 10 {
		t.Errorf("reach without old refs %d, want 10", r)
	}
	if r := SettleReach([]Ref{at(0, 4), at(5, 12)}, Ref{StreamID: "s", FirstSeq: 0, LastSeq: 19}); r != 5 {
		t.Errorf("reach of old refs at 0 and 5: %d, want 5", r)
	}
}
