package format

import "testing"

func FuzzParseEnvelope(f *testing.F) {
	f.Add(goldenPoison())
	f.Add(goldenFlight()[:EnvelopeSize])
	f.Add(goldenFlightV2()[:EnvelopeSize])
	f.Add(goldenFlightV3()[:EnvelopeSize])
	f.Add(goldenFlightV4()[:EnvelopeSize])
	f.Fuzz(func(t *testing.T, b []byte) {
		e, err := ParseEnvelope(b)
		if err != nil {
			return
		}
		// Whatever parses re-encodes to the same 60 bytes.
		if got := e.Bytes(); string(got) != string(b[:EnvelopeSize]) {
			t.Fatalf("re-encoded envelope differs")
		}
	})
}

func FuzzParseFlight(f *testing.F) {
	f.Add(goldenFlight())
	f.Add(goldenFlightV2())
	f.Add(goldenFlightV3())
	f.Add(goldenFlightV4())
	f.Add(goldenPoison())
	f.Fuzz(func(t *testing.T, b []byte) {
		fl, err := ParseFlight(b)
		if err != nil {
			return
		}
		for _, e := range fl.Entries {
			if _, _, err := DecodeSegment(b[e.Offset : e.Offset+e.Length]); err != nil {
				t.Fatalf("ParseFlight accepted a segment DecodeSegment rejects: %v", err)
			}
		}
	})
}

func FuzzDecodeSegment(f *testing.F) {
	g := goldenFlight()
	fl, _ := ParseFlight(g)
	for _, e := range fl.Entries {
		f.Add(g[e.Offset : e.Offset+e.Length])
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		info, recs, err := DecodeSegment(b)
		if err != nil {
			return
		}
		if len(recs) != int(info.Count) {
			t.Fatalf("%d records, header %d", len(recs), info.Count)
		}
	})
}

func FuzzDecodeRecords(f *testing.F) {
	f.Add(enc(Record{TimestampMs: 5, Headers: []Header{{Name: []byte("n"), Value: []byte("v")}}, Body: []byte("b")}), 1)
	f.Fuzz(func(t *testing.T, b []byte, n int) {
		recs, err := DecodeRecords(b, n)
		if err != nil {
			return
		}
		if string(enc(recs...)) != string(b) {
			t.Fatalf("decoded records re-encode differently")
		}
	})
}

func FuzzParseSettled(f *testing.F) {
	f.Add(goldenSettled())
	f.Fuzz(func(t *testing.T, b []byte) {
		h, recs, err := ParseSettled(b)
		if err != nil {
			return
		}
		if uint64(len(recs)) != h.LastSeq-h.FirstSeq+1 {
			t.Fatalf("%d records for %d..%d", len(recs), h.FirstSeq, h.LastSeq)
		}
	})
}

func FuzzParseStreamID(f *testing.F) {
	f.Add("0123456789abcdef0123456789abcdef")
	f.Add("zz")
	f.Fuzz(func(t *testing.T, s string) {
		id, err := ParseStreamID(s)
		if err == nil && len(s) != 32 {
			t.Fatalf("ParseStreamID(%q) = %s", s, id)
		}
	})
}

func FuzzParseFooter(f *testing.F) {
	g := goldenFlight()
	env, _ := ParseEnvelope(g)
	f.Add(g[env.FooterOff:], env.FooterOff, false)
	g2 := goldenFlightV2()
	env2, _ := ParseEnvelope(g2)
	f.Add(g2[env2.FooterOff:], env2.FooterOff, true)
	f.Fuzz(func(t *testing.T, b []byte, off uint32, v2 bool) {
		env := Envelope{Kind: KindFlight, FooterOff: off, FooterLen: uint32(len(b)), Size: uint64(off) + uint64(len(b))}
		if v2 {
			env.Version = VersionBatches
		}
		entries, batches, err := ParseFooterBatches(env, b)
		if err != nil {
			return
		}
		next := uint32(EnvelopeSize)
		for _, e := range entries {
			if e.Offset != next || e.Count == 0 {
				t.Fatalf("accepted entry %+v at %d", e, next)
			}
			next = e.Offset + e.Length
		}
		if next != off {
			t.Fatalf("segments end at %d, footer at %d", next, off)
		}
		if !v2 && batches != nil {
			t.Fatalf("version 1 footer with a batch table")
		}
	})
}
