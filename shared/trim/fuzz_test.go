package trim

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/strandlog/strand/shared/metastore"
	"github.com/strandlog/strand/shared/objstore"
)

// FuzzHandle: the trim Lambda's entry point refuses anything but a
// scheduled event with an error, never a panic, and deletes nothing that
// exists when no chain was ever minted.
func FuzzHandle(f *testing.F) {
	f.Add([]byte(`{"detail-type":"Scheduled Event"}`))
	f.Add([]byte(`{"star":"star-0","class":"express"}`))
	f.Add([]byte(`"x"`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		meta := metastore.NewMem()
		settled := objstore.NewMem("settled")
		if err := settled.PutIfAbsent(context.Background(), "streams/keep", []byte("x")); err != nil {
			t.Fatal(err)
		}
		h := &Handler{Trimmer: &Trimmer{Meta: meta, Settled: settled}, Chains: []metastore.ChainID{{Star: "star-0", Class: metastore.Express}}}
		_, _ = h.Handle(context.Background(), json.RawMessage(raw))
		if n := settled.Len(); n != 1 {
			t.Fatalf("event %q left %d objects, want the 1 unrelated object", raw, n)
		}
	})
}
