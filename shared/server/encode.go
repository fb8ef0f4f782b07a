package server

import (
	"fmt"

	"google.golang.org/protobuf/proto"
)

// MarshalAppend appends v's protobuf encoding to dst. Connect marshals
// every message a handler sends through it into a buffer from its pool
// (a codec with only Marshal allocates a new slice per message): a read
// session's messages, up to read.MaxBytes (1 MiB) each, then reuse their
// buffers (docs/performance/reads.md, "The read path's writes").
func (protoCodec) MarshalAppend(dst []byte, v any) ([]byte, error) {
	m, ok := v.(proto.Message)
	if !ok {
		return nil, fmt.Errorf("server: %T is not a protobuf message", v)
	}
	return proto.MarshalOptions{}.MarshalAppend(dst, m)
}
