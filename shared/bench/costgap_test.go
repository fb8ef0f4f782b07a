package bench

import (
	"fmt"
	"strings"
	"testing"
)

// withTotal sets c.Total to the sum of its line items, as Prices.cost does.
func withTotal(c Cost) Cost {
	c.Total = c.ChainPuts + c.ChainUpload + c.CrossAZ + c.TransitStore + c.Metastore + c.Lambda + c.SettlePuts + c.IndexPuts + c.Gets
	return c
}

// TestCostGapSaysWhy: the report says why the naive baseline is cheaper
// per GiB when it is (issue 34: strand bench printed it cheaper without a
// word). The Express figures are docs/performance/cost.md's unthrottled
// row: strand $0.0345/GiB against the naive $0.0321. Failed before
// costGap existed (the report had no such line).
func TestCostGapSaysWhy(t *testing.T) {
	express := withTotal(Cost{ChainPuts: 0.00372, ChainUpload: 0.00975, CrossAZ: 0.02032, Metastore: 0.00009, Lambda: 0.00001, SettlePuts: 0.00064})
	naiveExpress := withTotal(Cost{ChainPuts: 0.01857, ChainUpload: 0.00325, Metastore: 0.01027})
	got := costGap(express, naiveExpress)
	if want := fmt.Sprintf("$%.6f/GiB less", express.Total-naiveExpress.Total); !strings.HasPrefix(got, want) {
		t.Fatalf("costGap = %q, want it to start %q", got, want)
	}
	if i, j := strings.Index(got, "cross-AZ copies"), strings.Index(got, "upload of every copy"); i < 0 || j < 0 || i > j {
		t.Errorf("costGap = %q: want cross-AZ (the largest extra) listed before the upload", got)
	}
	if want := fmt.Sprintf("+$%.6f upload of every copy", express.ChainUpload-naiveExpress.ChainUpload); !strings.Contains(got, want) {
		t.Errorf("costGap = %q, want %q", got, want)
	}
	for _, cheaper := range []string{"PUTs", "metastore"} { // strand pays less for these
		if strings.Contains(got, cheaper) {
			t.Errorf("costGap = %q lists %s, where strand pays less", got, cheaper)
		}
	}
	if !strings.Contains(got, "one copy in one zone") {
		t.Errorf("costGap = %q: want what the naive design gives up", got)
	}

	standard := withTotal(Cost{ChainPuts: 0.0007, Metastore: 0.00027, Lambda: 0.00003, SettlePuts: 0.00064})
	if got := costGap(standard, withTotal(Cost{ChainPuts: 0.0833, Metastore: 0.0104})); got != "" {
		t.Errorf("naive dearer: costGap = %q, want nothing", got)
	}
	if got := costGap(standard, standard); got != "" {
		t.Errorf("equal cost: costGap = %q, want nothing", got)
	}
	got = costGap(standard, withTotal(Cost{ChainPuts: 0.0005}))
	if !strings.Contains(got, "priced without absorb") || strings.Contains(got, "zone") {
		t.Errorf("one-zone class, naive cheaper: costGap = %q", got)
	}

	var b strings.Builder
	r := Result{Name: "express", Cost: &express, Baseline: &Baseline{Cost: naiveExpress}}
	if err := WriteText(&b, []Result{r}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "why naive costs less       "+costGap(express, naiveExpress)) {
		t.Errorf("the report does not say why the baseline is cheaper:\n%s", b.String())
	}
}
