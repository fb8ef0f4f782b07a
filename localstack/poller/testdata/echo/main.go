// Command echo is a Lambda bootstrap for the poller's tests: it answers an
// event with {"event": <the event>, "env": <STRAND_PROBE>}, and fails an
// event that has "fail": true, as a handler returning an error does.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"os"

	"github.com/aws/aws-lambda-go/lambda"
)

func main() {
	lambda.Start(func(_ context.Context, ev json.RawMessage) (any, error) {
		var in struct {
			Fail bool `json:"fail"`
		}
		_ = json.Unmarshal(ev, &in)
		if in.Fail {
			return nil, errors.New("echo: asked to fail")
		}
		return map[string]any{"event": ev, "env": os.Getenv("STRAND_PROBE")}, nil
	})
}
