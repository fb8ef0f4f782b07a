package probe

import "testing"

// FuzzParseFenceEvent: any body either parses into a fence event naming a
// valid chain, or is refused; fenceEventOf (SQS bodies, possibly wrapped in
// an EventBridge envelope) never panics either.
func FuzzParseFenceEvent(f *testing.F) {
	f.Add([]byte(`{"star":"star-0","class":"express","epoch":3,"cut":17,"window":32}`))
	f.Add([]byte(`{"detail-type":"fence","detail":{"star":"star-0","class":"standard","epoch":1,"cut":0,"window":16}}`))
	f.Add([]byte(`{"star":"","class":"express","epoch":0,"cut":0,"window":0}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		if ev, err := ParseFenceEvent(body); err == nil {
			if _, err := ev.Chain(); err != nil {
				t.Fatalf("ParseFenceEvent accepted %q but its chain is invalid: %v", body, err)
			}
		}
		_, _ = fenceEventOf(body)
	})
}

// FuzzParseSettledKey: a key that parses names a valid range.
func FuzzParseSettledKey(f *testing.F) {
	f.Add("streams/0123456789abcdef0123456789abcdef/00000000000000000005-00000000000000000007")
	f.Add("streams/x/1-0")
	f.Fuzz(func(t *testing.T, key string) {
		if _, first, last, ok := ParseSettledKey(key); ok && last < first {
			t.Fatalf("%q parsed to %d-%d", key, first, last)
		}
	})
}
