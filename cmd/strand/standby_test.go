package main

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/strandlog/strand/shared/metastore/bolt"
)

// TestDevDataDirHeld: a second strand dev on a data directory another
// process holds fails naming --standby; with --standby it waits instead,
// and stops cleanly, saying it waited, when its context ends; while it
// waits it says the Kafka port is the leader's.
func TestDevDataDirHeld(t *testing.T) {
	dir := t.TempDir()
	held, err := bolt.Open(filepath.Join(dir, "meta.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	var out syncBuf
	f := devFlags{dataDir: dir, addr: "127.0.0.1:0", starID: "star-0", logLevel: "error"}
	err = runDev(context.Background(), f, &out)
	if !errors.Is(err, bolt.ErrLocked) || !strings.Contains(err.Error(), "--standby") {
		t.Fatalf("runDev on a held data dir: %v, want ErrLocked naming --standby", err)
	}
	f.standby, f.kafkaAddr = true, "127.0.0.1:9092"
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if err := runDev(ctx, f, &out); err != nil {
		t.Fatalf("a standby stopped while waiting: %v, want nil", err)
	}
	if got := out.String(); !strings.Contains(got, "waiting to lead "+dir) || !strings.Contains(got, "Kafka on 127.0.0.1:9092 when it leads: until then the leader serves") || strings.Contains(got, "serving on") {
		t.Errorf("standby printed %q", got)
	}
}
