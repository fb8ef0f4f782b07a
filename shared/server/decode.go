package server

import (
	"errors"
	"fmt"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/strandlog/strand/shared/api/strandv1"
	"github.com/strandlog/strand/shared/format"
	"github.com/strandlog/strand/shared/rawjson"
)

// ErrTooManyElements: an append message that claims more records or
// headers than a batch may hold, refused before it is decoded.
var ErrTooManyElements = errors.New("server: too many records or headers")

// maxJSONElements bounds the array elements of a JSON append message: its
// records and their headers (format.MaxBatchRecords + MaxBatchHeaders).
const maxJSONElements = format.MaxBatchRecords + format.MaxBatchHeaders

// maxJSONMembers bounds the object members of a JSON append message: raw
// JSON (rawjson) is decoded into maps, an entry per member. A legal append
// has a few top-level fields and at most four per record (timestampMs,
// headers, body or bodyBase64) and per header (name, value, or their
// Base64 forms).
const maxJSONMembers = 16 + 4*format.MaxBatchRecords + 4*format.MaxBatchHeaders

// maxRawMembers bounds them in raw JSON, which is decoded into maps first
// (a map entry per member, about 400 bytes each with the copies rawjson
// makes): a legal raw append has at most three members per record
// (timestampMs, headers, body or bodyBase64) and two per header (name or
// nameBase64, value or valueBase64).
const maxRawMembers = 16 + 3*format.MaxBatchRecords + 2*format.MaxBatchHeaders

// maxJSONDepth bounds the nesting of a JSON message; an append nests five
// deep (request, records, record, headers, header).
const maxJSONDepth = 32

// Decoding a message allocates per element: protobuf and protojson make a
// struct for each record and header they meet. The codecs below count an
// AppendRequest's records and headers in its encoded bytes first, without
// allocating, and refuse one past a batch's limits, so a message of
// millions of empty records ("0x12 0x00" repeated, or [{},{},...]) costs
// its bytes and not a struct per claimed record (issue 31). On the server
// the codecs are lazy: they stash a counted append, and its handler
// decodes it once the decoding budget holds what that allocates
// (decode_budget.go).

// protoCodec is Connect's protobuf codec with the count check. Lazy: an
// AppendRequest is counted and stashed, not decoded (stashAppend).
type protoCodec struct{ lazy bool }

func (protoCodec) Name() string { return "proto" }

func (protoCodec) Marshal(v any) ([]byte, error) {
	m, ok := v.(proto.Message)
	if !ok {
		return nil, fmt.Errorf("server: %T is not a protobuf message", v)
	}
	return proto.Marshal(m)
}

func (c protoCodec) Unmarshal(b []byte, v any) error {
	m, ok := v.(proto.Message)
	if !ok {
		return fmt.Errorf("server: %T is not a protobuf message", v)
	}
	if a, ok := v.(*strandv1.AppendRequest); ok {
		if err := CountAppendProto(b); err != nil {
			return err
		}
		if c.lazy {
			return stashAppend(a, stashProto, b)
		}
	}
	return proto.Unmarshal(b, m)
}

func (protoCodec) IsBinary() bool { return true }

// jsonCodec is Connect's protobuf JSON codec (unknown fields ignored) with
// the count check; name is "json" (or "rawjson" over rawjson.Codec).
// Lazy: an AppendRequest is counted and stashed, not decoded
// (stashAppend).
type jsonCodec struct {
	name string
	raw  bool
	lazy bool
}

func (c jsonCodec) Name() string { return c.name }

func (c jsonCodec) Marshal(v any) ([]byte, error) {
	if c.raw {
		return rawjson.Codec{}.Marshal(v)
	}
	m, ok := v.(proto.Message)
	if !ok {
		return nil, fmt.Errorf("server: %T is not a protobuf message", v)
	}
	return protojson.MarshalOptions{}.Marshal(m)
}

func (c jsonCodec) Unmarshal(b []byte, v any) error {
	m, ok := v.(proto.Message)
	if !ok {
		return fmt.Errorf("server: %T is not a protobuf message", v)
	}
	if a, ok := v.(*strandv1.AppendRequest); ok {
		members := maxJSONMembers
		kind := stashJSON
		if c.raw {
			members, kind = maxRawMembers, stashRaw
		}
		if _, _, err := countJSON(b, maxJSONElements, members); err != nil {
			return err
		}
		if c.lazy {
			return stashAppend(a, kind, b)
		}
	}
	return decodeJSON(b, m, c.raw)
}

// decodeJSON decodes b into m: protojson, or rawjson when raw.
func decodeJSON(b []byte, m proto.Message, raw bool) error {
	if raw {
		return rawjson.Codec{}.Unmarshal(b, m)
	}
	if len(b) == 0 {
		return errors.New("server: a zero-length payload is not a JSON object")
	}
	return protojson.UnmarshalOptions{DiscardUnknown: true}.Unmarshal(b, m)
}

func (jsonCodec) IsBinary() bool { return false }

// CountAppendProto walks an encoded AppendRequest's fields without
// decoding them and fails with ErrTooManyElements when it holds more than
// format.MaxBatchRecords records (field 2) or more than
// format.MaxBatchHeaders headers in all (field 2 of a record). Malformed
// bytes are left to the decoder, which refuses them.
func CountAppendProto(b []byte) error {
	_, _, err := countAppendProto(b)
	return err
}

// countAppendProto is CountAppendProto that also returns the records and
// headers it counted (up to where it stopped).
func countAppendProto(b []byte) (records, headers int, err error) {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return records, headers, nil
		}
		b = b[n:]
		if num == 2 && typ == protowire.BytesType {
			rec, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return records, headers, nil
			}
			b = b[n:]
			if records++; records > format.MaxBatchRecords {
				return records, headers, fmt.Errorf("%w: an append holds at most %d records, this one at least %d records", ErrTooManyElements, format.MaxBatchRecords, records)
			}
			for len(rec) > 0 {
				rnum, rtyp, n := protowire.ConsumeTag(rec)
				if n < 0 {
					return records, headers, nil
				}
				rec = rec[n:]
				if rnum == 2 && rtyp == protowire.BytesType {
					if headers++; headers > format.MaxBatchHeaders {
						return records, headers, fmt.Errorf("%w: an append holds at most %d headers in all", ErrTooManyElements, format.MaxBatchHeaders)
					}
				}
				if n = protowire.ConsumeFieldValue(rnum, rtyp, rec); n < 0 {
					return records, headers, nil
				}
				rec = rec[n:]
			}
			continue
		}
		if n = protowire.ConsumeFieldValue(num, typ, b); n < 0 {
			return records, headers, nil
		}
		b = b[n:]
	}
	return records, headers, nil
}

// CountJSON scans JSON text without decoding it and fails with
// ErrTooManyElements when its arrays hold more than max elements in all,
// its objects more than maxJSONMembers members in all, or it nests deeper
// than maxJSONDepth. Malformed text is left to the decoder.
func CountJSON(b []byte, max int) error {
	_, _, err := countJSON(b, max, maxJSONMembers)
	return err
}

// countJSON is CountJSON with the members' bound; it also returns the
// elements and members it counted (up to where it stopped).
func countJSON(b []byte, max, maxMembers int) (elems, members int, err error) {
	var stack [maxJSONDepth]bool // true: an array
	depth := 0
	for i := 0; i < len(b); i++ {
		switch c := b[i]; c {
		case '"':
			for i++; i < len(b) && b[i] != '"'; i++ {
				if b[i] == '\\' {
					i++
				}
			}
		case '[', '{':
			if depth == maxJSONDepth {
				return elems, members, fmt.Errorf("%w: JSON nested deeper than %d", ErrTooManyElements, maxJSONDepth)
			}
			stack[depth] = c == '['
			depth++
			if c == '[' {
				j := i + 1
				for j < len(b) && (b[j] == ' ' || b[j] == '\t' || b[j] == '\n' || b[j] == '\r') {
					j++
				}
				if j < len(b) && b[j] != ']' {
					elems++
				}
			}
		case ']', '}':
			if depth > 0 {
				depth--
			}
		case ',':
			if depth > 0 && stack[depth-1] {
				elems++
			}
		case ':': // one per object member
			if members++; members > maxMembers {
				return elems, members, fmt.Errorf("%w: an append's objects hold at most %d members in all", ErrTooManyElements, maxMembers)
			}
		}
		if elems > max {
			return elems, members, fmt.Errorf("%w: an append holds at most %d records and headers in all", ErrTooManyElements, max)
		}
	}
	return elems, members, nil
}
