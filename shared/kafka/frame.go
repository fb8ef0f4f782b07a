package kafka

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/strandlog/strand/shared/format"
)

// FrameHeader is the name of the header that carries what a strand record
// lacks of a Kafka record (see doc.go, "Records"): one NUL byte. The
// strand API refuses empty header names, so the front end takes the
// shortest name it accepts. Part of the stored format: do not change.
const FrameHeader = "\x00"

// frameVersion is the frame's first byte. Part of the stored format.
const frameVersion = 1

// Frame flags (the frame's second byte). Part of the stored format.
const (
	flagKey       = 1 << 0 // a key follows (else the key is null)
	flagNullValue = 1 << 1 // the value is null (the body is empty)
	flagMask      = flagKey | flagNullValue
)

// ErrFrame: a frame header that does not decode.
var ErrFrame = errors.New("kafka: malformed record frame")

// Record is one Kafka record as the front end stores and serves it.
type Record struct {
	Key       []byte // nil: null
	Value     []byte // nil: null
	Headers   []RecordHeader
	Timestamp int64 // the producer's timestamp, as sent
}

// RecordHeader is one Kafka header; a nil Value is null.
type RecordHeader struct {
	Key   string
	Value []byte
}

// toStrand is r as a strand record: the frame header first, then r's
// headers (null values stored empty, their indexes in the frame), the
// value as the body. tsMs is the strand timestamp to ask for (0: now).
func (r Record) toStrand(tsMs int64) format.Record {
	f := []byte{frameVersion, 0}
	if r.Key != nil {
		f[1] |= flagKey
	}
	if r.Value == nil {
		f[1] |= flagNullValue
	}
	f = binary.AppendVarint(f, r.Timestamp)
	if r.Key != nil {
		f = binary.AppendUvarint(f, uint64(len(r.Key)))
		f = append(f, r.Key...)
	}
	var nulls, empties []uint64
	for i, h := range r.Headers {
		if h.Value == nil {
			nulls = append(nulls, uint64(i))
		}
		if h.Key == "" {
			empties = append(empties, uint64(i))
		}
	}
	for _, list := range [][]uint64{nulls, empties} {
		f = binary.AppendUvarint(f, uint64(len(list)))
		for _, i := range list {
			f = binary.AppendUvarint(f, i)
		}
	}
	hs := make([]format.Header, 0, len(r.Headers)+1)
	hs = append(hs, format.Header{Name: []byte(FrameHeader), Value: f})
	for _, h := range r.Headers {
		v := h.Value
		if v == nil {
			v = []byte{}
		}
		name := h.Key
		if name == "" {
			name = FrameHeader // strand refuses empty names; the frame lists these
		}
		hs = append(hs, format.Header{Name: []byte(name), Value: v})
	}
	body := r.Value
	if body == nil {
		body = []byte{}
	}
	return format.Record{TimestampMs: tsMs, Headers: hs, Body: body}
}

// fromStrand is the Kafka record a strand record reads as. A record whose
// first header is a well-formed frame gets its key, null markers and
// producer timestamp back; any other record (written through the strand
// API) reads with a null key, its headers and body as they are, and its
// strand timestamp.
func fromStrand(tsMs int64, hs []format.Header, body []byte) Record {
	r := Record{Value: body, Timestamp: tsMs}
	if len(hs) > 0 && string(hs[0].Name) == FrameHeader {
		if f, err := decodeFrame(hs[0].Value, len(hs)-1); err == nil {
			r.Key, r.Timestamp = f.key, f.ts
			if f.nullValue {
				r.Value = nil
			} else if r.Value == nil {
				r.Value = []byte{}
			}
			r.Headers = make([]RecordHeader, len(hs)-1)
			for i, h := range hs[1:] {
				r.Headers[i] = RecordHeader{Key: string(h.Name), Value: nonNil(h.Value)}
			}
			for _, i := range f.nulls {
				r.Headers[i].Value = nil
			}
			for _, i := range f.empties {
				r.Headers[i].Key = ""
			}
			return r
		}
	}
	if r.Value == nil {
		r.Value = []byte{}
	}
	for _, h := range hs {
		r.Headers = append(r.Headers, RecordHeader{Key: string(h.Name), Value: nonNil(h.Value)})
	}
	return r
}

func nonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

type frame struct {
	key       []byte
	nullValue bool
	ts        int64
	nulls     []int // headers whose value is null
	empties   []int // headers whose key is empty (stored named FrameHeader)
}

// decodeFrame decodes a frame header's value for a record with nHeaders
// headers after it: every byte accounted for, null indexes strictly
// increasing and below nHeaders.
func decodeFrame(b []byte, nHeaders int) (frame, error) {
	var f frame
	if len(b) < 2 || b[0] != frameVersion {
		return f, fmt.Errorf("%w: want version %d", ErrFrame, frameVersion)
	}
	flags := b[1]
	if flags&^flagMask != 0 {
		return f, fmt.Errorf("%w: unknown flags %#x", ErrFrame, flags)
	}
	b = b[2:]
	ts, n := binary.Varint(b)
	if n <= 0 {
		return f, fmt.Errorf("%w: timestamp", ErrFrame)
	}
	f.ts, b = ts, b[n:]
	f.nullValue = flags&flagNullValue != 0
	if flags&flagKey != 0 {
		l, n := binary.Uvarint(b)
		if n <= 0 || l > uint64(len(b)-n) {
			return f, fmt.Errorf("%w: key length", ErrFrame)
		}
		f.key = append([]byte{}, b[n:n+int(l)]...)
		b = b[n+int(l):]
	}
	var err error
	if f.nulls, b, err = decodeIndexes(b, nHeaders); err != nil {
		return f, err
	}
	if f.empties, b, err = decodeIndexes(b, nHeaders); err != nil {
		return f, err
	}
	if len(b) != 0 {
		return f, fmt.Errorf("%w: %d trailing bytes", ErrFrame, len(b))
	}
	return f, nil
}

// decodeIndexes decodes a count and that many header indexes, strictly
// increasing and below nHeaders.
func decodeIndexes(b []byte, nHeaders int) ([]int, []byte, error) {
	cnt, n := binary.Uvarint(b)
	if n <= 0 || cnt > uint64(nHeaders) {
		return nil, nil, fmt.Errorf("%w: header index count", ErrFrame)
	}
	b = b[n:]
	var out []int
	prev := -1
	for range cnt {
		i, n := binary.Uvarint(b)
		if n <= 0 || i >= uint64(nHeaders) || int(i) <= prev {
			return nil, nil, fmt.Errorf("%w: header index", ErrFrame)
		}
		out = append(out, int(i))
		prev, b = int(i), b[n:]
	}
	return out, b, nil
}
