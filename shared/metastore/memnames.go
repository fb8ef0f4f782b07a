package metastore

import (
	"slices"
	"strings"
)

// nameIndex keeps Mem's stream names in order for ListStreams, so that a
// page costs O(log n + limit) and allocates O(limit), whatever the number
// of streams (a million streams is a page of 1000 at a time, as on
// DynamoDB, where a page is one Query). Names created since the last page
// wait in added and are merged in, sorted, by the next page; a deleted
// name stays in sorted until more than half of it is stale, and pages skip
// it (live). Guarded by Mem's mutex.
type nameIndex struct {
	sorted []string // ascending, unique; may hold names since deleted
	added  []string // created since the last merge, in no order
	stale  int      // deletions since the last compaction
}

func (x *nameIndex) add(name string) { x.added = append(x.added, name) }

func (x *nameIndex) remove() { x.stale++ }

// merge brings added into sorted, and drops stale names when they are
// more than half of it.
func (x *nameIndex) merge(live func(string) bool) {
	if x.stale > len(x.sorted)/2 {
		x.sorted = slices.DeleteFunc(x.sorted, func(n string) bool { return !live(n) })
		x.stale = 0
	}
	if len(x.added) == 0 {
		return
	}
	slices.Sort(x.added)
	out := make([]string, 0, len(x.sorted)+len(x.added))
	i, j := 0, 0
	for i < len(x.sorted) || j < len(x.added) {
		var n string
		switch {
		case j == len(x.added) || (i < len(x.sorted) && x.sorted[i] < x.added[j]):
			n, i = x.sorted[i], i+1
		default:
			n, j = x.added[j], j+1
		}
		if len(out) == 0 || out[len(out)-1] != n { // a name deleted and created again
			out = append(out, n)
		}
	}
	x.sorted, x.added = out, nil
}

// page is up to n live names under prefix after startAfter, in order.
func (x *nameIndex) page(prefix, startAfter string, n int, live func(string) bool) []string {
	x.merge(live)
	i, _ := slices.BinarySearch(x.sorted, max(prefix, startAfter))
	var out []string
	for ; i < len(x.sorted) && len(out) < n; i++ {
		name := x.sorted[i]
		if name <= startAfter || !live(name) {
			continue
		}
		if !strings.HasPrefix(name, prefix) {
			break
		}
		out = append(out, name)
	}
	return out
}
