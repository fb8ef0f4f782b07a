package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/strandlog/strand/shared/api/strandv1"
	"github.com/strandlog/strand/shared/auth"
)

// Authorize before spending: an append is authorized on the stream it
// names before it is decoded (authorizeAppend). The codecs stash an
// append's encoded bytes (decode_budget.go); stashedStream reads the
// stream from them without decoding the records: the top-level fields of
// a protobuf message (records are skipped by their length), the top-level
// members of a JSON object (values are skipped by a scan that allocates
// nothing). A token that may not append to that stream is refused with
// the bytes read and counted, nothing decoded and no share of the
// decoding budget taken for it. The handler authorizes the decoded
// stream again (authorize); FuzzStashedStream holds that both name the
// same stream for every message that decodes.

// ErrMalformedAppend: an append whose stream cannot be read from its
// encoded bytes (malformed protobuf or JSON, or a stream that is not a
// string); such a message would not decode either.
var ErrMalformedAppend = errors.New("server: malformed append")

// authorizeAppend authorizes an append on the stream it names, read
// before it is decoded (stashedStream).
func (s *Server) authorizeAppend(ctx context.Context, m *strandv1.AppendRequest) error {
	name, err := stashedStream(m)
	if err != nil {
		return connect.NewError(connect.CodeInvalidArgument, err)
	}
	if first, ok := sniffedStream(ctx); ok && name != first {
		// Authorized on the first before the body was read (sniff.go).
		return connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("%w: it names stream %q first and %q after", ErrStreamNotFirst, first, name))
	}
	return s.authorize(ctx, auth.Append, name)
}

// stashedStream is the stream m names: read from its stash when the
// server's codecs stashed it, else m's (decoded already).
func stashedStream(m *strandv1.AppendRequest) (string, error) {
	raw := m.ProtoReflect().GetUnknown()
	if len(raw) == 0 || raw[0] < stashProto || raw[0] > stashRaw {
		return m.GetStream(), nil
	}
	if raw[0] == stashProto {
		return protoStream(raw[1:])
	}
	return jsonStream(raw[1:])
}

// protoStream is the stream of an encoded AppendRequest: its last field 1
// of the bytes wire type, as proto.Unmarshal keeps the last (a field 1 of
// another wire type is an unknown field to it, skipped here too).
func protoStream(b []byte) (string, error) {
	var name []byte
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return "", fmt.Errorf("%w: protobuf: %v", ErrMalformedAppend, protowire.ParseError(n))
		}
		b = b[n:]
		if num == 1 && typ == protowire.BytesType {
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return "", fmt.Errorf("%w: protobuf stream field: %v", ErrMalformedAppend, protowire.ParseError(n))
			}
			name, b = v, b[n:]
			continue
		}
		if n = protowire.ConsumeFieldValue(num, typ, b); n < 0 {
			return "", fmt.Errorf("%w: protobuf field %d: %v", ErrMalformedAppend, num, protowire.ParseError(n))
		}
		b = b[n:]
	}
	return string(name), nil
}

// jsonStream is the stream of a JSON AppendRequest (protojson or raw
// JSON): the value of its top-level "stream" member (the last one, as
// raw JSON's map keeps; protojson refuses a repeated one when it
// decodes), "" when it has none or it is null.
func jsonStream(b []byte) (string, error) {
	bad := func(what string) (string, error) {
		return "", fmt.Errorf("%w: JSON: %s", ErrMalformedAppend, what)
	}
	i := skipSpace(b, 0)
	if i == len(b) || b[i] != '{' {
		return bad("not an object")
	}
	if i = skipSpace(b, i+1); i < len(b) && b[i] == '}' {
		return "", nil
	}
	var name string
	for {
		if i == len(b) || b[i] != '"' {
			return bad("a member's name is not a string")
		}
		end := jsonValueEnd(b, i)
		if end < 0 {
			return bad("a member's name is cut short")
		}
		key := b[i:end]
		if i = skipSpace(b, end); i == len(b) || b[i] != ':' {
			return bad("a member's name is not followed by ':'")
		}
		i = skipSpace(b, i+1)
		end = jsonValueEnd(b, i)
		if end < 0 {
			return bad("a member's value is cut short")
		}
		if isStreamKey(key) {
			switch v := b[i:end]; {
			case string(v) == "null":
				name = ""
			case v[0] == '"':
				if err := json.Unmarshal(v, &name); err != nil {
					return bad(fmt.Sprintf("the stream: %v", err))
				}
			default:
				return bad("the stream is not a string")
			}
		}
		switch i = skipSpace(b, end); {
		case i < len(b) && b[i] == ',':
			i = skipSpace(b, i+1)
		case i < len(b) && b[i] == '}':
			return name, nil
		default:
			return bad("members are not separated by ','")
		}
	}
}

// isStreamKey reports whether key, a JSON string with its quotes, is
// "stream" (escapes decoded).
func isStreamKey(key []byte) bool {
	if bytes.Equal(key, []byte(`"stream"`)) {
		return true
	}
	if bytes.IndexByte(key, '\\') < 0 || len(key) > 64 {
		return false // "stream" escaped is at most 6*6+2 bytes
	}
	var k string
	return json.Unmarshal(key, &k) == nil && k == "stream"
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// jsonValueEnd is the index just past the JSON value at b[i:] (a string,
// an object or array, or a literal), without checking it beyond its
// extent; -1 when b ends first or there is no value.
func jsonValueEnd(b []byte, i int) int {
	if i >= len(b) {
		return -1
	}
	switch b[i] {
	case '"':
		for i++; i < len(b); i++ {
			switch b[i] {
			case '\\':
				i++
			case '"':
				return i + 1
			}
		}
		return -1
	case '{', '[':
		depth := 0
		for ; i < len(b); i++ {
			switch b[i] {
			case '"':
				end := jsonValueEnd(b, i)
				if end < 0 {
					return -1
				}
				i = end - 1
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return i + 1
				}
			}
		}
		return -1
	}
	start := i
	for i < len(b) && b[i] != ',' && b[i] != '}' && b[i] != ']' && b[i] != ' ' && b[i] != '\t' && b[i] != '\n' && b[i] != '\r' {
		i++
	}
	if i == start {
		return -1
	}
	return i
}
