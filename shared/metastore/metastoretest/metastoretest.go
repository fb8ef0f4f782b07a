package metastoretest

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/strandlog/strand/shared/metastore"
)

// Racers is how many goroutines each race test runs.
const Racers = 32

// Run runs the conformance suite against the stores open returns.
func Run(t *testing.T, open func(t *testing.T) metastore.Store) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s metastore.Store)
	}{
		{"CreateStream", testCreateStream},
		{"CreateStreamInvalid", testCreateStreamInvalid},
		{"GetStreamMissing", testGetStreamMissing},
		{"ListStreams", testListStreams},
		{"SetStreamState", testSetStreamState},
		{"DeleteStream", testDeleteStream},
		{"PutRefsIdempotent", testPutRefsIdempotent},
		{"PutRefsInvalid", testPutRefsInvalid},
		{"QueryRefsPaged", testQueryRefsPaged},
		{"QueryRefsFromSeq", testQueryRefsFromSeq},
		{"LastRef", testLastRef},
		{"SwapRefs", testSwapRefs},
		{"SwapRefsInvalid", testSwapRefsInvalid},
		{"RefProducerMarks", testRefProducerMarks},
		{"RefCommands", testRefCommands},
		{"DeleteRefs", testDeleteRefs},
		{"DeleteRefsConditional", testDeleteRefsConditional},
		{"RaiseFloor", testRaiseFloor},
		{"SetStreamConfig", testSetStreamConfig},
		{"MoveStream", testMoveStream},
		{"RefTooLarge", testRefTooLarge},
		{"PutRefsOverTxBytes", testPutRefsOverTxBytes},
		{"ItemTooLarge", testItemTooLarge},
		{"QueryRefsOverOnePage", testQueryRefsOverOnePage},
		{"RefsBefore", testRefsBefore},
		{"MintEpoch", testMintEpoch},
		{"MintEpochInvalid", testMintEpochInvalid},
		{"AdvanceCursor", testAdvanceCursor},
		{"UpdateEpoch", testUpdateEpoch},
		{"Tokens", testTokens},
		{"DeleteAndListTokens", testDeleteAndListTokens},
		{"NoAliasing", testNoAliasing},
		{"CanceledContext", testCanceledContext},
		{"RaceAdvanceCursor", testRaceAdvanceCursor},
		{"RaceMintEpoch", testRaceMintEpoch},
		{"RaceFirstMint", testRaceFirstMint},
		{"RaceCreateStream", testRaceCreateStream},
		{"RaceSwapRefs", testRaceSwapRefs},
		{"AbsorbLease", testAbsorbLease},
		{"PutRefsNeedsLease", testPutRefsNeedsLease},
		{"StalePassRefused", testStalePassRefused},
		{"RaceBeginAbsorb", testRaceBeginAbsorb},
		{"SettleRef", testSettleRef},
		{"FlushedCursor", testFlushedCursor},
		{"MergedCursor", testMergedCursor},
		{"MoveCursors", testMoveCursors},
		{"RaceMoveCursors", testRaceMoveCursors},
		{"IndexedCursor", testIndexedCursor},
		{"SwitchedChain", testSwitchedChain},
		{"SettleRefInvalid", testSettleRefInvalid},
		{"RaceSettleRef", testRaceSettleRef},
		{"SettleRefApart", testSettleRefApart},
		{"RaceSettleRefApart", testRaceSettleRefApart},
		{"Lease", testLease},
		{"LeaseInvalid", testLeaseInvalid},
		{"RaceLease", testRaceLease},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := open(t)
			if s == nil {
				t.Fatal("open returned a nil store")
			}
			tc.fn(t, s)
		})
	}
}

// Fixtures.

func sid(n int) string { return fmt.Sprintf("%032x", n) }

func hash(n int) string { return fmt.Sprintf("%064x", n) }

func newStream(name string, n int) metastore.Stream {
	return metastore.Stream{
		Name:        name,
		ID:          sid(n),
		Class:       metastore.Standard,
		Star:        "star-1",
		CreatedMs:   1_700_000_000_000 + int64(n),
		RetentionMs: 86_400_000,
		State:       metastore.StreamActive,
	}
}

// newRef is a ref of stream id over [first, last] with two locations.
func newRef(id string, first, last uint64) metastore.Ref {
	return metastore.Ref{
		StreamID:  id,
		FirstSeq:  first,
		LastSeq:   last,
		FirstTsMs: int64(first) * 10,
		LastTsMs:  int64(last) * 10,
		Bytes:     int64(last-first+1) * 100,
		Locations: []metastore.Location{
			{Settled: false, Key: fmt.Sprintf("chains/star-1/%020d/%020d", 1, first), Offset: 60, Length: 50},
			{Settled: true, Key: fmt.Sprintf("streams/%s/%d-%d", id, first, last), Offset: 0, Length: int64(last-first+1)*100 - 50},
		},
	}
}

var chainA = metastore.ChainID{Star: "star-1", Class: metastore.Express}

// refChain is the chain under whose absorb lease the ref tests write.
var refChain = metastore.ChainID{Star: "star-refs", Class: metastore.Standard}

// putRefs writes refs the way an absorb pass does: under the lease of a
// pass on refChain, minting the chain and taking the lease on first use.
func putRefs(t *testing.T, s metastore.Store, refs []metastore.Ref) error {
	t.Helper()
	ctx := t.Context()
	h, err := s.GetHead(ctx, refChain)
	if errors.Is(err, metastore.ErrNotFound) {
		must(t, s.MintEpoch(ctx, refChain, 0, newEpoch(1)), "mint the ref chain")
		h, err = s.GetHead(ctx, refChain)
	}
	must(t, err, "head of the ref chain")
	if h.Absorbing.IsZero() {
		h, err = s.BeginAbsorb(ctx, refChain, h.Checkpoint, metastore.Cursor{Epoch: h.Checkpoint.Epoch, Slot: h.Checkpoint.Slot + 1000})
		must(t, err, "lease on the ref chain")
	}
	return s.PutRefs(ctx, refChain, h.Absorbing, refs)
}

func newEpoch(n uint64) metastore.Epoch {
	e := metastore.Epoch{
		Epoch:   n,
		State:   metastore.EpochActive,
		K:       3,
		W:       2,
		Buckets: []string{"b-az1", "b-az2", "b-az3"},
		Window:  8,
	}
	e.Nonce[0], e.Nonce[15] = byte(n), 0xa5
	return e
}

// Assertions.

func wantErr(t *testing.T, err, target error, what string) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("%s: got error %v, want %v", what, err, target)
	}
}

func must(t *testing.T, err error, what string) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

func wantEqual(t *testing.T, got, want any, what string) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%s:\n got  %+v\n want %+v", what, got, want)
	}
}

func wantRefs(t *testing.T, got, want []metastore.Ref, what string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: got %d refs %v, want %d refs %v", what, len(got), spans(got), len(want), spans(want))
	}
	for i := range got {
		if !metastore.EqualRef(got[i], want[i]) {
			t.Fatalf("%s: ref %d:\n got  %+v\n want %+v", what, i, got[i], want[i])
		}
	}
}

func spans(refs []metastore.Ref) []string {
	out := make([]string, len(refs))
	for i, r := range refs {
		out[i] = fmt.Sprintf("%d-%d", r.FirstSeq, r.LastSeq)
	}
	return out
}

func allRefs(t *testing.T, s metastore.Store, id string) []metastore.Ref {
	t.Helper()
	var refs []metastore.Ref
	for from := uint64(0); ; {
		page, err := s.QueryRefs(t.Context(), id, from, 1000)
		must(t, err, "query all refs")
		if len(page) == 0 {
			return refs
		}
		refs = append(refs, page...)
		if page[len(page)-1].LastSeq == ^uint64(0) {
			return refs
		}
		from = page[len(page)-1].LastSeq + 1
	}
}

// race runs fn(i) for i in [0, Racers) concurrently, all released at once,
// and returns their errors by i.
func race(fn func(i int) error) []error {
	errs := make([]error, Racers)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range Racers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			errs[i] = fn(i)
		}()
	}
	close(start)
	wg.Wait()
	return errs
}

// oneWinner checks that exactly one error is nil and every other one is
// loser, and returns the winner's index.
func oneWinner(t *testing.T, errs []error, loser error) int {
	t.Helper()
	winner := -1
	for i, err := range errs {
		switch {
		case err == nil && winner >= 0:
			t.Fatalf("racers %d and %d both won", winner, i)
		case err == nil:
			winner = i
		case !errors.Is(err, loser):
			t.Fatalf("racer %d: got error %v, want nil or %v", i, err, loser)
		}
	}
	if winner < 0 {
		t.Fatalf("no racer won: %v", errs[0])
	}
	return winner
}

// Streams.

func testCreateStream(t *testing.T, s metastore.Store) {
	ctx := t.Context()
	a := newStream("orders", 1)
	got, err := s.CreateStream(ctx, a)
	must(t, err, "create")
	wantEqual(t, got, a, "created stream")
	got, err = s.GetStream(ctx, "orders")
	must(t, err, "get")
	wantEqual(t, got, a, "stored stream")

	// Create-if-absent: a second create (another id, another class) returns
	// ErrExists and the stream that is there, and changes nothing.
	b := newStream("orders", 2)
	b.Class = metastore.Express
	got, err = s.CreateStream(ctx, b)
	wantErr(t, err, metastore.ErrExists, "second create")
	wantEqual(t, got, a, "stream returned with ErrExists")
	// Creating exactly the same stream again is ErrExists too.
	got, err = s.CreateStream(ctx, a)
	wantErr(t, err, metastore.ErrExists, "identical second create")
	wantEqual(t, got, a, "stream returned with ErrExists")
	got, err = s.GetStream(ctx, "orders")
	must(t, err, "get after second create")
	wantEqual(t, got, a, "stored stream after second create")

	// A timestamp policy round-trips, through get and list.
	for i, ts := range []metastore.Timestamping{
		{Mode: metastore.TimestampArrival, Uncapped: true},
		{Mode: metastore.TimestampClientRequire},
		{Uncapped: true},
	} {
		st := newStream(fmt.Sprintf("stamped-%d", i), 10+i)
		st.Timestamping = ts
		got, err := s.CreateStream(ctx, st)
		must(t, err, "create with a timestamp policy")
		wantEqual(t, got, st, "created stream with a timestamp policy")
		got, err = s.GetStream(ctx, st.Name)
		must(t, err, "get with a timestamp policy")
		wantEqual(t, got, st, "stored stream with a timestamp policy")
		list, _, err := s.ListStreams(ctx, st.Name, "", 10)
		must(t, err, "list with a timestamp policy")
		wantEqual(t, list, []metastore.Stream{st}, "listed stream with a timestamp policy")
	}
}

func testCreateStreamInvalid(t *testing.T, s metastore.Store) {
	ctx := t.Context()
	mod := func(f func(*metastore.Stream)) metastore.Stream {
		st := newStream("bad", 1)
		f(&st)
		return st
	}
	cases := map[string]metastore.Stream{
		"empty name":      mod(func(s *metastore.Stream) { s.Name = "" }),
		"control char":    mod(func(s *metastore.Stream) { s.Name = "bad\x00" }),
		"short id":        mod(func(s *metastore.Stream) { s.ID = "abc" }),
		"uppercase id":    mod(func(s *metastore.Stream) { s.ID = "ABCDEF0123456789ABCDEF0123456789" }),
		"no class":        mod(func(s *metastore.Stream) { s.Class = 0 }),
		"empty star":      mod(func(s *metastore.Stream) { s.Star = "" }),
		"star with #":     mod(func(s *metastore.Stream) { s.Star = "a#b" }),
		"state deleting":  mod(func(s *metastore.Stream) { s.State = metastore.StreamDeleting }),
		"state zero":      mod(func(s *metastore.Stream) { s.State = 0 }),
		"negative retain": mod(func(s *metastore.Stream) { s.RetentionMs = -1 }),
		"timestamp mode":  mod(func(s *metastore.Stream) { s.Timestamping.Mode = 3 }),
	}
	for what, st := range cases {
		_, err := s.CreateStream(ctx, st)
		wantErr(t, err, metastore.ErrInvalid, what)
		if st.Name != "" {
			_, err = s.GetStream(ctx, st.Name)
			wantErr(t, err, metastore.ErrNotFound, what+": get after refused create")
		}
	}
}

func testGetStreamMissing(t *testing.T, s metastore.Store) {
	_, err := s.GetStream(t.Context(), "nope")
	wantErr(t, err, metastore.ErrNotFound, "get missing stream")
}

func testListStreams(t *testing.T, s metastore.Store) {
	ctx := t.Context()
	const n, page = 25, 7
	var want []string
	// Create in an order that is not name order.
	for i := range n {
		j := (i * 11) % n
		name := fmt.Sprintf("app/s%02d", j)
		_, err := s.CreateStream(ctx, newStream(name, 100+j))
		must(t, err, "create "+name)
	}
	for i := range n {
		want = append(want, fmt.Sprintf("app/s%02d", i))
	}
	for i, name := range []string{"ap", "apq", "app", "zzz/x"} { // outside the prefix "app/"
		_, err := s.CreateStream(ctx, newStream(name, 200+i))
		must(t, err, "create "+name)
	}

	list := func(prefix, startAfter string) []string {
		t.Helper()
		var names []string
		for pages := 0; ; pages++ {
			if pages > n {
				t.Fatalf("list %q: more than %d pages", prefix, n)
			}
			got, next, err := s.ListStreams(ctx, prefix, startAfter, page)
			must(t, err, "list")
			if len(got) > page {
				t.Fatalf("list %q after %q: %d streams in a page of %d", prefix, startAfter, len(got), page)
			}
			for _, st := range got {
				names = append(names, st.Name)
			}
			if next == "" {
				return names
			}
			// A page that says more may follow is full and ends at next.
			if len(got) != page || got[len(got)-1].Name != next {
				t.Fatalf("list %q after %q: %d streams with next %q", prefix, startAfter, len(got), next)
			}
			startAfter = next
		}
	}

	wantEqual(t, list("app/", ""), want, "paged list of app/")
	wantEqual(t, list("app/", "app/s10"), want[11:], "list of app/ after app/s10")
	wantEqual(t, list("app/", "a"), want, "list of app/ after a name before the prefix")
	wantEqual(t, list("app/", "app/s24"), []string(nil), "list after the last")
	wantEqual(t, list("app/", "b"), []string(nil), "list after a name past the prefix")
	wantEqual(t, list("nothing/", ""), []string(nil), "list of an unused prefix")
	all := list("", "")
	if len(all) != n+4 {
		t.Fatalf("list all: %d streams, want %d", len(all), n+4)
	}
	for i := 1; i < len(all); i++ {
		if all[i-1] >= all[i] {
			t.Fatalf("list all: %q before %q", all[i-1], all[i])
		}
	}

	// Streams come back whole.
	got, _, err := s.ListStreams(ctx, "app/s03", "", 1)
	must(t, err, "list one")
	wantEqual(t, got, []metastore.Stream{newStream("app/s03", 103)}, "listed stream")

	for _, limit := range []int{0, -1} {
		_, _, err := s.ListStreams(ctx, "", "", limit)
		wantErr(t, err, metastore.ErrInvalid, fmt.Sprintf("list with limit %d", limit))
	}
}

func testSetStreamState(t *testing.T, s metastore.Store) {
	ctx := t.Context()
	a := newStream("orders", 1)
	_, err := s.CreateStream(ctx, a)
	must(t, err, "create")

	wantErr(t, s.SetStreamState(ctx, "missing", sid(1), metastore.StreamDeleting), metastore.ErrNotFound, "set state of missing stream")
	wantErr(t, s.SetStreamState(ctx, "orders", sid(2), metastore.StreamDeleting), metastore.ErrConflict, "set state with wrong id")
	wantErr(t, s.SetStreamState(ctx, "orders", sid(1), 9), metastore.ErrInvalid, "set unknown state")
	got, err := s.GetStream(ctx, "orders")
	must(t, err, "get")
	wantEqual(t, got, a, "stream after refused state changes")

	must(t, s.SetStreamState(ctx, "orders", sid(1), metastore.StreamActive), "set active on active")
	must(t, s.SetStreamState(ctx, "orders", sid(1), metastore.StreamDeleting), "set deleting")
	must(t, s.SetStreamState(ctx, "orders", sid(1), metastore.StreamDeleting), "set deleting again")
	// Deleting retires the name: the stream is listed among the deleting
	// ones, by id, and no longer by its name.
	want := a
	want.State = metastore.StreamDeleting
	_, err = s.GetStream(ctx, "orders")
	wantErr(t, err, metastore.ErrNotFound, "get a deleting stream by its name")
	if list, _, err := s.ListStreams(ctx, "", "", 10); err != nil || len(list) != 0 {
		t.Fatalf("listed %d streams (%v) after the only one was set deleting", len(list), err)
	}
	deleting, next, err := s.ListDeleting(ctx, "", 10)
	must(t, err, "list deleting")
	wantEqual(t, deleting, []metastore.Stream{want}, "deleting streams")
	wantEqual(t, next, "", "next after the deleting streams")

	// Deleting is final.
	wantErr(t, s.SetStreamState(ctx, "orders", sid(1), metastore.StreamActive), metastore.ErrConflict, "undelete")
	deleting, _, err = s.ListDeleting(ctx, "", 10)
	must(t, err, "list deleting")
	wantEqual(t, deleting, []metastore.Stream{want}, "deleting streams after a refused undelete")
}

// testDeleteStream: a deleted name can be created again at once, under a
// new id, while the old id waits among the deleting streams; removing the
// old one leaves the new one alone.
func testDeleteStream(t *testing.T, s metastore.Store) {
	ctx := t.Context()
	_, err := s.CreateStream(ctx, newStream("orders", 1))
	must(t, err, "create")

	must(t, s.DeleteStream(ctx, "missing", sid(1)), "delete missing stream")
	must(t, s.DeleteStream(ctx, "orders", sid(2)), "delete another id")
	_, err = s.GetStream(ctx, "orders")
	must(t, err, "get after deleting another id")

	must(t, s.SetStreamState(ctx, "orders", sid(1), metastore.StreamDeleting), "set deleting")
	// The name is free at once, under a new id.
	b := newStream("orders", 2)
	got, err := s.CreateStream(ctx, b)
	must(t, err, "recreate while the old one is deleting")
	wantEqual(t, got, b, "recreated")
	old := newStream("orders", 1)
	old.State = metastore.StreamDeleting
	deleting, _, err := s.ListDeleting(ctx, "", 10)
	must(t, err, "list deleting")
	wantEqual(t, deleting, []metastore.Stream{old}, "the old incarnation, deleting")
	must(t, s.SetStreamState(ctx, "orders", sid(1), metastore.StreamDeleting), "set the old one deleting again")

	// Trim removes the old incarnation: the new one stays.
	must(t, s.DeleteStream(ctx, "orders", sid(1)), "delete the old incarnation")
	must(t, s.DeleteStream(ctx, "orders", sid(1)), "delete it again")
	deleting, _, err = s.ListDeleting(ctx, "", 10)
	must(t, err, "list deleting")
	wantEqual(t, len(deleting), 0, "deleting streams after the delete")
	got, err = s.GetStream(ctx, "orders")
	must(t, err, "get recreated")
	wantEqual(t, got, b, "recreated stream")

	// A stream deleted in place (state deleting at its name: stores
	// written before names were retired) is removed by its name.
	must(t, s.SetStreamState(ctx, "orders", sid(2), metastore.StreamDeleting), "set the new one deleting")
	must(t, s.DeleteStream(ctx, "orders", sid(2)), "delete the new one")
	_, err = s.GetStream(ctx, "orders")
	wantErr(t, err, metastore.ErrNotFound, "get deleted")

	// Pages of deleting streams, in id order.
	for i := 10; i < 15; i++ {
		st := newStream(fmt.Sprintf("p%d", i), i)
		_, err := s.CreateStream(ctx, st)
		must(t, err, "create")
		must(t, s.SetStreamState(ctx, st.Name, st.ID, metastore.StreamDeleting), "set deleting")
	}
	var ids []string
	for after := ""; ; {
		page, next, err := s.ListDeleting(ctx, after, 2)
		must(t, err, "list deleting")
		if len(page) > 2 {
			t.Fatalf("a page of %d deleting streams, limit 2", len(page))
		}
		for _, st := range page {
			ids = append(ids, st.ID)
		}
		if next == "" {
			break
		}
		after = next
	}
	wantEqual(t, ids, []string{sid(10), sid(11), sid(12), sid(13), sid(14)}, "deleting streams by pages")
	_, _, err = s.ListDeleting(ctx, "", 0)
	wantErr(t, err, metastore.ErrInvalid, "list deleting with limit 0")
}

// Refs.

func testPutRefsIdempotent(t *testing.T, s metastore.Store) {
	ctx := t.Context()
	r := newRef(sid(1), 0, 9)
	must(t, putRefs(t, s, []metastore.Ref{r}), "put")
	must(t, putRefs(t, s, []metastore.Ref{r}), "put again")
	wantRefs(t, allRefs(t, s, sid(1)), []metastore.Ref{r}, "refs after two puts")
	last, err := s.LastRef(ctx, sid(1))
	must(t, err, "last ref")
	wantRefs(t, []metastore.Ref{last}, []metastore.Ref{r}, "last ref")

	must(t, putRefs(t, s, nil), "put no refs")

	// A put at the same key overwrites (last writer wins).
	r2 := r
	r2.LastSeq, r2.Bytes = 4, 123
	r2.Locations = r.Locations[:1]
	must(t, putRefs(t, s, []metastore.Ref{r2}), "overwrite")
	wantRefs(t, allRefs(t, s, sid(1)), []metastore.Ref{r2}, "refs after overwrite")

	// Refs of another stream are apart.
	o := newRef(sid(2), 0, 9)
	must(t, putRefs(t, s, []metastore.Ref{o}), "put other stream")
	wantRefs(t, allRefs(t, s, sid(1)), []metastore.Ref{r2}, "refs of stream 1")
	wantRefs(t, allRefs(t, s, sid(2)), []metastore.Ref{o}, "refs of stream 2")
}

func testPutRefsInvalid(t *testing.T, s metastore.Store) {
	good := newRef(sid(1), 0, 9)
	mod := func(f func(*metastore.Ref)) metastore.Ref {
		r := newRef(sid(1), 10, 19)
		f(&r)
		return r
	}
	cases := map[string][]metastore.Ref{
		"bad stream id":   {good, mod(func(r *metastore.Ref) { r.StreamID = "x" })},
		"first > last":    {good, mod(func(r *metastore.Ref) { r.FirstSeq = 20 })},
		"no locations":    {good, mod(func(r *metastore.Ref) { r.Locations = nil })},
		"empty key":       {good, mod(func(r *metastore.Ref) { r.Locations[0].Key = "" })},
		"negative offset": {good, mod(func(r *metastore.Ref) { r.Locations[1].Offset = -1 })},
		"negative bytes":  {good, mod(func(r *metastore.Ref) { r.Bytes = -1 })},
		"duplicate key":   {good, mod(func(r *metastore.Ref) { r.FirstSeq = 0 })},
	}
	for what, refs := range cases {
		wantErr(t, putRefs(t, s, refs), metastore.ErrInvalid, what)
		// A refused batch writes nothing, not even its valid refs.
		wantRefs(t, allRefs(t, s, sid(1)), nil, what+": refs after refused put")
	}
}

func testQueryRefsPaged(t *testing.T, s metastore.Store) {
	ctx := t.Context()
	const n = 150
	var want []metastore.Ref
	for i := range uint64(n) {
		want = append(want, newRef(sid(1), i*10, i*10+9))
	}
	// Put in batches, out of order, with another stream's refs interleaved.
	for _, b := range [][2]int{{100, 150}, {0, 50}, {50, 100}} {
		batch := append([]metastore.Ref(nil), want[b[0]:b[1]]...)
		batch = append(batch, newRef(sid(2), uint64(b[0])*10, uint64(b[0])*10+9))
		must(t, putRefs(t, s, batch), "put batch")
	}

	// Page through by fromSeq = last.LastSeq+1.
	var got []metastore.Ref
	from := uint64(0)
	for pages := 0; ; pages++ {
		if pages > n {
			t.Fatal("query: too many pages")
		}
		page, err := s.QueryRefs(ctx, sid(1), from, 40)
		must(t, err, "query")
		if len(page) > 40 {
			t.Fatalf("query: %d refs for limit 40", len(page))
		}
		if len(page) == 0 {
			break
		}
		got = append(got, page...)
		from = page[len(page)-1].LastSeq + 1
	}
	wantRefs(t, got, want, "paged refs")

	page, err := s.QueryRefs(ctx, sid(1), 0, 40)
	must(t, err, "query first page")
	wantRefs(t, page, want[:40], "first page")
	page, err = s.QueryRefs(ctx, sid(1), 1234, 3)
	must(t, err, "query in the middle")
	wantRefs(t, page, want[123:126], "page from 1234")
	page, err = s.QueryRefs(ctx, sid(1), 0, 1000)
	must(t, err, "query all")
	wantRefs(t, page, want, "all refs in one call")

	for _, limit := range []int{0, -1} {
		_, err := s.QueryRefs(ctx, sid(1), 0, limit)
		wantErr(t, err, metastore.ErrInvalid, fmt.Sprintf("query with limit %d", limit))
	}
}

func testQueryRefsFromSeq(t *testing.T, s metastore.Store) {
	ctx := t.Context()
	a, b, c := newRef(sid(1), 5, 9), newRef(sid(1), 20, 29), newRef(sid(1), 30, 30)
	must(t, putRefs(t, s, []metastore.Ref{c, a, b}), "put")
	all := []metastore.Ref{a, b, c}
	cases := []struct {
		from uint64
		want []metastore.Ref
	}{
		{0, all},          // before the first ref
		{5, all},          // at a ref's first seq
		{9, all},          // at a ref's last seq
		{10, all[1:]},     // in a gap
		{25, all[1:]},     // inside a ref
		{29, all[1:]},     // at a ref's last seq
		{30, all[2:]},     // a one-seq ref
		{31, nil},         // past the end
		{^uint64(0), nil}, // far past the end
	}
	for _, tc := range cases {
		got, err := s.QueryRefs(ctx, sid(1), tc.from, 10)
		must(t, err, "query")
		wantRefs(t, got, tc.want, fmt.Sprintf("refs from %d", tc.from))
	}
	got, err := s.QueryRefs(ctx, sid(9), 0, 10)
	must(t, err, "query stream without refs")
	wantRefs(t, got, nil, "refs of stream without refs")

	// Seqs near the top of the range sort numerically.
	top := newRef(sid(3), ^uint64(0)-9, ^uint64(0))
	low := newRef(sid(3), 0, 99)
	mid := newRef(sid(3), 1<<40, 1<<40+5)
	must(t, putRefs(t, s, []metastore.Ref{top, low, mid}), "put extreme refs")
	wantRefs(t, allRefs(t, s, sid(3)), []metastore.Ref{low, mid, top}, "extreme refs")
	last, err := s.LastRef(ctx, sid(3))
	must(t, err, "last ref")
	wantRefs(t, []metastore.Ref{last}, []metastore.Ref{top}, "last extreme ref")
}

func testLastRef(t *testing.T, s metastore.Store) {
	ctx := t.Context()
	_, err := s.LastRef(ctx, sid(1))
	wantErr(t, err, metastore.ErrNotFound, "last ref of stream without refs")

	var refs []metastore.Ref
	for i := range uint64(12) {
		refs = append(refs, newRef(sid(1), i*100, i*100+99))
	}
	must(t, putRefs(t, s, refs[6:]), "put high")
	must(t, putRefs(t, s, refs[:6]), "put low")
	must(t, putRefs(t, s, []metastore.Ref{newRef(sid(2), 5000, 5001)}), "put other stream")
	last, err := s.LastRef(ctx, sid(1))
	must(t, err, "last ref")
	wantRefs(t, []metastore.Ref{last}, refs[11:], "last ref")

	must(t, s.DeleteRefs(ctx, refs[11:]), "delete last")
	last, err = s.LastRef(ctx, sid(1))
	must(t, err, "last ref after delete")
	wantRefs(t, []metastore.Ref{last}, refs[10:11], "last ref after delete")
}

func testSwapRefs(t *testing.T, s metastore.Store) {
	ctx := t.Context()
	a, b, c, d := newRef(sid(1), 0, 9), newRef(sid(1), 10, 19), newRef(sid(1), 20, 29), newRef(sid(1), 30, 39)
	must(t, putRefs(t, s, []metastore.Ref{a, b, c, d}), "put")
	other := newRef(sid(2), 0, 9)
	must(t, putRefs(t, s, []metastore.Ref{other}), "put other stream")

	r := newRef(sid(1), 0, 29)
	r.Locations = []metastore.Location{{Settled: true, Key: "streams/" + sid(1) + "/0-29", Offset: 0, Length: 3000}}
	must(t, s.SwapRefs(ctx, []metastore.Ref{a, b, c}, r), "swap")
	wantRefs(t, allRefs(t, s, sid(1)), []metastore.Ref{r, d}, "refs after swap")

	// The same swap again: the old refs are gone.
	wantErr(t, s.SwapRefs(ctx, []metastore.Ref{a, b, c}, r), metastore.ErrConflict, "second identical swap")
	wantRefs(t, allRefs(t, s, sid(1)), []metastore.Ref{r, d}, "refs after second swap")

	// An old ref that differs from the stored one, in any field, fails the
	// whole swap and changes nothing.
	whole := newRef(sid(1), 0, 39)
	for what, f := range staleVariants {
		d2 := d
		f(&d2)
		wantErr(t, s.SwapRefs(ctx, []metastore.Ref{r, d2}, whole), metastore.ErrConflict, "swap with stale "+what)
		wantRefs(t, allRefs(t, s, sid(1)), []metastore.Ref{r, d}, "refs after swap with stale "+what)
	}
	// An old ref that is missing fails too.
	e := newRef(sid(1), 40, 49)
	wantErr(t, s.SwapRefs(ctx, []metastore.Ref{r, d, e}, newRef(sid(1), 0, 49)), metastore.ErrConflict, "swap with a missing ref")
	wantRefs(t, allRefs(t, s, sid(1)), []metastore.Ref{r, d}, "refs after swap with a missing ref")

	// Swapping the covering ref and the next one works, and leaves the other
	// stream alone.
	must(t, s.SwapRefs(ctx, []metastore.Ref{r, d}, whole), "second swap")
	wantRefs(t, allRefs(t, s, sid(1)), []metastore.Ref{whole}, "refs after second swap")
	wantRefs(t, allRefs(t, s, sid(2)), []metastore.Ref{other}, "other stream's refs")

	// A one-ref swap rewrites a ref in place (e.g. to point at a settled
	// object).
	settled := whole
	settled.Locations = []metastore.Location{{Settled: true, Key: "streams/" + sid(1) + "/0-39", Length: 4000}}
	must(t, s.SwapRefs(ctx, []metastore.Ref{whole}, settled), "one-ref swap")
	wantRefs(t, allRefs(t, s, sid(1)), []metastore.Ref{settled}, "refs after one-ref swap")
}

// staleVariants change a ref in one field each: a stored ref that differs
// from the one given in any field is not "the ref that was read".
var staleVariants = map[string]func(*metastore.Ref){
	"bytes":    func(x *metastore.Ref) { x.Bytes++ },
	"last ts":  func(x *metastore.Ref) { x.LastTsMs++ },
	"location": func(x *metastore.Ref) { x.Locations = []metastore.Location{x.Locations[0], x.Locations[0]} },
	"offset": func(x *metastore.Ref) {
		x.Locations = append([]metastore.Location(nil), x.Locations...)
		x.Locations[0].Offset++
	},
	"settled": func(x *metastore.Ref) {
		x.Locations = append([]metastore.Location(nil), x.Locations...)
		x.Locations[0].Settled = !x.Locations[0].Settled
	},
}

func testSwapRefsInvalid(t *testing.T, s metastore.Store) {
	ctx := t.Context()
	a, b, c := newRef(sid(1), 0, 9), newRef(sid(1), 10, 19), newRef(sid(1), 20, 29)
	must(t, putRefs(t, s, []metastore.Ref{a, b, c}), "put")
	bad := newRef(sid(1), 0, 9)
	bad.Locations = nil
	tooMany := make([]metastore.Ref, metastore.MaxSwapRefs+1)
	for i := range tooMany {
		tooMany[i] = newRef(sid(1), uint64(i), uint64(i))
	}
	cases := []struct {
		what string
		old  []metastore.Ref
		repl metastore.Ref
	}{
		{"no old refs", nil, newRef(sid(1), 0, 9)},
		{"repl short", []metastore.Ref{a, b, c}, newRef(sid(1), 0, 28)},
		{"repl long", []metastore.Ref{a, b, c}, newRef(sid(1), 0, 30)},
		{"repl starts late", []metastore.Ref{a, b}, newRef(sid(1), 1, 19)},
		{"gap in old", []metastore.Ref{a, c}, newRef(sid(1), 0, 29)},
		{"old out of order", []metastore.Ref{b, a}, newRef(sid(1), 0, 19)},
		{"old repeated", []metastore.Ref{a, a}, newRef(sid(1), 0, 9)},
		{"repl of another stream", []metastore.Ref{a, b}, newRef(sid(2), 0, 19)},
		{"invalid repl", []metastore.Ref{a}, bad},
		{"too many old refs", tooMany, newRef(sid(1), 0, metastore.MaxSwapRefs)},
	}
	for _, tc := range cases {
		wantErr(t, s.SwapRefs(ctx, tc.old, tc.repl), metastore.ErrInvalid, tc.what)
		wantRefs(t, allRefs(t, s, sid(1)), []metastore.Ref{a, b, c}, tc.what+": refs after refused swap")
	}
}

func testDeleteRefs(t *testing.T, s metastore.Store) {
	ctx := t.Context()
	a, b, c := newRef(sid(1), 0, 9), newRef(sid(1), 10, 19), newRef(sid(1), 20, 29)
	o := newRef(sid(2), 0, 9)
	must(t, putRefs(t, s, []metastore.Ref{a, b, c, o}), "put")
	must(t, s.DeleteRefs(ctx, []metastore.Ref{a, c}), "delete")
	wantRefs(t, allRefs(t, s, sid(1)), []metastore.Ref{b}, "refs after delete")
	must(t, s.DeleteRefs(ctx, []metastore.Ref{a, c}), "delete again")
	must(t, s.DeleteRefs(ctx, []metastore.Ref{newRef(sid(1), 5, 5), newRef(sid(1), 999, 1000)}), "delete refs that never were")
	must(t, s.DeleteRefs(ctx, nil), "delete nothing")
	must(t, s.DeleteRefs(ctx, []metastore.Ref{newRef(sid(7), 0, 0)}), "delete in a stream without refs")
	wantRefs(t, allRefs(t, s, sid(1)), []metastore.Ref{b}, "refs after idempotent deletes")
	wantRefs(t, allRefs(t, s, sid(2)), []metastore.Ref{o}, "other stream's refs")
	must(t, s.DeleteRefs(ctx, []metastore.Ref{b}), "delete the last one")
	_, err := s.LastRef(ctx, sid(1))
	wantErr(t, err, metastore.ErrNotFound, "last ref after deleting all")

	bad := newRef(sid(2), 0, 9)
	bad.Locations = nil
	wantErr(t, s.DeleteRefs(ctx, []metastore.Ref{bad}), metastore.ErrInvalid, "delete an invalid ref")
	wantErr(t, s.DeleteRefs(ctx, []metastore.Ref{o, o}), metastore.ErrInvalid, "delete one ref twice")
	wantRefs(t, allRefs(t, s, sid(2)), []metastore.Ref{o}, "refs after refused deletes")
}

// testDeleteRefsConditional: a delete names the ref that was read; a ref
// swapped in at the same key since (settle merging it with its successor)
// is not deleted, and the batch deletes nothing (issue 13, finding 1).
func testDeleteRefsConditional(t *testing.T, s metastore.Store) {
	ctx := t.Context()
	p, r, q := newRef(sid(1), 0, 9), newRef(sid(1), 10, 19), newRef(sid(1), 20, 29)
	must(t, putRefs(t, s, []metastore.Ref{p, r, q}), "put")
	merged := newRef(sid(1), 0, 19)
	merged.Locations = []metastore.Location{{Settled: true, Key: "streams/" + sid(1) + "/0-19", Length: 2000}}
	must(t, s.SwapRefs(ctx, []metastore.Ref{p, r}, merged), "merge the first two")
	wantErr(t, s.DeleteRefs(ctx, []metastore.Ref{p}), metastore.ErrConflict, "delete the ref that was merged away")
	wantErr(t, s.DeleteRefs(ctx, []metastore.Ref{q, p}), metastore.ErrConflict, "delete a batch holding a merged-away ref")
	wantRefs(t, allRefs(t, s, sid(1)), []metastore.Ref{merged, q}, "refs after refused deletes")
	for what, f := range staleVariants {
		stale := q
		f(&stale)
		wantErr(t, s.DeleteRefs(ctx, []metastore.Ref{stale}), metastore.ErrConflict, "delete with a stale "+what)
	}
	wantRefs(t, allRefs(t, s, sid(1)), []metastore.Ref{merged, q}, "refs after stale deletes")
	must(t, s.DeleteRefs(ctx, []metastore.Ref{merged}), "delete the ref as it is")
	wantRefs(t, allRefs(t, s, sid(1)), []metastore.Ref{q}, "refs after delete")
}

// bigRef is a ref of stream id at [first, first] whose item is as close to
// metastore.MaxRefBytes as whole locations get, from below (over when over
// is set: one location more).
func bigRef(id string, first uint64, over bool) metastore.Ref {
	r := newRef(id, first, first)
	r.Locations = nil
	for i := 0; ; i++ {
		l := metastore.Location{Key: fmt.Sprintf("chains/star-1/%020d/%s", i, strings.Repeat("k", 8000)), Offset: int64(i), Length: 1, FirstSeq: first}
		if metastore.RefSize(r)+metastore.LocationSize(l) > metastore.MaxRefBytes {
			if over {
				r.Locations = append(r.Locations, l)
			}
			return r
		}
		r.Locations = append(r.Locations, l)
	}
}

// testRefTooLarge: a ref over MaxRefBytes is refused with ErrTooLarge by
// PutRefs and SwapRefs, and nothing is written.
func testRefTooLarge(t *testing.T, s metastore.Store) {
	ctx := t.Context()
	fits, over := bigRef(sid(1), 0, false), bigRef(sid(1), 1, true)
	must(t, metastore.CheckRefSize(fits), "the fitting ref")
	wantErr(t, putRefs(t, s, []metastore.Ref{fits, over}), metastore.ErrTooLarge, "put a ref over the bound")
	wantRefs(t, allRefs(t, s, sid(1)), nil, "refs after a refused put")
	must(t, putRefs(t, s, []metastore.Ref{fits}), "put the ref at the bound")
	wantRefs(t, allRefs(t, s, sid(1)), []metastore.Ref{fits}, "refs after put")
	repl := bigRef(sid(1), 0, true)
	wantErr(t, s.SwapRefs(ctx, []metastore.Ref{fits}, repl), metastore.ErrTooLarge, "swap in a ref over the bound")
	wantRefs(t, allRefs(t, s, sid(1)), []metastore.Ref{fits}, "refs after a refused swap")
}

// testPutRefsOverTxBytes: a PutRefs batch of many large refs, together
// far over one transaction's 4 MB, lands whole (issue 13, finding 2: cut
// by item count alone, DynamoDB refused it, and the absorb pass that
// wrote it was pinned forever).
func testPutRefsOverTxBytes(t *testing.T, s metastore.Store) {
	var refs []metastore.Ref
	total := 0
	for i := range metastore.MaxPutRefsPerTx {
		r := bigRef(sid(1), uint64(i), false)
		total += metastore.RefSize(r)
		refs = append(refs, r)
	}
	if total <= metastore.MaxTxBytes {
		t.Fatalf("the batch is %d bytes, want over %d", total, metastore.MaxTxBytes)
	}
	must(t, putRefs(t, s, refs), "put refs over 4 MB together")
	wantRefs(t, allRefs(t, s, sid(1)), refs, "refs after put")
}

// testRefsBefore: RefsBefore returns the refs that start before a seq,
// newest first, at most limit, another stream's never; a page is cut at
// 1 MB as DynamoDB's backward Query is (refs of about 56 KiB: 19 a page
// at most), and paging before the oldest ref returned lists every ref once.
func testRefsBefore(t *testing.T, s metastore.Store) {
	ctx := t.Context()
	a, b, c := newRef(sid(1), 5, 9), newRef(sid(1), 20, 29), newRef(sid(1), 30, 30)
	must(t, putRefs(t, s, []metastore.Ref{c, a, b, newRef(sid(2), 0, 100)}), "put")
	cases := []struct {
		before uint64
		limit  int
		want   []metastore.Ref
	}{
		{0, 10, nil}, {5, 10, nil}, {6, 10, []metastore.Ref{a}}, {25, 10, []metastore.Ref{b, a}},
		{31, 10, []metastore.Ref{c, b, a}}, {^uint64(0), 10, []metastore.Ref{c, b, a}}, {^uint64(0), 2, []metastore.Ref{c, b}},
	}
	for _, tc := range cases {
		got, err := s.RefsBefore(ctx, sid(1), tc.before, tc.limit)
		must(t, err, "refs before")
		wantRefs(t, got, tc.want, fmt.Sprintf("refs before %d (limit %d)", tc.before, tc.limit))
	}
	for _, limit := range []int{0, -1} {
		_, err := s.RefsBefore(ctx, sid(1), 10, limit)
		wantErr(t, err, metastore.ErrInvalid, fmt.Sprintf("refs before with limit %d", limit))
	}
	var refs []metastore.Ref
	for i := range 40 {
		r := bigRef(sid(3), 3*uint64(i), false)
		r.LastSeq = r.FirstSeq + 2
		refs = append(refs, r)
	}
	must(t, putRefs(t, s, refs), "put big refs")
	var got []metastore.Ref
	for before, pages := ^uint64(0), 0; ; pages++ {
		page, err := s.RefsBefore(ctx, sid(3), before, 100)
		must(t, err, "refs before, paged")
		if len(page) == 0 {
			break
		}
		size := 0
		for _, r := range page {
			size += metastore.RefSize(r)
		}
		if len(page) >= 40 || size-metastore.RefSize(page[len(page)-1]) >= metastore.MaxQueryBytes {
			t.Fatalf("a page of %d refs, %d bytes: over DynamoDB's 1 MB", len(page), size)
		}
		if pages > 40 {
			t.Fatal("refs before: too many pages")
		}
		got = append(got, page...)
		before = page[len(page)-1].FirstSeq
	}
	slices.Reverse(got)
	wantRefs(t, got, refs, "every ref, paged back")
}

// testQueryRefsOverOnePage: DynamoDB returns at most 1 MB per Query call,
// and so does QueryRefs in every implementation: a page stops after the
// ref with which the refs read reach MaxQueryBytes (by RefSize), short of
// the limit while more refs follow; the ref that starts before fromSeq (a
// Query of its own) does not count; paging on from the last ref's
// LastSeq+1 returns every ref once, in order, and only the end is empty.
func testQueryRefsOverOnePage(t *testing.T, s metastore.Store) {
	ctx := t.Context()
	var refs []metastore.Ref
	total := 0
	for i := range 40 {
		r := bigRef(sid(1), 3*uint64(i), false) // seqs 3i..3i+2
		r.LastSeq = r.FirstSeq + 2
		total += metastore.RefSize(r)
		refs = append(refs, r)
	}
	if total <= 2*metastore.MaxQueryBytes {
		t.Fatalf("the refs are %d bytes, want over two pages", total)
	}
	must(t, putRefs(t, s, refs), "put")
	// pageEnd: the index after the ref with which refs[from:] reach 1 MB
	// by RefSize, where memory and bolt cut (QueryPage). DynamoDB counts
	// an item as at most RefSize, so it cuts there or later, and the
	// adapter cuts its answer with QueryPage; the emulator counts more
	// than RefSize and cuts earlier. A page is therefore checked to be
	// a run of the refs, not empty, at most up to pageEnd, and, short of
	// the limit before the end, at least half of MaxQueryBytes.
	pageEnd := func(from int) int {
		n := 0
		for i := from; i < len(refs); i++ {
			if n += metastore.RefSize(refs[i]); n >= metastore.MaxQueryBytes {
				return i + 1
			}
		}
		return len(refs)
	}
	wantPage := func(got []metastore.Ref, start, limit int, what string) {
		t.Helper()
		end := min(start+limit, pageEnd(start))
		if len(got) == 0 || len(got) > end-start {
			t.Fatalf("%s: %d refs from ref %d, want 1 to %d (limit %d, 1 MB)", what, len(got), start, end-start, limit)
		}
		wantRefs(t, got, refs[start:start+len(got)], what)
		bytes := 0
		for _, r := range got {
			bytes += metastore.RefSize(r)
		}
		if len(got) < limit && start+len(got) < len(refs) && bytes < metastore.MaxQueryBytes/2 {
			t.Fatalf("%s: a short page of %d bytes, want it cut at 1 MB", what, bytes)
		}
	}
	if e := pageEnd(0); e >= 25 || e < 2 {
		t.Fatalf("the first page ends at ref %d, want a short page of 2 to 24 refs", e)
	}
	got, err := s.QueryRefs(ctx, sid(1), 0, 100)
	must(t, err, "query from 0")
	wantPage(got, 0, 100, "the first page: short, cut at 1 MB")
	got, err = s.QueryRefs(ctx, sid(1), 21, 25)
	must(t, err, "query from the middle")
	wantPage(got, 7, 25, "the page from seq 21 (ref 7)")
	// Seq 22 is inside ref 7: that ref is a Query of its own and does not
	// count towards the page of the refs after it.
	got, err = s.QueryRefs(ctx, sid(1), 22, 25)
	must(t, err, "query from inside a ref")
	wantRefs(t, got[:1], refs[7:8], "the ref that holds seq 22")
	wantPage(got[1:], 8, 24, "the page after the ref that holds seq 22")
	got, err = s.QueryRefs(ctx, sid(1), 22, 3)
	must(t, err, "query 3 from inside a ref")
	wantRefs(t, got, refs[7:10], "3 refs from seq 22: the limit before 1 MB")
	var pages, n int
	for from := uint64(0); ; pages++ {
		if pages > len(refs) {
			t.Fatal("paging: too many pages")
		}
		page, err := s.QueryRefs(ctx, sid(1), from, 100)
		must(t, err, "page")
		if len(page) == 0 {
			break
		}
		wantPage(page, n, 100, fmt.Sprintf("page %d", pages))
		n += len(page)
		from = page[len(page)-1].LastSeq + 1
	}
	if n != len(refs) || pages < 3 {
		t.Fatalf("paging returned %d refs in %d pages, want %d in 3 or more", n, pages, len(refs))
	}
	last, err := s.LastRef(ctx, sid(1))
	must(t, err, "last ref")
	wantRefs(t, []metastore.Ref{last}, refs[39:], "last ref")
}

// testItemTooLarge: other items over 400 KB (an epoch with too many
// buckets, a token with too many operations) are ErrTooLarge, and a star
// id too long for a partition key is ErrInvalid; nothing is written.
func testItemTooLarge(t *testing.T, s metastore.Store) {
	ctx := t.Context()
	e := newEpoch(1)
	e.K, e.W = 2000, 1
	e.Buckets = make([]string, e.K)
	for i := range e.Buckets {
		e.Buckets[i] = fmt.Sprintf("%s-%d", strings.Repeat("b", 250), i)
	}
	wantErr(t, s.MintEpoch(ctx, chainA, 0, e), metastore.ErrTooLarge, "mint an epoch over 400 KB")
	_, err := s.GetHead(ctx, chainA)
	wantErr(t, err, metastore.ErrNotFound, "head after a refused mint")

	tk := metastore.Token{Hash: hash(1), Ops: make([]string, 5000)}
	for i := range tk.Ops {
		tk.Ops[i] = strings.Repeat("o", 100)
	}
	wantErr(t, s.PutToken(ctx, tk), metastore.ErrTooLarge, "put a token over 400 KB")
	_, err = s.GetToken(ctx, hash(1))
	wantErr(t, err, metastore.ErrNotFound, "token after a refused put")

	long := metastore.ChainID{Star: strings.Repeat("s", metastore.MaxStarLen+1), Class: metastore.Standard}
	wantErr(t, s.MintEpoch(ctx, long, 0, newEpoch(1)), metastore.ErrInvalid, "mint on a star id over the bound")
}

// testRaiseFloor: the floor only grows, is kept on the stream (GetStream and
// ListStreams), and needs the stream's id.
func testRaiseFloor(t *testing.T, s metastore.Store) {
	ctx := t.Context()
	st := newStream("floored", 1)
	_, err := s.CreateStream(ctx, st)
	must(t, err, "create")
	floor := func(want uint64, what string) {
		t.Helper()
		got, err := s.GetStream(ctx, st.Name)
		must(t, err, what+": get")
		wantEqual(t, got.Floor, want, what+": floor")
		list, _, err := s.ListStreams(ctx, st.Name, "", 10)
		must(t, err, what+": list")
		if len(list) != 1 {
			t.Fatalf("%s: listed %d streams, want 1", what, len(list))
		}
		wantEqual(t, list[0], got, what+": listed stream")
	}
	floor(0, "new stream")
	must(t, s.RaiseFloor(ctx, st.Name, st.ID, 100), "raise to 100")
	floor(100, "after raise")
	must(t, s.RaiseFloor(ctx, st.Name, st.ID, 40), "lower to 40")
	floor(100, "after a lower floor")
	must(t, s.RaiseFloor(ctx, st.Name, st.ID, 100), "raise to 100 again")
	must(t, s.RaiseFloor(ctx, st.Name, st.ID, 101), "raise to 101")
	floor(101, "after raise by one")
	wantErr(t, s.RaiseFloor(ctx, st.Name, sid(2), 500), metastore.ErrConflict, "raise with another id")
	wantErr(t, s.RaiseFloor(ctx, "missing", sid(1), 500), metastore.ErrNotFound, "raise a missing stream")
	floor(101, "after refused raises")
	must(t, s.SetStreamState(ctx, st.Name, st.ID, metastore.StreamDeleting), "deleting")
	// Off its name, a deleting stream has no floor to raise (trim deletes
	// all of it).
	wantErr(t, s.RaiseFloor(ctx, st.Name, st.ID, 200), metastore.ErrNotFound, "raise a deleting stream")
}

// testSetStreamConfig: a stream's retention and timestamping change (GetStream
// and ListStreams agree, back to zero values too), only with its id, and
// bad values are refused.
func testSetStreamConfig(t *testing.T, s metastore.Store) {
	ctx := t.Context()
	st := newStream("configured", 1)
	_, err := s.CreateStream(ctx, st)
	must(t, err, "create")
	check := func(ret int64, ts metastore.Timestamping, what string) {
		t.Helper()
		got := listed(t, s, st.Name, what)
		wantEqual(t, got.RetentionMs, ret, what+": retention")
		wantEqual(t, got.Timestamping, ts, what+": timestamping")
	}
	arrival := metastore.Timestamping{Mode: metastore.TimestampArrival, Uncapped: true}
	must(t, s.SetStreamConfig(ctx, st.Name, st.ID, 86_400_000, arrival), "set")
	check(86_400_000, arrival, "after set")
	must(t, s.SetStreamConfig(ctx, st.Name, st.ID, 0, metastore.Timestamping{}), "set back")
	check(0, metastore.Timestamping{}, "after setting zero values")
	wantErr(t, s.SetStreamConfig(ctx, st.Name, sid(2), 5, arrival), metastore.ErrConflict, "another id")
	wantErr(t, s.SetStreamConfig(ctx, "missing", sid(1), 5, arrival), metastore.ErrNotFound, "a missing stream")
	wantErr(t, s.SetStreamConfig(ctx, st.Name, st.ID, -1, arrival), metastore.ErrInvalid, "negative retention")
	wantErr(t, s.SetStreamConfig(ctx, st.Name, st.ID, 5, metastore.Timestamping{Mode: 9}), metastore.ErrInvalid, "unknown mode")
	check(0, metastore.Timestamping{}, "after refused sets")
}

// listed returns stream name as GetStream has it, after checking that
// ListStreams lists the same (the one stream with that prefix).
func listed(t *testing.T, s metastore.Store, name, what string) metastore.Stream {
	t.Helper()
	got, err := s.GetStream(t.Context(), name)
	must(t, err, what+": get")
	list, _, err := s.ListStreams(t.Context(), name, "", 10)
	must(t, err, what+": list")
	if len(list) != 1 {
		t.Fatalf("%s: listed %d streams, want 1", what, len(list))
	}
	wantEqual(t, list[0], got, what+": listed stream")
	return got
}

// testMoveStream: a stream's leader changes only from the leader named,
// with its id, while active (ADR 0065); a retry is a no-op; GetStream and
// ListStreams agree.
func testMoveStream(t *testing.T, s metastore.Store) {
	ctx := t.Context()
	st := newStream("moving", 1)
	st.Star = "star-0"
	_, err := s.CreateStream(ctx, st)
	must(t, err, "create")
	check := func(want, what string) {
		t.Helper()
		wantEqual(t, listed(t, s, st.Name, what).Star, want, what+": leader")
	}
	must(t, s.MoveStream(ctx, st.Name, st.ID, "star-0", "star-1"), "move")
	check("star-1", "after the move")
	wantEqual(t, listed(t, s, st.Name, "after the move").From, "star-0", "after the move: the star it left")
	must(t, s.MoveStream(ctx, st.Name, st.ID, "star-0", "star-1"), "move again (a retry)")
	wantErr(t, s.MoveStream(ctx, st.Name, st.ID, "star-0", "star-2"), metastore.ErrConflict, "move from a star that no longer leads it")
	wantErr(t, s.MoveStream(ctx, st.Name, sid(2), "star-1", "star-2"), metastore.ErrConflict, "another id")
	wantErr(t, s.MoveStream(ctx, "missing", sid(1), "star-1", "star-2"), metastore.ErrNotFound, "a missing stream")
	wantErr(t, s.MoveStream(ctx, st.Name, st.ID, "star-1", ""), metastore.ErrInvalid, "no target")
	check("star-1", "after refused moves")
	must(t, s.MoveStream(ctx, st.Name, st.ID, "star-1", "star-0"), "move back")
	check("star-0", "after the move back")
	must(t, s.SetStreamState(ctx, st.Name, st.ID, metastore.StreamDeleting), "delete")
	wantErr(t, s.MoveStream(ctx, st.Name, st.ID, "star-0", "star-1"), metastore.ErrNotFound, "a deleting stream")
}

// Chains.

func testMintEpoch(t *testing.T, s metastore.Store) {
	ctx := t.Context()
	_, err := s.GetHead(ctx, chainA)
	wantErr(t, err, metastore.ErrNotFound, "head before the first mint")
	_, err = s.GetEpoch(ctx, chainA, 5)
	wantErr(t, err, metastore.ErrNotFound, "epoch before the first mint")
	wantErr(t, s.MintEpoch(ctx, chainA, 4, newEpoch(5)), metastore.ErrConflict, "mint with prev 4 on no head")
	_, err = s.GetHead(ctx, chainA)
	wantErr(t, err, metastore.ErrNotFound, "head after refused mint")

	// The first mint creates the head, all cursors at the epoch's slot 0.
	e5 := newEpoch(5)
	must(t, s.MintEpoch(ctx, chainA, 0, e5), "first mint")
	h, err := s.GetHead(ctx, chainA)
	must(t, err, "head")
	c := metastore.Cursor{Epoch: 5, Slot: 0}
	wantEqual(t, h, metastore.Head{Epoch: 5, Checkpoint: c, Settled: c, Trimmed: c, Flushed: c}, "head after first mint")
	got, err := s.GetEpoch(ctx, chainA, 5)
	must(t, err, "get epoch")
	wantEqual(t, got, e5, "minted epoch")

	// Wrong prev: a successor exists (or the caller is confused).
	for _, prev := range []uint64{0, 4} {
		wantErr(t, s.MintEpoch(ctx, chainA, prev, newEpoch(6)), metastore.ErrConflict, fmt.Sprintf("mint with prev %d", prev))
	}
	_, err = s.GetEpoch(ctx, chainA, 6)
	wantErr(t, err, metastore.ErrNotFound, "epoch of a refused mint")

	// Cursors carry over a mint.
	must(t, s.AdvanceCursor(ctx, chainA, metastore.Checkpoint, c, metastore.Cursor{Epoch: 5, Slot: 7}), "advance checkpoint")
	e6 := newEpoch(6)
	must(t, s.MintEpoch(ctx, chainA, 5, e6), "mint 6")
	h, err = s.GetHead(ctx, chainA)
	must(t, err, "head")
	wantEqual(t, h, metastore.Head{Epoch: 6, Checkpoint: metastore.Cursor{Epoch: 5, Slot: 7}, Settled: c, Trimmed: c, Flushed: c}, "head after mint 6")
	got, err = s.GetEpoch(ctx, chainA, 5)
	must(t, err, "get epoch 5")
	wantEqual(t, got, e5, "epoch 5 after mint 6")
	got, err = s.GetEpoch(ctx, chainA, 6)
	must(t, err, "get epoch 6")
	wantEqual(t, got, e6, "epoch 6")
	wantErr(t, s.MintEpoch(ctx, chainA, 5, newEpoch(7)), metastore.ErrConflict, "mint after a stale prev")

	// Epochs may skip numbers; they only grow.
	must(t, s.MintEpoch(ctx, chainA, 6, newEpoch(10)), "mint 10 after 6")
	h, err = s.GetHead(ctx, chainA)
	must(t, err, "head")
	if h.Epoch != 10 {
		t.Fatalf("head epoch %d after mint 10", h.Epoch)
	}

	// Chains are apart: same star, other class; other star, same class.
	for _, other := range []metastore.ChainID{{Star: "star-1", Class: metastore.Standard}, {Star: "star-2", Class: metastore.Express}} {
		_, err = s.GetHead(ctx, other)
		wantErr(t, err, metastore.ErrNotFound, "head of chain "+other.String())
		_, err = s.GetEpoch(ctx, other, 5)
		wantErr(t, err, metastore.ErrNotFound, "epoch 5 of chain "+other.String())
		must(t, s.MintEpoch(ctx, other, 0, newEpoch(1)), "first mint of "+other.String())
		h, err = s.GetHead(ctx, other)
		must(t, err, "head of "+other.String())
		if h.Epoch != 1 {
			t.Fatalf("head of %s: epoch %d, want 1", other, h.Epoch)
		}
	}
	h, err = s.GetHead(ctx, chainA)
	must(t, err, "head")
	if h.Epoch != 10 {
		t.Fatalf("head epoch %d after other chains' mints", h.Epoch)
	}
}

func testMintEpochInvalid(t *testing.T, s metastore.Store) {
	ctx := t.Context()
	mod := func(n uint64, f func(*metastore.Epoch)) metastore.Epoch {
		e := newEpoch(n)
		f(&e)
		return e
	}
	cases := []struct {
		what  string
		chain metastore.ChainID
		prev  uint64
		e     metastore.Epoch
	}{
		{"epoch 0", chainA, 0, newEpoch(0)},
		{"epoch equal to prev", chainA, 3, newEpoch(3)},
		{"epoch before prev", chainA, 3, newEpoch(2)},
		{"fenced", chainA, 0, mod(1, func(e *metastore.Epoch) { e.State = metastore.EpochFenced })},
		{"W > K", chainA, 0, mod(1, func(e *metastore.Epoch) { e.W = 4 })},
		{"W = 0", chainA, 0, mod(1, func(e *metastore.Epoch) { e.W = 0 })},
		{"buckets != K", chainA, 0, mod(1, func(e *metastore.Epoch) { e.Buckets = e.Buckets[:2] })},
		{"empty bucket", chainA, 0, mod(1, func(e *metastore.Epoch) { e.Buckets = []string{"a", "", "c"} })},
		{"window 0", chainA, 0, mod(1, func(e *metastore.Epoch) { e.Window = 0 })},
		{"cut set", chainA, 0, mod(1, func(e *metastore.Epoch) { e.Cut = 3 })},
		{"empty star", metastore.ChainID{Class: metastore.Express}, 0, newEpoch(1)},
		{"star with #", metastore.ChainID{Star: "a#b", Class: metastore.Express}, 0, newEpoch(1)},
		{"no class", metastore.ChainID{Star: "star-1"}, 0, newEpoch(1)},
	}
	for _, tc := range cases {
		wantErr(t, s.MintEpoch(ctx, tc.chain, tc.prev, tc.e), metastore.ErrInvalid, tc.what)
		_, err := s.GetHead(ctx, tc.chain)
		wantErr(t, err, metastore.ErrNotFound, tc.what+": head after refused mint")
	}
}

func testAdvanceCursor(t *testing.T, s metastore.Store) {
	ctx := t.Context()
	wantErr(t, s.AdvanceCursor(ctx, chainA, metastore.Checkpoint, at(1, 0), at(1, 1)), metastore.ErrNotFound, "advance before mint")
	must(t, s.MintEpoch(ctx, chainA, 0, newEpoch(1)), "mint")

	must(t, s.AdvanceCursor(ctx, chainA, metastore.Checkpoint, at(1, 0), at(1, 3)), "advance checkpoint")
	wantErr(t, s.AdvanceCursor(ctx, chainA, metastore.Checkpoint, at(1, 0), at(1, 4)), metastore.ErrConflict, "advance from a stale cursor")
	wantErr(t, s.AdvanceCursor(ctx, chainA, metastore.Checkpoint, at(1, 5), at(1, 6)), metastore.ErrConflict, "advance from a cursor ahead")
	wantErr(t, s.AdvanceCursor(ctx, chainA, metastore.Checkpoint, at(1, 3), at(1, 3)), metastore.ErrInvalid, "advance to the same cursor")
	wantErr(t, s.AdvanceCursor(ctx, chainA, metastore.Checkpoint, at(1, 3), at(1, 2)), metastore.ErrInvalid, "advance backward")
	wantErr(t, s.AdvanceCursor(ctx, chainA, metastore.Checkpoint, at(1, 3), at(0, 9)), metastore.ErrInvalid, "advance to an earlier epoch")
	wantErr(t, s.AdvanceCursor(ctx, chainA, 0, at(1, 3), at(1, 4)), metastore.ErrInvalid, "advance unknown cursor kind")
	wantErr(t, s.AdvanceCursor(ctx, chainA, 9, at(1, 3), at(1, 4)), metastore.ErrInvalid, "advance unknown cursor kind")

	// Cursors are independent: each CAS looks at its own cursor only.
	must(t, s.AdvanceCursor(ctx, chainA, metastore.Settled, at(1, 0), at(1, 2)), "advance settled")
	must(t, s.AdvanceCursor(ctx, chainA, metastore.Trimmed, at(1, 0), at(1, 1)), "advance trimmed")
	must(t, s.AdvanceCursor(ctx, chainA, metastore.Checkpoint, at(1, 3), at(2, 0)), "advance checkpoint into the next epoch")
	wantErr(t, s.AdvanceCursor(ctx, chainA, metastore.Settled, at(1, 0), at(1, 1)), metastore.ErrConflict, "stale settled")
	h, err := s.GetHead(ctx, chainA)
	must(t, err, "head")
	wantEqual(t, h, metastore.Head{Epoch: 1, Checkpoint: at(2, 0), Settled: at(1, 2), Trimmed: at(1, 1), Flushed: at(1, 0)}, "head after advances")
	for _, k := range []metastore.CursorKind{metastore.Checkpoint, metastore.Settled, metastore.Trimmed, metastore.Flushed} {
		from := h.Cursor(k)
		to := at(from.Epoch, from.Slot+10)
		must(t, s.AdvanceCursor(ctx, chainA, k, from, to), "advance "+k.String())
		h2, err := s.GetHead(ctx, chainA)
		must(t, err, "head")
		wantEqual(t, h2, metastore.SetCursor(h, k, to), "head after advancing "+k.String())
		h = h2
	}
}

func testUpdateEpoch(t *testing.T, s metastore.Store) {
	ctx := t.Context()
	e := newEpoch(3)
	wantErr(t, s.UpdateEpoch(ctx, chainA, metastore.EpochActive, metastore.Epoch{Epoch: 3, State: metastore.EpochFenced, Cut: 1}),
		metastore.ErrNotFound, "update before mint")
	must(t, s.MintEpoch(ctx, chainA, 0, e), "mint")
	wantErr(t, s.UpdateEpoch(ctx, chainA, metastore.EpochActive, metastore.Epoch{Epoch: 4, State: metastore.EpochFenced}),
		metastore.ErrNotFound, "update missing epoch")
	wantErr(t, s.UpdateEpoch(ctx, chainA, metastore.EpochActive, metastore.Epoch{Epoch: 3, State: 9}),
		metastore.ErrInvalid, "update to unknown state")
	got, err := s.GetEpoch(ctx, chainA, 3)
	must(t, err, "get")
	wantEqual(t, got, e, "epoch after refused updates")

	// Fence: only State and Cut are taken from the argument; the rest of the
	// epoch stays as minted.
	must(t, s.UpdateEpoch(ctx, chainA, metastore.EpochActive, metastore.Epoch{Epoch: 3, State: metastore.EpochFenced, Cut: 17, K: 9, Window: 1}), "fence")
	want := e
	want.State, want.Cut = metastore.EpochFenced, 17
	got, err = s.GetEpoch(ctx, chainA, 3)
	must(t, err, "get")
	wantEqual(t, got, want, "fenced epoch")

	// A second fencer loses the CAS, and sees the first one's cut.
	wantErr(t, s.UpdateEpoch(ctx, chainA, metastore.EpochActive, metastore.Epoch{Epoch: 3, State: metastore.EpochFenced, Cut: 18}),
		metastore.ErrConflict, "second fence")
	// A fenced epoch is final.
	wantErr(t, s.UpdateEpoch(ctx, chainA, metastore.EpochFenced, metastore.Epoch{Epoch: 3, State: metastore.EpochActive}),
		metastore.ErrInvalid, "unfence")
	wantErr(t, s.UpdateEpoch(ctx, chainA, metastore.EpochFenced, metastore.Epoch{Epoch: 3, State: metastore.EpochFenced, Cut: 20}),
		metastore.ErrInvalid, "recut")
	got, err = s.GetEpoch(ctx, chainA, 3)
	must(t, err, "get")
	wantEqual(t, got, want, "fenced epoch after refused updates")
	h, err := s.GetHead(ctx, chainA)
	must(t, err, "head")
	if h.Epoch != 3 {
		t.Fatalf("head epoch %d after fencing, want 3 (fencing does not mint)", h.Epoch)
	}
}

// Tokens.

func testTokens(t *testing.T, s metastore.Store) {
	ctx := t.Context()
	_, err := s.GetToken(ctx, hash(1))
	wantErr(t, err, metastore.ErrNotFound, "missing token")
	tok := metastore.Token{Hash: hash(1), Prefix: "app/", Ops: []string{"append", "read"}}
	must(t, s.PutToken(ctx, tok), "put")
	got, err := s.GetToken(ctx, hash(1))
	must(t, err, "get")
	wantEqual(t, got, tok, "token")

	// Expiry and revocation times round-trip (a revoke is a put).
	timed := metastore.Token{Hash: hash(5), Prefix: "app/", Ops: []string{"read"}, ExpiresMs: 1700000000123, RevokedMs: 1700000000456, Parent: hash(1)}
	must(t, s.PutToken(ctx, timed), "put with times")
	got, err = s.GetToken(ctx, hash(5))
	must(t, err, "get with times")
	wantEqual(t, got, timed, "token with times")
	all, err := s.ListTokens(ctx, "app/")
	must(t, err, "list with times")
	wantEqual(t, all, []metastore.Token{tok, timed}, "listed tokens with times")
	must(t, s.DeleteToken(ctx, hash(5)), "delete with times")

	// A token that starts a tenant, with its quotas, round-trips (ADR 0060).
	tenant := metastore.Token{Hash: hash(6), Prefix: "team-t/", Ops: []string{"admin"}, Parent: hash(1), StartsTenant: true, MaxStreams: 50, AppendBytesPerSec: 1 << 20}
	must(t, s.PutToken(ctx, tenant), "put a tenant")
	got, err = s.GetToken(ctx, hash(6))
	must(t, err, "get a tenant")
	wantEqual(t, got, tenant, "tenant token")
	must(t, s.DeleteToken(ctx, hash(6)), "delete a tenant")

	// Put overwrites: it is how grants change.
	tok2 := metastore.Token{Hash: hash(1), Ops: []string{"admin"}}
	must(t, s.PutToken(ctx, tok2), "overwrite")
	must(t, s.PutToken(ctx, tok2), "overwrite again")
	got, err = s.GetToken(ctx, hash(1))
	must(t, err, "get")
	wantEqual(t, got, tok2, "overwritten token")
	_, err = s.GetToken(ctx, hash(2))
	wantErr(t, err, metastore.ErrNotFound, "other token")

	for what, bad := range map[string]metastore.Token{
		"short hash":        {Hash: "abc", Ops: []string{"read"}},
		"uppercase hash":    {Hash: fmt.Sprintf("%064X", 0xabc), Ops: []string{"read"}},
		"empty op":          {Hash: hash(3), Ops: []string{""}},
		"long description":  {Hash: hash(3), Ops: []string{"read"}, Description: strings.Repeat("d", metastore.MaxTokenDescriptionLen+1)},
		"control character": {Hash: hash(3), Ops: []string{"read"}, Description: "a\nb"},
		"negative expiry":   {Hash: hash(3), Ops: []string{"read"}, ExpiresMs: -1},
		"negative revoked":  {Hash: hash(3), Ops: []string{"read"}, RevokedMs: -1},
		"negative quota":    {Hash: hash(3), Ops: []string{"read"}, StartsTenant: true, MaxStreams: -1},
		"quota, no tenant":  {Hash: hash(3), Ops: []string{"read"}, AppendBytesPerSec: 5},
	} {
		wantErr(t, s.PutToken(ctx, bad), metastore.ErrInvalid, what)
	}
	_, err = s.GetToken(ctx, hash(3))
	wantErr(t, err, metastore.ErrNotFound, "token of a refused put")
}

func testDeleteAndListTokens(t *testing.T, s metastore.Store) {
	ctx := t.Context()
	got, err := s.ListTokens(ctx, "")
	must(t, err, "list empty")
	if len(got) != 0 {
		t.Fatalf("empty store lists %+v", got)
	}
	toks := []metastore.Token{
		{Hash: hash(3), Prefix: "team-a/", Ops: []string{"read"}, Description: "dashboards (read only) — ünïcode"},
		{Hash: hash(1), Prefix: "", Ops: []string{"admin"}},
		{Hash: hash(2), Prefix: "team-a/x/", Ops: []string{"append", "read"}},
		{Hash: hash(4), Prefix: "team-b/", Ops: []string{"admin"}},
	}
	for _, tok := range toks {
		must(t, s.PutToken(ctx, tok), "put")
	}
	// Every token, in hash order; then those scoped within a prefix.
	got, err = s.ListTokens(ctx, "")
	must(t, err, "list all")
	wantEqual(t, got, []metastore.Token{toks[1], toks[2], toks[0], toks[3]}, "all tokens")
	got, err = s.ListTokens(ctx, "team-a/")
	must(t, err, "list team-a/")
	wantEqual(t, got, []metastore.Token{toks[2], toks[0]}, "tokens within team-a/")
	got, err = s.ListTokens(ctx, "team-a/x/y")
	must(t, err, "list team-a/x/y")
	if len(got) != 0 {
		t.Fatalf("tokens within team-a/x/y: %+v (a broader token is not within a prefix)", got)
	}

	// Delete removes one token, and is idempotent.
	must(t, s.DeleteToken(ctx, hash(3)), "delete")
	_, err = s.GetToken(ctx, hash(3))
	wantErr(t, err, metastore.ErrNotFound, "deleted token")
	must(t, s.DeleteToken(ctx, hash(3)), "delete again")
	must(t, s.DeleteToken(ctx, hash(9)), "delete a token never put")
	must(t, s.DeleteToken(ctx, "not-a-hash"), "delete a malformed hash")
	got, err = s.ListTokens(ctx, "team-a/")
	must(t, err, "list after delete")
	wantEqual(t, got, []metastore.Token{toks[2]}, "tokens within team-a/ after delete")
	_, err = s.GetToken(ctx, hash(2))
	must(t, err, "the other tokens survive")

	// A token put again after its delete is back, in the listing too.
	must(t, s.PutToken(ctx, toks[0]), "put again")
	got, err = s.ListTokens(ctx, "team-a/")
	must(t, err, "list after put again")
	wantEqual(t, got, []metastore.Token{toks[2], toks[0]}, "tokens within team-a/ after put again")

	// A canceled delete changes nothing.
	canceled, cancel := context.WithCancel(ctx)
	cancel()
	if err := s.DeleteToken(canceled, hash(1)); err == nil {
		t.Fatal("delete with a canceled context succeeded")
	}
	_, err = s.GetToken(ctx, hash(1))
	must(t, err, "token of a canceled delete")

	// Listed tokens are copies.
	got[0].Ops[0] = "admin"
	got, err = s.ListTokens(ctx, "team-a/x/")
	must(t, err, "list team-a/x/")
	wantEqual(t, got, []metastore.Token{toks[2]}, "token after the caller mutated a listed one")
}

// testNoAliasing checks that the store keeps no reference to the caller's
// slices, and hands out none of its own.
func testNoAliasing(t *testing.T, s metastore.Store) {
	ctx := t.Context()
	r := newRef(sid(1), 0, 9)
	want := newRef(sid(1), 0, 9)
	must(t, putRefs(t, s, []metastore.Ref{r}), "put ref")
	r.Locations[0].Key = "mutated by the caller"
	got := allRefs(t, s, sid(1))
	wantRefs(t, got, []metastore.Ref{want}, "ref after the caller mutated its input")
	got[0].Locations[1].Length = 1
	last, err := s.LastRef(ctx, sid(1))
	must(t, err, "last ref")
	last.Locations[0].Offset = 1
	wantRefs(t, allRefs(t, s, sid(1)), []metastore.Ref{want}, "ref after the caller mutated outputs")

	e := newEpoch(1)
	must(t, s.MintEpoch(ctx, chainA, 0, e), "mint")
	e.Buckets[0] = "mutated"
	ge, err := s.GetEpoch(ctx, chainA, 1)
	must(t, err, "get epoch")
	wantEqual(t, ge, newEpoch(1), "epoch after the caller mutated its input")
	ge.Buckets[1] = "mutated"
	ge, err = s.GetEpoch(ctx, chainA, 1)
	must(t, err, "get epoch")
	wantEqual(t, ge, newEpoch(1), "epoch after the caller mutated an output")

	tok := metastore.Token{Hash: hash(1), Ops: []string{"read"}}
	must(t, s.PutToken(ctx, tok), "put token")
	tok.Ops[0] = "admin"
	gt, err := s.GetToken(ctx, hash(1))
	must(t, err, "get token")
	wantEqual(t, gt.Ops, []string{"read"}, "token ops after the caller mutated its input")
	gt.Ops[0] = "admin"
	gt, err = s.GetToken(ctx, hash(1))
	must(t, err, "get token")
	wantEqual(t, gt.Ops, []string{"read"}, "token ops after the caller mutated an output")
}

func testCanceledContext(t *testing.T, s metastore.Store) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := s.CreateStream(ctx, newStream("orders", 1))
	if err == nil {
		t.Fatal("create with a canceled context succeeded")
	}
	if !errors.Is(err, context.Canceled) && !errors.Is(err, metastore.ErrUnavailable) {
		t.Fatalf("create with a canceled context: %v, want context.Canceled or ErrUnavailable", err)
	}
	if err := s.MintEpoch(ctx, chainA, 0, newEpoch(1)); err == nil {
		t.Fatal("mint with a canceled context succeeded")
	}
	_, err = s.GetStream(t.Context(), "orders")
	wantErr(t, err, metastore.ErrNotFound, "stream of a canceled create")
	_, err = s.GetHead(t.Context(), chainA)
	wantErr(t, err, metastore.ErrNotFound, "head of a canceled mint")
}

// Races.

func testRaceAdvanceCursor(t *testing.T, s metastore.Store) {
	ctx := t.Context()
	must(t, s.MintEpoch(ctx, chainA, 0, newEpoch(1)), "mint")
	from := metastore.Cursor{Epoch: 1, Slot: 0}
	must(t, s.AdvanceCursor(ctx, chainA, metastore.Settled, from, metastore.Cursor{Epoch: 1, Slot: 1}), "advance settled")
	errs := race(func(i int) error {
		return s.AdvanceCursor(ctx, chainA, metastore.Checkpoint, from, metastore.Cursor{Epoch: 1, Slot: uint64(i + 1)})
	})
	w := oneWinner(t, errs, metastore.ErrConflict)
	h, err := s.GetHead(ctx, chainA)
	must(t, err, "head")
	wantEqual(t, h, metastore.Head{
		Epoch:      1,
		Checkpoint: metastore.Cursor{Epoch: 1, Slot: uint64(w + 1)},
		Settled:    metastore.Cursor{Epoch: 1, Slot: 1},
		Trimmed:    from,
		Flushed:    from,
	}, "head after the race")
}

func testRaceMintEpoch(t *testing.T, s metastore.Store) {
	ctx := t.Context()
	must(t, s.MintEpoch(ctx, chainA, 0, newEpoch(4)), "mint")
	mk := func(i int) metastore.Epoch {
		e := newEpoch(5)
		e.Nonce[1], e.Window = byte(i), 1+i
		return e
	}
	errs := race(func(i int) error { return s.MintEpoch(ctx, chainA, 4, mk(i)) })
	w := oneWinner(t, errs, metastore.ErrConflict)
	h, err := s.GetHead(ctx, chainA)
	must(t, err, "head")
	if h.Epoch != 5 {
		t.Fatalf("head epoch %d after the race, want 5", h.Epoch)
	}
	e, err := s.GetEpoch(ctx, chainA, 5)
	must(t, err, "get epoch")
	wantEqual(t, e, mk(w), "the winner's epoch")
}

func testRaceFirstMint(t *testing.T, s metastore.Store) {
	ctx := t.Context()
	errs := race(func(i int) error { return s.MintEpoch(ctx, chainA, 0, newEpoch(uint64(i+1))) })
	w := oneWinner(t, errs, metastore.ErrConflict)
	h, err := s.GetHead(ctx, chainA)
	must(t, err, "head")
	wantEqual(t, h, metastore.NewHead(uint64(w+1)), "head after the race")
	for i := range Racers {
		_, err := s.GetEpoch(ctx, chainA, uint64(i+1))
		if i == w {
			must(t, err, "the winner's epoch")
		} else {
			wantErr(t, err, metastore.ErrNotFound, fmt.Sprintf("loser %d's epoch", i))
		}
	}
}

func testRaceCreateStream(t *testing.T, s metastore.Store) {
	ctx := t.Context()
	got := make([]metastore.Stream, Racers)
	errs := race(func(i int) error {
		var err error
		got[i], err = s.CreateStream(ctx, newStream("orders", i+1))
		return err
	})
	w := oneWinner(t, errs, metastore.ErrExists)
	for i := range Racers {
		if got[i] != newStream("orders", w+1) {
			t.Fatalf("racer %d got stream %+v, want the winner's (%s)", i, got[i], sid(w+1))
		}
	}
	st, err := s.GetStream(ctx, "orders")
	must(t, err, "get")
	wantEqual(t, st, newStream("orders", w+1), "stored stream")
}

func testRaceSwapRefs(t *testing.T, s metastore.Store) {
	ctx := t.Context()
	var old []metastore.Ref
	for i := range uint64(4) {
		old = append(old, newRef(sid(1), i*10, i*10+9))
	}
	must(t, putRefs(t, s, old), "put")
	mk := func(i int) metastore.Ref {
		r := newRef(sid(1), 0, 39)
		r.Bytes = int64(1000 + i)
		return r
	}
	errs := race(func(i int) error { return s.SwapRefs(ctx, old, mk(i)) })
	w := oneWinner(t, errs, metastore.ErrConflict)
	wantRefs(t, allRefs(t, s, sid(1)), []metastore.Ref{mk(w)}, "refs after the race")
}

// Absorb leases.

func at(e, slot uint64) metastore.Cursor { return metastore.Cursor{Epoch: e, Slot: slot} }

func head(t *testing.T, s metastore.Store, c metastore.ChainID) metastore.Head {
	t.Helper()
	h, err := s.GetHead(t.Context(), c)
	must(t, err, "head of "+c.String())
	return h
}

func testAbsorbLease(t *testing.T, s metastore.Store) {
	ctx := t.Context()
	_, err := s.BeginAbsorb(ctx, chainA, at(1, 0), at(1, 4))
	wantErr(t, err, metastore.ErrNotFound, "begin absorb before mint")
	must(t, s.MintEpoch(ctx, chainA, 0, newEpoch(1)), "mint")
	h0 := head(t, s, chainA)
	if !h0.Absorbing.IsZero() {
		t.Fatalf("head after mint: absorbing %s, want zero", h0.Absorbing)
	}

	for what, tc := range map[string][2]metastore.Cursor{
		"empty pass":        {at(1, 0), at(1, 0)},
		"backward pass":     {at(1, 3), at(1, 2)},
		"pass to epoch 0":   {at(1, 0), at(0, 9)},
		"pass to zero":      {at(1, 0), {}},
		"pass from nowhere": {{}, {}},
	} {
		_, err := s.BeginAbsorb(ctx, chainA, tc[0], tc[1])
		wantErr(t, err, metastore.ErrInvalid, what)
	}
	h, err := s.BeginAbsorb(ctx, chainA, at(1, 2), at(1, 4))
	wantErr(t, err, metastore.ErrConflict, "begin absorb from a cursor that is not the checkpoint")
	wantEqual(t, h, h0, "head returned with the conflict")
	wantEqual(t, head(t, s, chainA), h0, "head after refused leases")

	// The lease is taken, and taking it again for the same target is
	// idempotent (a redelivered pass).
	want := h0
	want.Absorbing = at(1, 4)
	for i := range 2 {
		h, err = s.BeginAbsorb(ctx, chainA, at(1, 0), at(1, 4))
		must(t, err, fmt.Sprintf("begin absorb %d", i))
		wantEqual(t, h, want, "head returned by begin absorb")
	}
	wantEqual(t, head(t, s, chainA), want, "head with the lease")

	// Another pass from the same checkpoint learns the lease holder.
	h, err = s.BeginAbsorb(ctx, chainA, at(1, 0), at(1, 9))
	wantErr(t, err, metastore.ErrConflict, "begin absorb to another target")
	wantEqual(t, h, want, "head returned to the losing pass")

	// Only the lease holder writes refs.
	a := newRef(sid(1), 0, 9)
	must(t, s.PutRefs(ctx, chainA, at(1, 4), []metastore.Ref{a}), "put refs under the lease")
	must(t, s.PutRefs(ctx, chainA, at(1, 4), []metastore.Ref{a}), "put the same refs again")
	b := newRef(sid(1), 10, 19)
	wantErr(t, s.PutRefs(ctx, chainA, at(1, 9), []metastore.Ref{b}), metastore.ErrConflict, "put refs of a pass without the lease")
	wantErr(t, s.PutRefs(ctx, chainA, metastore.Cursor{}, []metastore.Ref{b}), metastore.ErrInvalid, "put refs with a zero pass")
	wantRefs(t, allRefs(t, s, sid(1)), []metastore.Ref{a}, "refs after the refused puts")

	// The checkpoint moves only to the lease's target while it is held.
	wantErr(t, s.AdvanceCursor(ctx, chainA, metastore.Checkpoint, at(1, 0), at(1, 9)), metastore.ErrConflict, "advance past the lease")
	wantErr(t, s.AdvanceCursor(ctx, chainA, metastore.Checkpoint, at(1, 0), at(1, 2)), metastore.ErrConflict, "advance short of the lease")
	// Settled and trimmed ignore the lease and keep it.
	must(t, s.AdvanceCursor(ctx, chainA, metastore.Settled, at(1, 0), at(1, 1)), "advance settled during a pass")
	want.Settled = at(1, 1)
	wantEqual(t, head(t, s, chainA), want, "head after advancing settled")
	// A mint keeps it too.
	must(t, s.MintEpoch(ctx, chainA, 1, newEpoch(2)), "mint 2 during a pass")
	want.Epoch = 2
	wantEqual(t, head(t, s, chainA), want, "head after mint")

	// Completing the pass clears the lease.
	must(t, s.AdvanceCursor(ctx, chainA, metastore.Checkpoint, at(1, 0), at(1, 4)), "complete the pass")
	want.Checkpoint, want.Absorbing = at(1, 4), metastore.Cursor{}
	wantEqual(t, head(t, s, chainA), want, "head after the pass")
	wantErr(t, s.PutRefs(ctx, chainA, at(1, 4), []metastore.Ref{b}), metastore.ErrConflict, "put refs of a completed pass")
	_, err = s.BeginAbsorb(ctx, chainA, at(1, 0), at(1, 4))
	wantErr(t, err, metastore.ErrConflict, "begin a completed pass again")
	wantRefs(t, allRefs(t, s, sid(1)), []metastore.Ref{a}, "refs after the pass")

	// Without a lease the checkpoint moves freely (an epoch boundary), and
	// an empty batch of refs checks and writes nothing.
	must(t, s.AdvanceCursor(ctx, chainA, metastore.Checkpoint, at(1, 4), at(2, 0)), "advance to the next epoch")
	must(t, s.PutRefs(ctx, chainA, at(9, 9), nil), "put no refs")
	h, err = s.BeginAbsorb(ctx, chainA, at(2, 0), at(2, 3))
	must(t, err, "begin absorb in epoch 2")
	want.Checkpoint, want.Absorbing = at(2, 0), at(2, 3)
	wantEqual(t, h, want, "head of the pass in epoch 2")
}

func testPutRefsNeedsLease(t *testing.T, s metastore.Store) {
	ctx := t.Context()
	r := newRef(sid(1), 0, 9)
	wantErr(t, s.PutRefs(ctx, chainA, at(1, 4), []metastore.Ref{r}), metastore.ErrConflict, "put refs on a chain never minted")
	must(t, s.MintEpoch(ctx, chainA, 0, newEpoch(1)), "mint")
	wantErr(t, s.PutRefs(ctx, chainA, at(1, 4), []metastore.Ref{r}), metastore.ErrConflict, "put refs with no pass in progress")
	wantErr(t, s.PutRefs(ctx, metastore.ChainID{Star: "a#b", Class: metastore.Express}, at(1, 4), []metastore.Ref{r}),
		metastore.ErrInvalid, "put refs on an invalid chain")
	// Another chain's lease is no lease for this one.
	other := metastore.ChainID{Star: "star-1", Class: metastore.Standard}
	must(t, s.MintEpoch(ctx, other, 0, newEpoch(1)), "mint other")
	_, err := s.BeginAbsorb(ctx, other, at(1, 0), at(1, 4))
	must(t, err, "lease on the other chain")
	wantErr(t, s.PutRefs(ctx, chainA, at(1, 4), []metastore.Ref{r}), metastore.ErrConflict, "put refs under another chain's lease")
	wantRefs(t, allRefs(t, s, sid(1)), nil, "refs after refused puts")
	// A batch larger than one DynamoDB transaction lands whole.
	var many []metastore.Ref
	for i := range uint64(250) {
		many = append(many, newRef(sid(2), i*10, i*10+9))
	}
	must(t, s.PutRefs(ctx, other, at(1, 4), many), "put 250 refs")
	wantRefs(t, allRefs(t, s, sid(2)), many, "250 refs")
}

// testStalePassRefused is the race the lease closes: a pass that stalls
// after its refs were written, completed by another copy, settled and then
// rewritten by the stale copy would point the settled range back at slots
// trim is free to delete.
func testStalePassRefused(t *testing.T, s metastore.Store) {
	ctx := t.Context()
	must(t, s.MintEpoch(ctx, chainA, 0, newEpoch(1)), "mint")
	transit := newRef(sid(1), 0, 9)
	transit.Locations = transit.Locations[:1]
	_, err := s.BeginAbsorb(ctx, chainA, at(1, 0), at(1, 5))
	must(t, err, "begin pass")
	must(t, s.PutRefs(ctx, chainA, at(1, 5), []metastore.Ref{transit}), "pass writes its refs")
	// The pass stalls here. A redelivered copy completes the same pass.
	h, err := s.BeginAbsorb(ctx, chainA, at(1, 0), at(1, 7))
	wantErr(t, err, metastore.ErrConflict, "the copy's own target")
	if h.Absorbing != at(1, 5) {
		t.Fatalf("the copy learned lease %s, want 1/5", h.Absorbing)
	}
	must(t, s.PutRefs(ctx, chainA, h.Absorbing, []metastore.Ref{transit}), "the copy writes identical refs")
	must(t, s.AdvanceCursor(ctx, chainA, metastore.Checkpoint, at(1, 0), h.Absorbing), "the copy completes the pass")
	// Settle swaps the ref to a settled object.
	settled := transit
	settled.Locations = []metastore.Location{{Settled: true, Key: "streams/" + sid(1) + "/0-9", Offset: 64, Length: 1000}}
	must(t, s.SwapRefs(ctx, []metastore.Ref{transit}, settled), "settle")
	// The stale pass wakes up: its writes and its CAS are refused.
	wantErr(t, s.PutRefs(ctx, chainA, at(1, 5), []metastore.Ref{transit}), metastore.ErrConflict, "stale pass rewrites its refs")
	wantErr(t, s.AdvanceCursor(ctx, chainA, metastore.Checkpoint, at(1, 0), at(1, 5)), metastore.ErrConflict, "stale pass advances")
	wantRefs(t, allRefs(t, s, sid(1)), []metastore.Ref{settled}, "refs after the stale pass")
	// Even once the next pass holds a lease.
	_, err = s.BeginAbsorb(ctx, chainA, at(1, 5), at(1, 8))
	must(t, err, "next pass")
	wantErr(t, s.PutRefs(ctx, chainA, at(1, 5), []metastore.Ref{transit}), metastore.ErrConflict, "stale pass during the next pass")
	wantRefs(t, allRefs(t, s, sid(1)), []metastore.Ref{settled}, "refs after the stale pass")
}

func testRaceBeginAbsorb(t *testing.T, s metastore.Store) {
	ctx := t.Context()
	must(t, s.MintEpoch(ctx, chainA, 0, newEpoch(1)), "mint")
	heads := make([]metastore.Head, Racers)
	errs := race(func(i int) error {
		var err error
		heads[i], err = s.BeginAbsorb(ctx, chainA, at(1, 0), at(1, uint64(i+1)))
		return err
	})
	w := oneWinner(t, errs, metastore.ErrConflict)
	target := at(1, uint64(w+1))
	for i, h := range heads {
		if h.Absorbing != target || h.Checkpoint != at(1, 0) {
			t.Fatalf("racer %d (winner %d) saw head %+v, want the lease to %s", i, w, h, target)
		}
	}
	if h := head(t, s, chainA); h.Absorbing != target {
		t.Fatalf("stored lease %s, want %s", h.Absorbing, target)
	}
	// Every loser completes the winner's pass: the same begin succeeds.
	errs = race(func(i int) error {
		_, err := s.BeginAbsorb(ctx, chainA, at(1, 0), heads[i].Absorbing)
		return err
	})
	for i, err := range errs {
		must(t, err, fmt.Sprintf("racer %d joining the pass", i))
	}
	errs = race(func(i int) error {
		return s.AdvanceCursor(ctx, chainA, metastore.Checkpoint, at(1, 0), heads[i].Absorbing)
	})
	oneWinner(t, errs, metastore.ErrConflict)
	if h := head(t, s, chainA); h.Checkpoint != target || !h.Absorbing.IsZero() {
		t.Fatalf("head after the pass %+v, want checkpoint %s and no lease", h, target)
	}
}

// Settle refs (design 014: settle moves a pass index's parts into refs).

// settleChain is minted with its settled cursor at 1/40.
func settleChain(t *testing.T, s metastore.Store) metastore.ChainID {
	t.Helper()
	ctx := t.Context()
	c := metastore.ChainID{Star: "star-settle", Class: metastore.Express}
	must(t, s.MintEpoch(ctx, c, 0, newEpoch(1)), "mint")
	must(t, s.AdvanceCursor(ctx, c, metastore.Settled, at(1, 0), at(1, 40)), "settled cursor")
	return c
}

func settledRef(id string, first, last uint64) metastore.Ref {
	r := newRef(id, first, last)
	r.Locations = []metastore.Location{{Settled: true, Key: fmt.Sprintf("streams/%s/%d-%d", id, first, last), Offset: 64, Length: int64(last-first+1) * 100, FirstSeq: first}}
	return r
}

func testSettleRef(t *testing.T, s metastore.Store) {
	ctx := t.Context()
	c := settleChain(t, s)
	// A new ref where there is none; again (a rerun) is nil and changes
	// nothing.
	a := settledRef(sid(1), 0, 9)
	must(t, s.SettleRef(ctx, c, at(1, 40), nil, a), "settle a new ref")
	must(t, s.SettleRef(ctx, c, at(1, 40), nil, a), "the same again")
	wantRefs(t, allRefs(t, s, sid(1)), []metastore.Ref{a}, "refs after a new ref")
	// Another ref at that key is not overwritten without naming it.
	other := settledRef(sid(1), 0, 9)
	other.Bytes++
	wantErr(t, s.SettleRef(ctx, c, at(1, 40), nil, other), metastore.ErrConflict, "another ref at the key")
	// Extending the ref (a merge with the new data) replaces it at its key.
	b := settledRef(sid(1), 10, 19)
	must(t, s.SettleRef(ctx, c, at(1, 40), nil, b), "settle a second ref")
	ab := settledRef(sid(1), 0, 29)
	must(t, s.SettleRef(ctx, c, at(1, 40), []metastore.Ref{a, b}, ab), "extend two refs")
	wantRefs(t, allRefs(t, s, sid(1)), []metastore.Ref{ab}, "refs after the extension")
	// Old refs that changed or are gone: refused, nothing changes.
	for what, f := range staleVariants {
		x := ab
		f(&x)
		wantErr(t, s.SettleRef(ctx, c, at(1, 40), []metastore.Ref{x}, settledRef(sid(1), 0, 39)), metastore.ErrConflict, "stale "+what)
	}
	wantErr(t, s.SettleRef(ctx, c, at(1, 40), []metastore.Ref{a}, settledRef(sid(1), 0, 39)), metastore.ErrConflict, "old ref gone")
	wantRefs(t, allRefs(t, s, sid(1)), []metastore.Ref{ab}, "refs after refused settles")
	// Only the step at the settled cursor writes: a stale step (the cursor
	// moved) and a chain never minted are refused.
	must(t, s.AdvanceCursor(ctx, c, metastore.Settled, at(1, 40), at(1, 50)), "move the settled cursor")
	wantErr(t, s.SettleRef(ctx, c, at(1, 40), nil, settledRef(sid(1), 30, 39)), metastore.ErrConflict, "stale step")
	wantErr(t, s.SettleRef(ctx, metastore.ChainID{Star: "star-none", Class: metastore.Express}, at(1, 40), nil, settledRef(sid(2), 0, 9)), metastore.ErrConflict, "chain never minted")
	wantRefs(t, allRefs(t, s, sid(1)), []metastore.Ref{ab}, "refs after stale settles")
	wantRefs(t, allRefs(t, s, sid(2)), nil, "no ref of a refused settle")
	must(t, s.SettleRef(ctx, c, at(1, 50), []metastore.Ref{ab}, settledRef(sid(1), 0, 39)), "the current step")
}

func testSettleRefInvalid(t *testing.T, s metastore.Store) {
	ctx := t.Context()
	c := settleChain(t, s)
	a, b := settledRef(sid(1), 0, 9), settledRef(sid(1), 10, 19)
	must(t, s.SettleRef(ctx, c, at(1, 40), nil, a), "settle")
	must(t, s.SettleRef(ctx, c, at(1, 40), nil, b), "settle")
	bad := settledRef(sid(1), 20, 29)
	bad.Locations = nil
	tooMany := make([]metastore.Ref, metastore.MaxSwapRefs+1)
	for i := range tooMany {
		tooMany[i] = settledRef(sid(1), uint64(i), uint64(i))
	}
	cases := []struct {
		what string
		c    metastore.ChainID
		old  []metastore.Ref
		repl metastore.Ref
	}{
		{"repl short", c, []metastore.Ref{a, b}, settledRef(sid(1), 0, 18)},
		{"repl starts late", c, []metastore.Ref{a}, settledRef(sid(1), 1, 19)},
		{"gap in old", c, []metastore.Ref{a, settledRef(sid(1), 11, 19)}, settledRef(sid(1), 0, 19)},
		{"old out of order", c, []metastore.Ref{b, a}, settledRef(sid(1), 10, 19)},
		{"repl of another stream", c, []metastore.Ref{a}, settledRef(sid(2), 0, 19)},
		{"invalid repl", c, nil, bad},
		{"too many old refs", c, tooMany, settledRef(sid(1), 0, metastore.MaxSwapRefs)},
		{"invalid chain", metastore.ChainID{Star: "a#b", Class: metastore.Express}, nil, settledRef(sid(1), 20, 29)},
	}
	for _, tc := range cases {
		wantErr(t, s.SettleRef(ctx, tc.c, at(1, 40), tc.old, tc.repl), metastore.ErrInvalid, tc.what)
		wantRefs(t, allRefs(t, s, sid(1)), []metastore.Ref{a, b}, tc.what+": refs after a refused settle")
	}
	wantErr(t, s.SettleRef(ctx, c, at(1, 40), nil, bigRef(sid(1), 20, true)), metastore.ErrTooLarge, "repl over the ref bound")
}

// Copies of one settle step racing to extend the same ref with different
// results: exactly one wins, the others change nothing.
func testRaceSettleRef(t *testing.T, s metastore.Store) {
	ctx := t.Context()
	c := settleChain(t, s)
	a := settledRef(sid(1), 0, 9)
	must(t, s.SettleRef(ctx, c, at(1, 40), nil, a), "settle")
	mk := func(i int) metastore.Ref {
		r := settledRef(sid(1), 0, 19)
		r.Bytes = int64(1000 + i)
		return r
	}
	errs := race(func(i int) error { return s.SettleRef(ctx, c, at(1, 40), []metastore.Ref{a}, mk(i)) })
	w := oneWinner(t, errs, metastore.ErrConflict)
	wantRefs(t, allRefs(t, s, sid(1)), []metastore.Ref{mk(w)}, "refs after the race")
}

// A settle ref never overlaps a stored ref but those it replaces, in
// either order: a flush that does not merge the previous ref after one
// that merged it (the merged ref reaches its first seq), and a flush that
// merges the previous ref after one that did not (a ref is stored inside
// the seqs it adds). Nothing changes on a refusal (design 014, "Level 1 as
// built").
func testSettleRefApart(t *testing.T, s metastore.Store) {
	ctx := t.Context()
	c := settleChain(t, s)
	for i, mergeFirst := range []bool{true, false} {
		id := sid(i + 1)
		prev, plain, merged := settledRef(id, 0, 9), settledRef(id, 10, 19), settledRef(id, 0, 19)
		must(t, s.SettleRef(ctx, c, at(1, 40), nil, prev), "settle the previous ref")
		want := []metastore.Ref{merged}
		if mergeFirst {
			must(t, s.SettleRef(ctx, c, at(1, 40), []metastore.Ref{prev}, merged), "merge the previous ref")
			wantErr(t, s.SettleRef(ctx, c, at(1, 40), nil, plain), metastore.ErrConflict, "a ref the merged one reaches")
		} else {
			must(t, s.SettleRef(ctx, c, at(1, 40), nil, plain), "flush without merging")
			wantErr(t, s.SettleRef(ctx, c, at(1, 40), []metastore.Ref{prev}, merged), metastore.ErrConflict, "a merge over a stored ref")
			want = []metastore.Ref{prev, plain}
		}
		wantRefs(t, allRefs(t, s, id), want, fmt.Sprintf("refs after the refusal (merge first: %v)", mergeFirst))
	}
	// A ref keyed inside the seqs a new ref would add is refused too, and
	// one that starts right after them is not.
	id := sid(3)
	must(t, s.SettleRef(ctx, c, at(1, 40), nil, settledRef(id, 15, 19)), "a ref at 15")
	wantErr(t, s.SettleRef(ctx, c, at(1, 40), nil, settledRef(id, 10, 15)), metastore.ErrConflict, "a ref over 15")
	must(t, s.SettleRef(ctx, c, at(1, 40), nil, settledRef(id, 10, 14)), "a ref ending at 14")
	wantRefs(t, allRefs(t, s, id), []metastore.Ref{settledRef(id, 10, 14), settledRef(id, 15, 19)}, "refs apart")
}

// Copies of one flush racing, half merging the previous ref and half not
// (two builds of other settings, mid-deploy): the refs stored never
// overlap; either the merged ref won, or the plain one did.
func testRaceSettleRefApart(t *testing.T, s metastore.Store) {
	ctx := t.Context()
	c := settleChain(t, s)
	prev, plain, merged := settledRef(sid(1), 0, 9), settledRef(sid(1), 10, 19), settledRef(sid(1), 0, 19)
	must(t, s.SettleRef(ctx, c, at(1, 40), nil, prev), "settle")
	errs := race(func(i int) error {
		if i%2 == 0 {
			return s.SettleRef(ctx, c, at(1, 40), []metastore.Ref{prev}, merged)
		}
		return s.SettleRef(ctx, c, at(1, 40), nil, plain)
	})
	mergeWon, plainWon := false, false
	for i, err := range errs {
		switch {
		case err == nil && i%2 == 0:
			mergeWon = true
		case err == nil:
			plainWon = true
		case !errors.Is(err, metastore.ErrConflict):
			t.Fatalf("racer %d: %v, want nil or ErrConflict", i, err)
		}
	}
	switch got := allRefs(t, s, sid(1)); {
	case mergeWon == plainWon:
		t.Fatalf("merge won %v, plain won %v: want exactly one kind (refs %+v)", mergeWon, plainWon, got)
	case mergeWon:
		wantRefs(t, got, []metastore.Ref{merged}, "refs after a merge won")
	default:
		wantRefs(t, got, []metastore.Ref{prev, plain}, "refs after a plain flush won")
	}
}

// Padded returns r with its last location repeated (same Settled flag and
// FirstSeq, a padded key, no bytes) until the ref is close to
// MaxRefBytes, so that a test's few refs fill more than one 1 MB QueryRefs
// page. A reader of the padding locations meets zero-length ranges of
// keys that do not exist, so use it where only the refs are read.
func Padded(r metastore.Ref) metastore.Ref {
	r.Locations = append([]metastore.Location(nil), r.Locations...)
	last := r.Locations[len(r.Locations)-1]
	for i := 0; ; i++ {
		l := metastore.Location{Settled: last.Settled, Key: fmt.Sprintf("%s~pad-%04d-%s", last.Key, i, strings.Repeat("p", 900)),
			Offset: last.Offset, FirstSeq: last.FirstSeq}
		if metastore.RefSize(r)+metastore.LocationSize(l) > metastore.MaxRefBytes {
			return r
		}
		r.Locations = append(r.Locations, l)
	}
}

// onceOf runs n racing copies of one compare-and-set (what) and requires
// that exactly one wins and every other gets ErrConflict.
func onceOf(t *testing.T, n int, what string, cas func() error) {
	t.Helper()
	var wg sync.WaitGroup
	var won atomic.Int32
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := cas(); err == nil {
				won.Add(1)
			} else if !errors.Is(err, metastore.ErrConflict) {
				t.Errorf("racing %s: %v", what, err)
			}
		}()
	}
	wg.Wait()
	if won.Load() != 1 {
		t.Fatalf("%d of %d racing copies of %s won, want 1", won.Load(), n, what)
	}
}

// testFlushedCursor: the flushed cursor (design 014, level 1) starts with
// the others at the first mint, carries over mints, moves by
// compare-and-set on itself only (the store does not order it against
// settled: settle does), and a lost race is ErrConflict.
func testFlushedCursor(t *testing.T, s metastore.Store) {
	ctx := t.Context()
	must(t, s.MintEpoch(ctx, chainA, 0, newEpoch(2)), "mint")
	h, err := s.GetHead(ctx, chainA)
	must(t, err, "head")
	wantEqual(t, h.Flushed, at(2, 0), "flushed after the first mint")
	must(t, s.AdvanceCursor(ctx, chainA, metastore.Settled, at(2, 0), at(2, 9)), "advance settled")
	must(t, s.AdvanceCursor(ctx, chainA, metastore.Flushed, at(2, 0), at(2, 4)), "advance flushed")
	wantErr(t, s.AdvanceCursor(ctx, chainA, metastore.Flushed, at(2, 0), at(2, 5)), metastore.ErrConflict, "flushed from a stale cursor")
	wantErr(t, s.AdvanceCursor(ctx, chainA, metastore.Flushed, at(2, 4), at(2, 4)), metastore.ErrInvalid, "flushed to the same cursor")
	must(t, s.MintEpoch(ctx, chainA, 2, newEpoch(3)), "mint 3")
	h, err = s.GetHead(ctx, chainA)
	must(t, err, "head")
	wantEqual(t, h, metastore.Head{Epoch: 3, Checkpoint: at(2, 0), Settled: at(2, 9), Trimmed: at(2, 0), Flushed: at(2, 4)}, "head after mint 3")
	// Racing copies of one settle step move it once.
	onceOf(t, 8, "flushed advance", func() error { return s.AdvanceCursor(ctx, chainA, metastore.Flushed, at(2, 4), at(2, 9)) })
	h, err = s.GetHead(ctx, chainA)
	must(t, err, "head")
	wantEqual(t, h.Flushed, at(2, 9), "flushed after the race")
}

// testMergedCursor: the merged cursor (design 014, level 2) is zero after
// the first mint (no merged run yet) and carries over mints, moves from
// zero and then by compare-and-set on itself only, and a lost race is
// ErrConflict.
func testMergedCursor(t *testing.T, s metastore.Store) {
	ctx := t.Context()
	must(t, s.MintEpoch(ctx, chainA, 0, newEpoch(2)), "mint")
	h, err := s.GetHead(ctx, chainA)
	must(t, err, "head")
	wantEqual(t, h.Merged, metastore.Cursor{}, "merged after the first mint")
	wantEqual(t, h.Flushed, at(2, 0), "flushed after the first mint")
	must(t, s.AdvanceCursor(ctx, chainA, metastore.Settled, at(2, 0), at(2, 9)), "advance settled")
	wantErr(t, s.AdvanceCursor(ctx, chainA, metastore.Merged, at(2, 0), at(2, 4)), metastore.ErrConflict, "merged from a cursor it is not at")
	must(t, s.AdvanceCursor(ctx, chainA, metastore.Merged, metastore.Cursor{}, at(2, 4)), "advance merged from zero")
	wantErr(t, s.AdvanceCursor(ctx, chainA, metastore.Merged, metastore.Cursor{}, at(2, 5)), metastore.ErrConflict, "merged from a stale cursor")
	wantErr(t, s.AdvanceCursor(ctx, chainA, metastore.Merged, at(2, 4), at(2, 4)), metastore.ErrInvalid, "merged to the same cursor")
	must(t, s.MintEpoch(ctx, chainA, 2, newEpoch(3)), "mint 3")
	h, err = s.GetHead(ctx, chainA)
	must(t, err, "head")
	wantEqual(t, h, metastore.Head{Epoch: 3, Checkpoint: at(2, 0), Settled: at(2, 9), Trimmed: at(2, 0), Flushed: at(2, 0), Merged: at(2, 4)}, "head after mint 3")
	onceOf(t, 8, "merged advance", func() error { return s.AdvanceCursor(ctx, chainA, metastore.Merged, at(2, 4), at(2, 9)) })
	h, err = s.GetHead(ctx, chainA)
	must(t, err, "head")
	wantEqual(t, h.Merged, at(2, 9), "merged after the race")
	wantEqual(t, h.Flushed, at(2, 0), "flushed untouched by merged")
}

// testIndexedCursor: the indexed cursor (design 014, "Switching a live
// chain") is zero after the first mint and carries over mints; it is set
// once, from 0/0 (another from is ErrInvalid), only while no pass holds
// the absorb lease and only to the checkpoint itself (ErrConflict: a copy
// that read an older checkpoint must not claim the passes since), and of
// racing copies exactly one sets it.
func testIndexedCursor(t *testing.T, s metastore.Store) {
	ctx := t.Context()
	must(t, s.MintEpoch(ctx, chainA, 0, newEpoch(2)), "mint")
	h, err := s.GetHead(ctx, chainA)
	must(t, err, "head")
	wantEqual(t, h.Indexed, metastore.Cursor{}, "indexed after the first mint")
	// A pass holds the lease: the cursor cannot be set (the pass may be
	// completed in refs mode by a copy that read the head before).
	_, err = s.BeginAbsorb(ctx, chainA, at(2, 0), at(2, 5))
	must(t, err, "begin absorb")
	wantErr(t, s.AdvanceCursor(ctx, chainA, metastore.Indexed, metastore.Cursor{}, at(2, 0)), metastore.ErrConflict, "indexed under a lease")
	must(t, s.AdvanceCursor(ctx, chainA, metastore.Checkpoint, at(2, 0), at(2, 5)), "advance checkpoint")
	wantErr(t, s.AdvanceCursor(ctx, chainA, metastore.Indexed, metastore.Cursor{}, at(2, 6)), metastore.ErrConflict, "indexed past the checkpoint")
	wantErr(t, s.AdvanceCursor(ctx, chainA, metastore.Indexed, metastore.Cursor{}, at(2, 0)), metastore.ErrConflict, "indexed at a stale checkpoint")
	wantErr(t, s.AdvanceCursor(ctx, chainA, metastore.Indexed, at(2, 1), at(2, 3)), metastore.ErrInvalid, "indexed moved from another cursor than 0/0")
	onceOf(t, 8, "indexed set", func() error { return s.AdvanceCursor(ctx, chainA, metastore.Indexed, metastore.Cursor{}, at(2, 5)) })
	wantErr(t, s.AdvanceCursor(ctx, chainA, metastore.Indexed, metastore.Cursor{}, at(2, 5)), metastore.ErrConflict, "indexed set twice")
	// Another chain, set at its first cursor.
	chainB := metastore.ChainID{Star: "star-2", Class: metastore.Express}
	must(t, s.MintEpoch(ctx, chainB, 0, newEpoch(1)), "mint chain B")
	must(t, s.AdvanceCursor(ctx, chainB, metastore.Indexed, metastore.Cursor{}, at(1, 0)), "indexed at the first cursor")
	_, err = s.BeginAbsorb(ctx, chainB, at(1, 0), at(1, 7))
	must(t, err, "begin absorb B")
	must(t, s.AdvanceCursor(ctx, chainB, metastore.Checkpoint, at(1, 0), at(1, 7)), "advance checkpoint B")
	must(t, s.MintEpoch(ctx, chainA, 2, newEpoch(3)), "mint 3")
	h, err = s.GetHead(ctx, chainA)
	must(t, err, "head")
	wantEqual(t, h, metastore.Head{Epoch: 3, Checkpoint: at(2, 5), Settled: at(2, 0), Trimmed: at(2, 0), Flushed: at(2, 0), Indexed: at(2, 5)}, "head after mint 3")
	h, err = s.GetHead(ctx, chainB)
	must(t, err, "head B")
	wantEqual(t, h.Indexed, at(1, 0), "indexed of chain B")
	// BeginAbsorb returns the head with it (the copy decides a pass's mode
	// from the head that holds its lease).
	h, err = s.BeginAbsorb(ctx, chainB, at(1, 7), at(1, 9))
	must(t, err, "begin absorb B again")
	wantEqual(t, h.Indexed, at(1, 0), "indexed in BeginAbsorb's head")
}

// testSwitchedChain: a chain whose indexed cursor is set (design 014,
// "Switching a live chain"; on DynamoDB the write that sets it also
// moves the head to the layout that fences earlier builds, package
// dynamo, "The head's layouts") works as before it: every cursor kind
// moves by compare-and-set from where it is (and only from there), the
// absorb lease is taken, joined, refused to another pass, guards PutRefs
// and is cleared by the checkpoint, SettleRef checks the settled cursor,
// takeover mints new epochs (and a first mint is refused: the head
// exists), and the switch is one-way: the indexed cursor is never set
// again, from 0/0 or from itself.
func testSwitchedChain(t *testing.T, s metastore.Store) {
	ctx := t.Context()
	c := metastore.ChainID{Star: "star-switch", Class: metastore.Standard}
	must(t, s.MintEpoch(ctx, c, 0, newEpoch(2)), "mint")
	_, err := s.BeginAbsorb(ctx, c, at(2, 0), at(2, 5))
	must(t, err, "begin a refs pass")
	must(t, s.PutRefs(ctx, c, at(2, 5), []metastore.Ref{newRef(sid(1), 0, 9)}), "refs of the refs pass")
	must(t, s.AdvanceCursor(ctx, c, metastore.Checkpoint, at(2, 0), at(2, 5)), "checkpoint")
	must(t, s.AdvanceCursor(ctx, c, metastore.Settled, at(2, 0), at(2, 2)), "settled before the switch")
	must(t, s.AdvanceCursor(ctx, c, metastore.Flushed, at(2, 0), at(2, 2)), "flushed before the switch")
	must(t, s.AdvanceCursor(ctx, c, metastore.Indexed, metastore.Cursor{}, at(2, 5)), "switch")
	want := metastore.Head{Epoch: 2, Checkpoint: at(2, 5), Settled: at(2, 2), Trimmed: at(2, 0), Flushed: at(2, 2), Indexed: at(2, 5)}
	wantEqual(t, head(t, s, c), want, "head after the switch")

	// One-way.
	wantErr(t, s.AdvanceCursor(ctx, c, metastore.Indexed, metastore.Cursor{}, at(2, 5)), metastore.ErrConflict, "indexed set again")
	wantErr(t, s.AdvanceCursor(ctx, c, metastore.Indexed, at(2, 5), at(2, 9)), metastore.ErrInvalid, "indexed moved")

	// The absorb lease: an indexed pass.
	h, err := s.BeginAbsorb(ctx, c, at(2, 5), at(2, 9))
	must(t, err, "begin an indexed pass")
	want.Absorbing = at(2, 9)
	wantEqual(t, h, want, "BeginAbsorb's head")
	h, err = s.BeginAbsorb(ctx, c, at(2, 5), at(2, 9))
	must(t, err, "join the pass")
	wantEqual(t, h, want, "the joined head")
	h, err = s.BeginAbsorb(ctx, c, at(2, 5), at(2, 8))
	wantErr(t, err, metastore.ErrConflict, "another pass")
	wantEqual(t, h, want, "the head another pass saw")
	wantErr(t, s.PutRefs(ctx, c, at(2, 8), []metastore.Ref{newRef(sid(2), 0, 0)}), metastore.ErrConflict, "refs without the lease")
	must(t, s.PutRefs(ctx, c, at(2, 9), []metastore.Ref{newRef(sid(2), 0, 0)}), "refs under the lease")
	wantErr(t, s.AdvanceCursor(ctx, c, metastore.Checkpoint, at(2, 5), at(2, 8)), metastore.ErrConflict, "checkpoint of another pass")
	must(t, s.AdvanceCursor(ctx, c, metastore.Checkpoint, at(2, 5), at(2, 9)), "checkpoint after the indexed pass")
	want.Checkpoint, want.Absorbing = at(2, 9), metastore.Cursor{}

	// Every other cursor kind, from where it is and only from there.
	for _, m := range []struct {
		kind     metastore.CursorKind
		from, to metastore.Cursor
	}{
		{metastore.Settled, at(2, 2), at(2, 9)},
		{metastore.Flushed, at(2, 2), at(2, 7)},
		{metastore.Merged, metastore.Cursor{}, at(2, 6)},
		{metastore.Trimmed, at(2, 0), at(2, 5)},
	} {
		wantErr(t, s.AdvanceCursor(ctx, c, m.kind, m.to, at(2, 10)), metastore.ErrConflict, m.kind.String()+" from where it is not")
		must(t, s.AdvanceCursor(ctx, c, m.kind, m.from, m.to), m.kind.String()+" after the switch")
		want = metastore.SetCursor(want, m.kind, m.to)
	}
	wantEqual(t, head(t, s, c), want, "head after the cursors moved")

	// SettleRef checks the settled cursor.
	r := settledRef(sid(3), 0, 9)
	wantErr(t, s.SettleRef(ctx, c, at(2, 2), nil, r), metastore.ErrConflict, "settle ref at a stale settled cursor")
	must(t, s.SettleRef(ctx, c, at(2, 9), nil, r), "settle ref")
	wantRefs(t, allRefs(t, s, sid(3)), []metastore.Ref{r}, "the settled ref")

	// Takeover.
	wantErr(t, s.MintEpoch(ctx, c, 0, newEpoch(3)), metastore.ErrConflict, "a first mint over a switched head")
	wantErr(t, s.MintEpoch(ctx, c, 1, newEpoch(3)), metastore.ErrConflict, "mint after another epoch")
	must(t, s.MintEpoch(ctx, c, 2, newEpoch(3)), "takeover")
	want.Epoch = 3
	wantEqual(t, head(t, s, c), want, "head after the takeover")
	wantErr(t, s.AdvanceCursor(ctx, c, metastore.Indexed, metastore.Cursor{}, at(2, 9)), metastore.ErrConflict, "indexed set again after the takeover")
	_, err = s.BeginAbsorb(ctx, c, at(2, 9), at(3, 4))
	must(t, err, "a pass into the new epoch")
	must(t, s.AdvanceCursor(ctx, c, metastore.Checkpoint, at(2, 9), at(3, 4)), "checkpoint into the new epoch")
	want.Checkpoint = at(3, 4)
	wantEqual(t, head(t, s, c), want, "head at the end")
}
