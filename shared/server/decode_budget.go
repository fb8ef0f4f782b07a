package server

import (
	"context"
	"fmt"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/strandlog/strand/shared/api/strandv1"
)

// Decoding expands a message: protobuf and protojson make a struct per
// record and header, rawjson a map entry per member, so a 1.5 MB append
// of one-byte headers decodes to tens of MiB. The decoding budget
// (Limits.MaxDecodingBytes) is charged a message's encoded bytes before
// they are read; the server's codecs then count an AppendRequest's
// records, headers and members and stash its bytes in the message
// instead of decoding it (an allocation of its encoded size), and the
// handler, which knows the call's share of the budget, takes an upper
// bound of what decoding will allocate (decodedBound) before it decodes
// (decodeAppend). Both go back when the batch is submitted (messageDone).

// Kinds of stashed append: the first byte of the message's unknown fields.
// A protobuf field's tag is never 1 to 3 (field number 0 is illegal), so
// a stash is never taken for unknown fields a decoder kept.
const (
	stashProto byte = 1 + iota
	stashJSON
	stashRaw
)

// Upper bounds of what decoding allocates per element, measured by
// TestDecodedBoundHolds (decode_budget_test.go) on the worst shapes with
// a margin: the bytes themselves are copied once by protobuf, about
// twice by protojson (strings, then base64) and three times by rawjson.
const (
	protoPerRecord  = 256
	protoPerHeader  = 160
	protoPerByte    = 1
	jsonPerElement  = 192
	jsonPerMember   = 32
	jsonPerByte     = 3
	rawPerMember    = 512
	rawPerByte      = 6
	decodeFixedCost = 64 << 10
)

// stashAppend keeps b (copied: Connect reuses its buffer) in m's unknown
// fields, behind its kind, for decodeAppend.
func stashAppend(m *strandv1.AppendRequest, kind byte, b []byte) error {
	raw := make([]byte, 1+len(b))
	raw[0] = kind
	copy(raw[1:], b)
	m.ProtoReflect().SetUnknown(protoreflect.RawFields(raw))
	return nil
}

// decodedBound is an upper bound of what decoding b (an append of kind)
// allocates, from the counts of its elements (a walk that allocates
// nothing).
func decodedBound(kind byte, b []byte) int64 {
	n := int64(len(b))
	switch kind {
	case stashProto:
		records, headers, _ := countAppendProto(b)
		return decodeFixedCost + protoPerByte*n + protoPerRecord*int64(records) + protoPerHeader*int64(headers)
	case stashJSON:
		elems, members, _ := countJSON(b, maxJSONElements, maxJSONMembers)
		return decodeFixedCost + jsonPerByte*n + jsonPerElement*int64(elems) + jsonPerMember*int64(members)
	default:
		elems, members, _ := countJSON(b, maxJSONElements, maxRawMembers)
		return decodeFixedCost + rawPerByte*n + jsonPerElement*int64(elems) + rawPerMember*int64(members)
	}
}

// decodeAppend decodes an append the server's codecs stashed, once the
// call's share of the decoding budget (in ctx) has taken decodedBound of
// it; past the budget it is ResourceExhausted (ErrBusy) and nothing is
// decoded. An append decoded already (no stash) is left as it is.
func decodeAppend(ctx context.Context, m *strandv1.AppendRequest) error {
	raw := m.ProtoReflect().GetUnknown()
	if len(raw) == 0 || raw[0] < stashProto || raw[0] > stashRaw {
		return nil
	}
	kind, b := raw[0], []byte(raw[1:])
	m.ProtoReflect().SetUnknown(nil)
	if h, ok := ctx.Value(budgetKey{}).(held); ok {
		if err := h.take(decodedBound(kind, b)); err != nil {
			return connect.NewError(connect.CodeResourceExhausted, fmt.Errorf("decode an append of %d bytes: %w", len(b), err))
		}
	}
	var err error
	if kind == stashProto {
		err = proto.Unmarshal(b, m)
	} else {
		err = decodeJSON(b, m, kind == stashRaw)
	}
	if err != nil {
		return connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("server: unmarshal the append: %w", err))
	}
	return nil
}
