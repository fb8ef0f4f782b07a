package server

import (
	"bytes"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/strandlog/strand/shared/api/strandv1"
)

// TestProtoCodecMarshalsIntoPooledBuffers: the server's protobuf codec
// offers connect MarshalAppend (connect then marshals into its pooled
// buffers), which writes the bytes Marshal does and, given room, allocates
// nothing. Before it, each read session message allocated its own slice.
func TestProtoCodecMarshalsIntoPooledBuffers(t *testing.T) {
	var c any = protoCodec{}
	app, ok := c.(interface {
		MarshalAppend([]byte, any) ([]byte, error)
	})
	if !ok {
		t.Fatal("protoCodec has no MarshalAppend: connect allocates a buffer per message")
	}
	msg := &strandv1.ReadSessionResponse{NextSeqNum: 1000, LastTimestampMs: 7}
	for i := range 1000 {
		msg.Records = append(msg.Records, &strandv1.SequencedRecord{SeqNum: uint64(i), TimestampMs: 7, Body: bytes.Repeat([]byte{byte(i)}, 1024)})
	}
	want, err := proto.Marshal(msg)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 0, 2<<20)
	got, err := app.MarshalAppend(buf, msg)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("MarshalAppend: %d bytes, %v; want Marshal's %d", len(got), err, len(want))
	}
	if n := testing.AllocsPerRun(20, func() { _, _ = app.MarshalAppend(buf[:0], msg) }); n != 0 {
		t.Errorf("MarshalAppend into a buffer with room allocated %.0f times per message", n)
	}
	if _, err := app.MarshalAppend(nil, "not a message"); err == nil {
		t.Error("a non-protobuf value was marshalled")
	}
}
