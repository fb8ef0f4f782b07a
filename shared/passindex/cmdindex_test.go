package passindex_test

import (
	"bytes"
	"context"
	"math/rand/v2"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/strandlog/strand/shared/format"
	"github.com/strandlog/strand/shared/metastore"
	"github.com/strandlog/strand/shared/objstore"
	"github.com/strandlog/strand/shared/passindex"
)

// maxGetBucket records the largest GET of each key.
type maxGetBucket struct {
	objstore.Bucket
	mu  sync.Mutex
	max map[string]int
}

func (b *maxGetBucket) Get(ctx context.Context, key string, off, n int64) ([]byte, error) {
	got, err := b.Bucket.Get(ctx, key, off, n)
	b.mu.Lock()
	if b.max == nil {
		b.max = map[string]int{}
	}
	b.max[key] = max(b.max[key], len(got))
	b.mu.Unlock()
	return got, err
}

// withTokens gives the packed entries of p command state, one in every
// `every`, tokens of 0 to 36 bytes (entries of every size).
func withTokens(rng *rand.Rand, p format.PassIndex, every int) format.PassIndex {
	for i := range p.Streams {
		s := &p.Streams[i]
		s.Commands = nil
		if s.Marker() || rng.IntN(every) != 0 {
			continue
		}
		s.Commands = &format.StreamCommands{FenceToken: strings.Repeat("f", rng.IntN(format.MaxFenceTokenBytes+1)), TrimSeq: rng.Uint64N(50),
			HasConfig: i%2 == 0}
		if s.Commands.HasConfig {
			s.Commands.Config = format.StreamConfig{RetentionMs: int64(i)}
		}
	}
	return p
}

// TestRangedCommandsEqualTable: a ranged lookup's command state is the
// whole object's decoding's, whatever the run's command index: present
// (read through it: no GET of the run as large as its command table),
// absent (a run an earlier build wrote: the table), of another plan of
// the run (same stream table, one state changed; or another size),
// corrupt (a bit flipped in its header or in a block) or truncated:
// refused, the table read instead. Runs of 1 to 5,000 streams (several
// index blocks), merged pairs, uniform and clustered ids, command state
// on every packed entry or one in seven.
func TestRangedCommandsEqualTable(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	for _, n := range []int{1, 5, 2000, 5000} {
		for _, skew := range []int{0, 2} {
			for _, every := range []int{1, 7} {
				p := withTokens(rng, randomRun(rng, n, skew, true, false), every)
				obj, err := format.AppendPassIndex(nil, p)
				if err != nil {
					t.Fatal(err)
				}
				h, err := format.ParsePassHeader(obj)
				if err != nil {
					t.Fatal(err)
				}
				if h.Version != format.PassIndexVersionCommands {
					continue
				}
				whole, err := format.ParsePassIndex(obj)
				if err != nil {
					t.Fatal(err)
				}
				cmdx, err := format.AppendCommandIndex(nil, obj)
				if err != nil {
					t.Fatal(err)
				}
				// Another plan of the run: one state changed (same size).
				q := p
				q.Streams = slices2(p.Streams)
				for i := range q.Streams {
					if c := q.Streams[i].Commands; c != nil {
						cs := *c
						cs.TrimSeq++
						q.Streams[i].Commands = &cs
						break
					}
				}
				objQ, _ := format.AppendPassIndex(nil, q)
				otherSame, err := format.AppendCommandIndex(nil, objQ)
				if err != nil {
					t.Fatal(err)
				}
				q = withTokens(rng, randomRun(rng, n, skew, true, false), 1)
				objR, _ := format.AppendPassIndex(nil, q)
				otherSize, _ := format.AppendCommandIndex(nil, objR)
				flip := func(at int) []byte { b := bytes.Clone(cmdx); b[at] ^= 0x10; return b }
				table := len(obj) - 4 - int(h.CommandsAt())
				for _, tc := range []struct {
					name string
					cmdx []byte // nil: absent
				}{
					{"present", cmdx}, {"absent", nil}, {"another plan, same size", otherSame}, {"another plan", otherSize},
					{"header flipped", flip(20)}, {"block offset flipped", flip(format.CommandIndexHeaderSize + 7)},
					{"block size flipped", flip(format.CommandIndexHeaderSize + 8 + n/2)}, {"truncated", cmdx[:len(cmdx)-3]},
				} {
					mem := objstore.NewMem("settled")
					if err := mem.PutIfAbsent(t.Context(), "run", obj); err != nil {
						t.Fatal(err)
					}
					if tc.cmdx != nil {
						if err := mem.PutIfAbsent(t.Context(), format.CommandIndexKey("run"), tc.cmdx); err != nil {
							t.Fatal(err)
						}
					}
					bucket := &maxGetBucket{Bucket: mem}
					for i := 0; i < len(p.Streams); i += 1 + len(p.Streams)/150 {
						id := p.Streams[i].Stream
						got, err := passindex.FindRanged(t.Context(), bucket, "run", id, true)
						if err != nil {
							t.Fatalf("n=%d skew=%d every=%d %s: stream %s: %v", n, skew, every, tc.name, id, err)
						}
						if want := whole.FindAll(id); !reflect.DeepEqual(got, want) {
							t.Fatalf("n=%d skew=%d every=%d %s: stream %s: ranged %+v, whole %+v", n, skew, every, tc.name, id, got, want)
						}
					}
					if tc.name == "present" && table > passindex.RangedBlockBytes && bucket.max["run"] >= table {
						t.Fatalf("n=%d %s: a GET of %d bytes of the run, its command table is %d: not read through the index", n, tc.name, bucket.max["run"], table)
					}
				}
			}
		}
	}
}

func slices2(s []format.PassStream) []format.PassStream {
	return append([]format.PassStream(nil), s...)
}

// TestWindowCommandIndex: through a window whose budget holds no run,
// HeadRefs, HeadLastRef and StreamRuns (settle's flush of few streams)
// read command state through the runs' command indexes (no whole command
// table read) and return what an unbounded window returns; with one run's
// index replaced by another run's, and with the indexes absent (runs an
// earlier build wrote), the same answers, the tables read instead.
func TestWindowCommandIndex(t *testing.T) {
	const runs, streams = 6, 3000
	meta, bucket, h, all := windowOfRunsCmds(t, runs, streams, randomID, 1)
	per := passindex.DecodedBytes(&all[0])
	keys := make([]string, runs)
	for i, r := range all {
		keys[i] = format.MergedRunKey(chainX.Star, chainX.Class.String(), 1, r.FirstSlot)
	}
	putIndexes := func(b objstore.Bucket, of func(i int) int) {
		for i, k := range keys {
			obj, err := b.Get(t.Context(), keys[of(i)], 0, -1)
			if err != nil {
				t.Fatal(err)
			}
			cmdx, err := format.AppendCommandIndex(nil, obj)
			if err != nil {
				t.Fatal(err)
			}
			if err := b.PutIfAbsent(t.Context(), format.CommandIndexKey(k), cmdx); err != nil {
				t.Fatal(err)
			}
		}
	}
	ref := &passindex.Window{Meta: meta, Bucket: bucket, MaxBytes: -1}
	ids := []format.StreamID{randomID(1), randomID(500), randomID(2999)}
	check := func(name string, b objstore.Bucket, getBytes int64, want func(passindex.WindowStats) bool) {
		t.Helper()
		w := &passindex.Window{Meta: meta, Bucket: b, MaxBytes: per / 4, CommandIndexGetBytes: getBytes}
		for _, id := range ids {
			got, err := w.HeadRefs(t.Context(), chainX, h, id, 0)
			if err != nil {
				t.Fatal(err)
			}
			exp, err := ref.HeadRefs(t.Context(), chainX, h, id, 0)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != runs || !reflect.DeepEqual(got, exp) {
				t.Fatalf("%s: stream %s: %d parts %+v, want %+v", name, id, len(got), got, exp)
			}
			last, ok, err := w.HeadLastRef(t.Context(), chainX, h, id)
			if err != nil || !ok || !reflect.DeepEqual(last, exp[len(exp)-1]) || last.Commands == nil {
				t.Fatalf("%s: stream %s: last part %+v, %v, %v", name, id, last, ok, err)
			}
		}
		heads := []metastore.Head{h, h, h}
		got, err := w.StreamRuns(t.Context(), chainX, heads, ids, 2)
		if err != nil {
			t.Fatal(err)
		}
		exp, err := ref.StreamRuns(t.Context(), chainX, heads, ids, 2)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, exp) {
			t.Fatalf("%s: StreamRuns differ from the unbounded window's", name)
		}
		if st := w.Stats(); !want(st) {
			t.Fatalf("%s: stats %+v", name, st)
		}
	}
	check("absent", bucket, -1, func(s passindex.WindowStats) bool {
		return s.CommandIndexed == 0 && s.CommandTables > 0 && s.CommandIndexMissing > 0 && s.CommandIndexRefused == 0
	})
	withIdx := objstore.NewMem("settled")
	for _, k := range keys {
		obj, _ := bucket.Get(t.Context(), k, 0, -1)
		if err := withIdx.PutIfAbsent(t.Context(), k, obj); err != nil {
			t.Fatal(err)
		}
	}
	other := objstore.NewMem("settled")
	for _, k := range keys {
		obj, _ := bucket.Get(t.Context(), k, 0, -1)
		if err := other.PutIfAbsent(t.Context(), k, obj); err != nil {
			t.Fatal(err)
		}
	}
	putIndexes(withIdx, func(i int) int { return i })
	check("present", withIdx, -1, func(s passindex.WindowStats) bool {
		return s.CommandIndexed > 0 && s.CommandTables == 0 && s.CommandIndexRefused == 0
	})
	putIndexes(other, func(i int) int { return (i + 1) % runs }) // every run with its neighbour's index
	check("another run's", other, -1, func(s passindex.WindowStats) bool {
		return s.CommandIndexed == 0 && s.CommandTables > 0 && s.CommandIndexRefused > 0
	})
	// Tables cheaper than the index's GETs are read whole.
	check("table cheaper", withIdx, 1<<30, func(s passindex.WindowStats) bool { return s.CommandIndexed == 0 && s.CommandTables > 0 })
}
