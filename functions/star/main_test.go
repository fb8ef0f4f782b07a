package main

import (
	"errors"
	"strings"
	"testing"

	"github.com/strandlog/strand/shared/node"
)

// TestRunKafkaLimitFlags: the star's command passes its --kafka-* limits
// to the node, which refuses a set that cannot work before it touches
// AWS (the endpoint below serves nothing) or anything else: a 1 MiB held
// budget under the default 55 MiB fetch cap, from the flag and from
// STRAND_KAFKA_*. With the limits not passed on it failed: Start went on
// (to refuse the missing bucket set).
func TestRunKafkaLimitFlags(t *testing.T) {
	base := []string{"--table", "t", "--settled-bucket", "s", "--region", "us-east-1", "--aws-endpoint", "http://127.0.0.1:1", "--log-level", "error"}
	err := run(append(base, "--kafka-max-held-bytes", "1048576"))
	if !errors.Is(err, node.ErrKafkaLimit) || !strings.Contains(err.Error(), "--kafka-max-fetch-bytes 57671680 is more than --kafka-max-held-bytes 1048576") {
		t.Fatalf("run: %v, want ErrKafkaLimit naming the fetch cap and the held bytes", err)
	}
	t.Setenv("STRAND_KAFKA_MAX_CONNS_PER_TENANT", "2000")
	if err := run(base); !errors.Is(err, node.ErrKafkaLimit) || !strings.Contains(err.Error(), "--kafka-max-conns-per-tenant 2000 is more than --kafka-max-conns 1024") {
		t.Fatalf("run with STRAND_KAFKA_MAX_CONNS_PER_TENANT=2000: %v, want ErrKafkaLimit", err)
	}
}
