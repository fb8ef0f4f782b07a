package absorb_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/strandlog/strand/shared/absorb"
	"github.com/strandlog/strand/shared/metastore"
)

// FuzzParseEvent: any body either parses into an event naming a valid
// chain, whose marshalled form parses back to the same event, or is refused
// with ErrEvent. Never a panic.
func FuzzParseEvent(f *testing.F) {
	f.Add([]byte(`{"star":"star-0","class":"express","epoch":3,"slot":120}`))
	f.Add([]byte(`{"star":"star-0","class":"standard","epoch":1,"slot":0}`))
	f.Add([]byte(`{"star":"a#b","class":"express","epoch":1,"slot":0}`))
	f.Add([]byte(`{"star":"star-0","class":"express","epoch":1,"slot":0,"extra":1}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, body []byte) {
		ev, err := absorb.ParseEvent(body)
		if err != nil {
			return
		}
		c, err := ev.Chain()
		if err != nil {
			t.Fatalf("ParseEvent accepted %q but its chain is invalid: %v", body, err)
		}
		back, err := absorb.ParseEvent(ev.Marshal())
		if err != nil || back != ev {
			t.Fatalf("round trip of %+v: %+v, %v", ev, back, err)
		}
		if absorb.NewEvent(c, ev.Released()) != ev {
			t.Fatalf("NewEvent(%v, %v) differs from %+v", c, ev.Released(), ev)
		}
	})
}

// FuzzHandle: the absorb Lambda's entry point refuses any malformed event
// with an error (or a failed item), never a panic, and a malformed event
// changes nothing in the metastore.
func FuzzHandle(f *testing.F) {
	f.Add([]byte(`{"Records":[{"messageId":"1","body":"{\"star\":\"star-0\",\"class\":\"express\",\"epoch\":1,\"slot\":0}"}]}`))
	f.Add([]byte(`{"detail-type":"Scheduled Event"}`))
	f.Add([]byte(`{"Records":[{"messageId":"2","body":"nope"}]}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		meta := metastore.NewMem()
		h := &absorb.Handler{Absorber: &absorb.Absorber{Meta: meta}}
		_, _ = h.Handle(context.Background(), json.RawMessage(raw))
		if _, err := meta.GetHead(context.Background(), metastore.ChainID{Star: "star-0", Class: metastore.Express}); err == nil {
			t.Fatal("an event for a chain never minted created a head")
		}
	})
}
