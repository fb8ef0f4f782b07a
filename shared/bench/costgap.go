package bench

import (
	"fmt"
	"sort"
	"strings"
)

// costGap says why the naive baseline costs less per GiB than strand,
// when it does, from the two runs' line items: what strand pays above the
// naive design, largest first, and what the naive design gives up for
// that. It returns "" when the naive design costs as much or more.
//
// The naive design keeps one copy of each append in one bucket; strand's
// Express class writes K copies to buckets in different zones (the upload
// charge on every copy, cross-zone transfer on the remote ones), and both
// classes pay the absorb, transit storage and settle that make reads and
// retention work, which the naive design does not model.
func costGap(s, n Cost) string {
	if n.Total >= s.Total {
		return ""
	}
	items := []struct {
		name          string
		strand, naive float64
	}{
		{"cross-AZ copies", s.CrossAZ, n.CrossAZ},
		{"upload of every copy", s.ChainUpload, n.ChainUpload},
		{"PUTs", s.ChainPuts, n.ChainPuts},
		{"transit storage", s.TransitStore, n.TransitStore},
		{"metastore", s.Metastore, n.Metastore},
		{"absorb Lambda/SQS", s.Lambda, n.Lambda},
		{"settle", s.SettlePuts + s.Gets, n.SettlePuts + n.Gets},
		{"pass index PUTs", s.IndexPuts, n.IndexPuts},
	}
	sort.SliceStable(items, func(i, j int) bool {
		return items[i].strand-items[i].naive > items[j].strand-items[j].naive
	})
	var more []string
	for _, it := range items {
		if d := it.strand - it.naive; d > 0 {
			more = append(more, fmt.Sprintf("+$%.6f %s", d, it.name))
		}
	}
	why := "the naive design keeps one copy and is priced without absorb, transit storage or settle"
	if s.CrossAZ > 0 {
		why = "strand writes each flight to buckets in several zones and survives losing one; the naive design keeps one copy in one zone, lost with it"
	}
	return fmt.Sprintf("$%.6f/GiB less: strand pays %s per GiB; %s", s.Total-n.Total, strings.Join(more, ", "), why)
}
