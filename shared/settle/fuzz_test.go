package settle

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/strandlog/strand/shared/metastore"
	"github.com/strandlog/strand/shared/objstore"
)

// FuzzHandle: the settle Lambda's entry point refuses malformed events with
// an error, never a panic, and writes nothing for a chain never minted.
func FuzzHandle(f *testing.F) {
	f.Add([]byte(`{"detail-type":"Scheduled Event"}`))
	f.Add([]byte(`{"star":"star-0","class":"express"}`))
	f.Add([]byte(`{"star":"star-0","class":"bogus"}`))
	f.Add([]byte(`[1,2]`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		meta := metastore.NewMem()
		settled := objstore.NewMem("settled")
		h := &Handler{Settler: &Settler{Meta: meta, Settled: settled}, Chains: []metastore.ChainID{{Star: "star-0", Class: metastore.Express}}}
		_, _ = h.Handle(context.Background(), json.RawMessage(raw))
		if keys, _ := settled.List(context.Background(), ""); len(keys) != 0 {
			t.Fatalf("event %q wrote %v", raw, keys)
		}
	})
}
