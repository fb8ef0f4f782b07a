package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// runtimeClient plays a bootstrap against api: next, then post to the
// given kind ("response" or "error").
func runtimeClient(t *testing.T, url, kind string, reply func(event []byte) []byte) {
	t.Helper()
	res, err := http.Get(url + runtimePrefix + "invocation/next")
	if err != nil {
		t.Error(err)
		return
	}
	event, _ := io.ReadAll(res.Body)
	res.Body.Close()
	id := res.Header.Get("Lambda-Runtime-Aws-Request-Id")
	deadline, err := strconv.ParseInt(res.Header.Get("Lambda-Runtime-Deadline-Ms"), 10, 64)
	if err != nil || time.UnixMilli(deadline).Before(time.Now()) {
		t.Errorf("deadline header %q: %v", res.Header.Get("Lambda-Runtime-Deadline-Ms"), err)
	}
	if arn := res.Header.Get("Lambda-Runtime-Invoked-Function-Arn"); !strings.HasSuffix(arn, ":function:strand-absorb") {
		t.Errorf("function ARN header %q", arn)
	}
	post, err := http.Post(url+runtimePrefix+"invocation/"+id+"/"+kind, "application/json", bytes.NewReader(reply(event)))
	if err != nil {
		t.Error(err)
		return
	}
	post.Body.Close()
	if post.StatusCode != http.StatusAccepted {
		t.Errorf("post %s: %s", kind, post.Status)
	}
}

// TestRuntimeAPIResponse: the event reaches the runtime as sent, its
// response comes back to invoke.
func TestRuntimeAPIResponse(t *testing.T) {
	api := newRuntimeAPI("strand-absorb", "arn:aws:lambda:us-east-1:000000000000:function:strand-absorb")
	srv := httptest.NewServer(api)
	defer srv.Close()
	go runtimeClient(t, srv.URL, "response", func(ev []byte) []byte { return append([]byte(`{"got":`), append(ev, '}')...) })
	out, err := api.invoke(context.Background(), []byte(`{"detail-type":"Scheduled Event"}`), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if string(out) != `{"got":{"detail-type":"Scheduled Event"}}` {
		t.Fatalf("response %s", out)
	}
}

// TestRuntimeAPIError: an error the function posts is ErrFunction with its
// message; a response for an unknown id is refused.
func TestRuntimeAPIError(t *testing.T) {
	api := newRuntimeAPI("strand-absorb", "arn:aws:lambda:us-east-1:000000000000:function:strand-absorb")
	srv := httptest.NewServer(api)
	defer srv.Close()
	go runtimeClient(t, srv.URL, "error", func([]byte) []byte { return []byte(`{"errorMessage":"absorb: boom"}`) })
	_, err := api.invoke(context.Background(), []byte(`{}`), time.Minute)
	if !errors.Is(err, ErrFunction) || !strings.Contains(err.Error(), "absorb: boom") {
		t.Fatalf("invoke: %v, want ErrFunction with the function's message", err)
	}
	res, err := http.Post(srv.URL+runtimePrefix+"invocation/nope/response", "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusBadRequest {
		t.Fatalf("response for an unknown id: %s", res.Status)
	}
}

// TestRuntimeAPINoRuntime: with no bootstrap asking, invoke gives up at
// the context's end instead of hanging.
func TestRuntimeAPINoRuntime(t *testing.T) {
	api := newRuntimeAPI("strand-absorb", "arn")
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := api.invoke(ctx, []byte(`{}`), time.Minute); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("invoke: %v", err)
	}
}

// TestSQSEventShape: the event has the JSON names Lambda's SQS trigger
// uses, with the message group id among the attributes.
func TestSQSEventShape(t *testing.T) {
	ev := sqsEvent("arn:aws:sqs:us-east-1:000000000000:strand-release.fifo", "us-east-1", []sqstypes.Message{{
		MessageId: aws.String("m1"), ReceiptHandle: aws.String("r1"), Body: aws.String(`{"star":"star-0"}`),
		Attributes: map[string]string{"MessageGroupId": "star-0/express"},
	}})
	raw, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	var generic struct {
		Records []map[string]any `json:"Records"`
	}
	if err := json.Unmarshal(raw, &generic); err != nil || len(generic.Records) != 1 {
		t.Fatalf("%s: %v", raw, err)
	}
	r := generic.Records[0]
	for k, want := range map[string]string{"messageId": "m1", "receiptHandle": "r1", "body": `{"star":"star-0"}`,
		"eventSource": "aws:sqs", "eventSourceARN": "arn:aws:sqs:us-east-1:000000000000:strand-release.fifo", "awsRegion": "us-east-1"} {
		if r[k] != want {
			t.Errorf("%s = %v, want %q", k, r[k], want)
		}
	}
	if g := r["attributes"].(map[string]any)["MessageGroupId"]; g != "star-0/express" {
		t.Errorf("MessageGroupId %v", g)
	}
}

// scheduled is an EventBridge scheduled event as a rule delivers it.
func scheduled(rule string) []byte {
	return []byte(`{"version":"0","id":"x","detail-type":"Scheduled Event","source":"aws.events","account":"000000000000",` +
		`"time":"2026-12-04T18:00:00Z","region":"us-east-1","resources":["arn:aws:events:us-east-1:000000000000:rule/` + rule + `"],"detail":{}}`)
}

func TestSweepFunction(t *testing.T) {
	for _, tc := range []struct {
		body []byte
		want string
	}{
		{scheduled("strand-settle-sweep"), "settle"},
		{scheduled("strand-probe-sweep"), "probe"},
		{scheduled("strand-other-sweep"), ""},
		{scheduled("settle"), ""},
		{[]byte(`{"detail-type":"Scheduled Event","source":"aws.events","resources":["rule/strand-trim-sweep"]}`), ""},
		{[]byte(`{"detail-type":"Other","source":"aws.events","resources":["arn:aws:events:us-east-1:0:rule/strand-trim-sweep"]}`), ""},
		{[]byte(`not json`), ""},
	} {
		got, err := sweepFunction(tc.body, functionNames)
		if tc.want == "" {
			if !errors.Is(err, ErrSweepEvent) {
				t.Errorf("%s: %q, %v; want ErrSweepEvent", tc.body, got, err)
			}
		} else if err != nil || got != tc.want {
			t.Errorf("%s: %q, %v; want %q", tc.body, got, err, tc.want)
		}
	}
}

func FuzzSweepFunction(f *testing.F) {
	f.Add(scheduled("strand-absorb-sweep"))
	f.Add([]byte(`{"resources":[]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		name, err := sweepFunction(body, functionNames)
		if err == nil {
			if !strings.Contains(string(body), "strand-"+name+"-sweep") {
				t.Fatalf("%q from a body that names no such rule", name)
			}
		} else if name != "" || !errors.Is(err, ErrSweepEvent) {
			t.Fatalf("%q, %v", name, err)
		}
	})
}

func TestFailedIDs(t *testing.T) {
	resp, _ := json.Marshal(events.SQSEventResponse{BatchItemFailures: []events.SQSBatchItemFailure{{ItemIdentifier: "m2"}}})
	got, err := failedIDs(resp)
	if err != nil || len(got) != 1 || !got["m2"] {
		t.Fatalf("%v %v", got, err)
	}
	if got, err := failedIDs([]byte("null")); err != nil || len(got) != 0 {
		t.Fatalf("null: %v %v", got, err)
	}
	if _, err := failedIDs([]byte(`[1]`)); err == nil {
		t.Fatal("a response that is not a batch response was accepted")
	}
}

func FuzzFailedIDs(f *testing.F) {
	f.Add([]byte(`{"batchItemFailures":[{"itemIdentifier":"a"}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := failedIDs(b)
		if err == nil && got == nil {
			t.Fatal("nil set without error")
		}
	})
}

// TestBootstrap: a bootstrap built with aws-lambda-go (testdata/echo, as
// functions/<name> are) runs under startFunction: it gets the events and
// the function's environment from stack.env's variables, its errors come
// back as ErrFunction, and one that fails does not stop the next.
func TestBootstrap(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a bootstrap")
	}
	dir := t.TempDir()
	build := exec.Command("go", "build", "-tags", "lambda.norpc", "-o", filepath.Join(dir, "absorb", "bootstrap"), "./testdata/echo")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the echo bootstrap: %v\n%s", err, out)
	}
	t.Setenv("STRAND_ABSORB_MEMORY_MIB", "512")
	t.Setenv("STRAND_ABSORB_TIMEOUT_SECONDS", "60")
	t.Setenv("STRAND_ABSORB_ENV", "STRAND_PROBE=from-stack-env GOMEMLIMIT=460MiB")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f, err := startFunction(ctx, config{bootstraps: dir, endpoint: "http://127.0.0.1:1", ddbEndpoint: "http://127.0.0.1:1", region: "us-east-1"},
		"absorb", slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	ictx, icancel := context.WithTimeout(ctx, 30*time.Second)
	defer icancel()
	if _, err := f.api.invoke(ictx, []byte(`{"fail":true}`), f.timeout); !errors.Is(err, ErrFunction) || !strings.Contains(err.Error(), "echo: asked to fail") {
		t.Fatalf("a failing handler: %v, want ErrFunction with its message", err)
	}
	out, err := f.api.invoke(ictx, []byte(`{"Records":[]}`), f.timeout)
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Event json.RawMessage `json:"event"`
		Env   string          `json:"env"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("%s: %v", out, err)
	}
	if string(got.Event) != `{"Records":[]}` || got.Env != "from-stack-env" {
		t.Fatalf("the bootstrap saw event %s and STRAND_PROBE %q", got.Event, got.Env)
	}
}
