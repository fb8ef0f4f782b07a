// Command poller runs strand's settlement Lambdas (the bootstraps built
// from functions/absorb, settle, trim and probe, unchanged) against
// LocalStack's core, which cannot execute Lambdas without Docker. It does
// what Lambda does around them:
//
//   - serves each bootstrap the Lambda Runtime API (runtime.go), one
//     invocation at a time, with the environment the stack gives the
//     function (localstack/stack.env's STRAND_<NAME>_ENV, the resource
//     names of localstack/strand.env, and the endpoints);
//   - polls the release queue for absorb and the fence queue for probe as
//     the SQS event source mappings do (batches of up to 10, the same
//     events.SQSEvent shape, partial-batch responses: a reported failure
//     stays on the queue until its visibility timeout ends);
//   - polls the sweep queue, the target LocalStack's EventBridge rules
//     deliver their scheduled events to (deploy.sh points each rule there
//     in core mode), and invokes the rule's function with the event.
//
// localstack/deploy.sh starts it in core mode; see docs/localstack.md.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/strandlog/strand/shared/lambdaenv"
)

var functionNames = []string{"absorb", "settle", "trim", "probe"}

func main() {
	if err := run(os.Args[1:]); err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(os.Stderr, "poller:", err)
		os.Exit(1)
	}
}

type config struct {
	bootstraps, endpoint, ddbEndpoint, region string
	release, fence, sweeps                    string
}

func run(args []string) error {
	var c config
	fl := flag.NewFlagSet("poller", flag.ContinueOnError)
	fl.StringVar(&c.bootstraps, "bootstrap-dir", "localstack/build", "directory with <function>/bootstrap (deploy.sh builds them)")
	fl.StringVar(&c.endpoint, "endpoint", "http://127.0.0.1:4566", "LocalStack's endpoint (S3, SQS)")
	fl.StringVar(&c.ddbEndpoint, "dynamodb-endpoint", "", "DynamoDB's endpoint (default: --endpoint)")
	fl.StringVar(&c.region, "region", "us-east-1", "region")
	fl.StringVar(&c.release, "release-queue-url", "", "the release queue (absorb's trigger)")
	fl.StringVar(&c.fence, "fence-queue-url", "", "the fence queue (probe's trigger)")
	fl.StringVar(&c.sweeps, "sweep-queue-url", "", "the queue the sweep rules deliver their scheduled events to")
	if err := fl.Parse(args); err != nil {
		return err
	}
	if c.release == "" || c.fence == "" || c.sweeps == "" {
		return errors.New("--release-queue-url, --fence-queue-url and --sweep-queue-url are required")
	}
	if c.ddbEndpoint == "" {
		c.ddbEndpoint = c.endpoint
	}
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil)).With("component", "poller")
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()

	fns := map[string]*function{}
	for _, name := range functionNames {
		f, err := startFunction(ctx, c, name, log)
		if err != nil {
			return err
		}
		fns[name] = f
	}
	sq := sqs.New(sqs.Options{Region: c.region, BaseEndpoint: aws.String(c.endpoint),
		Credentials: credentials.NewStaticCredentialsProvider(envOr("AWS_ACCESS_KEY_ID", "test"), envOr("AWS_SECRET_ACCESS_KEY", "test"), "")})
	p := &poller{sq: sq, region: c.region, log: log}
	errc := make(chan error, 3)
	go func() { errc <- p.trigger(ctx, c.release, fns["absorb"]) }()
	go func() { errc <- p.trigger(ctx, c.fence, fns["probe"]) }()
	go func() { errc <- p.sweep(ctx, c.sweeps, fns) }()
	log.Info("polling", "release", c.release, "fence", c.fence, "sweeps", c.sweeps)
	err := <-errc
	stop()
	if ctx.Err() != nil {
		return nil
	}
	return err
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

// function is one settlement function: its bootstrap process and the
// Runtime API it is served.
type function struct {
	name    string
	api     *runtimeAPI
	timeout time.Duration
}

// startFunction serves name's Runtime API on a loopback port and keeps its
// bootstrap running (a crashed one is started again, as Lambda starts a new
// execution environment).
func startFunction(ctx context.Context, c config, name string, log *slog.Logger) (*function, error) {
	up := strings.ToUpper(name)
	mem, err := strconv.Atoi(os.Getenv("STRAND_" + up + "_MEMORY_MIB"))
	if err != nil {
		return nil, fmt.Errorf("STRAND_%s_MEMORY_MIB (localstack/stack.env): %w", up, err)
	}
	secs, err := strconv.Atoi(os.Getenv("STRAND_" + up + "_TIMEOUT_SECONDS"))
	if err != nil {
		return nil, fmt.Errorf("STRAND_%s_TIMEOUT_SECONDS (localstack/stack.env): %w", up, err)
	}
	bin := filepath.Join(c.bootstraps, name, "bootstrap")
	if _, err := os.Stat(bin); err != nil {
		return nil, fmt.Errorf("%s: %w (deploy.sh builds it)", name, err)
	}
	fnName := "strand-" + name
	f := &function{name: name, timeout: time.Duration(secs) * time.Second,
		api: newRuntimeAPI(fnName, "arn:aws:lambda:"+c.region+":000000000000:function:"+fnName)}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	srv := &http.Server{Handler: f.api, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	go func() { <-ctx.Done(); _ = srv.Close() }()

	env := []string{
		"PATH=" + os.Getenv("PATH"),
		"AWS_LAMBDA_RUNTIME_API=" + ln.Addr().String(),
		"AWS_LAMBDA_FUNCTION_NAME=" + fnName,
		"AWS_LAMBDA_FUNCTION_MEMORY_SIZE=" + strconv.Itoa(mem),
		"AWS_LAMBDA_FUNCTION_VERSION=$LATEST",
		"AWS_REGION=" + c.region, "AWS_DEFAULT_REGION=" + c.region,
		"AWS_ACCESS_KEY_ID=" + envOr("AWS_ACCESS_KEY_ID", "test"),
		"AWS_SECRET_ACCESS_KEY=" + envOr("AWS_SECRET_ACCESS_KEY", "test"),
		// What LocalStack sets inside a Lambda, and moto's DynamoDB.
		"AWS_ENDPOINT_URL=" + c.endpoint,
		"AWS_ENDPOINT_URL_DYNAMODB=" + c.ddbEndpoint,
		"STRAND_S3_PATH_STYLE=true",
	}
	for _, k := range []string{"STRAND_TABLE", "STRAND_EXPRESS_BUCKETS", "STRAND_STANDARD_BUCKET", "STRAND_SETTLED_BUCKET"} {
		env = append(env, k+"="+os.Getenv(k))
	}
	// The stack's literal values: STRAND_PASS_INDEX, GOMEMLIMIT, ...
	env = append(env, strings.Fields(os.Getenv("STRAND_"+up+"_ENV"))...)
	go func() {
		for ctx.Err() == nil {
			cmd := exec.CommandContext(ctx, bin)
			cmd.Env = env
			cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
			err := cmd.Run()
			if ctx.Err() == nil {
				log.Warn("bootstrap exited; starting it again", "function", name, "err", fmt.Sprint(err))
				select {
				case <-time.After(time.Second):
				case <-ctx.Done():
				}
			}
		}
	}()
	return f, nil
}

type poller struct {
	sq     *sqs.Client
	region string
	log    *slog.Logger
}

func (p *poller) receive(ctx context.Context, url string) ([]sqstypes.Message, error) {
	out, err := p.sq.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(url), MaxNumberOfMessages: 10, WaitTimeSeconds: 5,
		MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{sqstypes.MessageSystemAttributeNameAll},
		MessageAttributeNames:       []string{"All"}})
	if err != nil {
		return nil, fmt.Errorf("receive from %s: %w", url, err)
	}
	return out.Messages, nil
}

// poll receives from url until ctx ends, handing each non-empty batch to
// handle; a receive or handle error ends it (nil once ctx has ended).
func (p *poller) poll(ctx context.Context, url string, handle func([]sqstypes.Message) error) error {
	for ctx.Err() == nil {
		msgs, err := p.receive(ctx, url)
		if err == nil && len(msgs) > 0 {
			err = handle(msgs)
		}
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
	}
	return nil
}

// delete deletes a handled message. One handled after its visibility
// timeout is visible again (AWS and LocalStack refuse its handle on a FIFO
// queue): it comes back and is handled again, as under Lambda.
func (p *poller) delete(ctx context.Context, url string, m sqstypes.Message) error {
	_, err := p.sq.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(url), ReceiptHandle: m.ReceiptHandle})
	if lambdaenv.ReceiptExpired(err) {
		p.log.Warn("handled after its visibility timeout: it will be delivered again", "queue", url, "messageId", aws.ToString(m.MessageId))
		return nil
	}
	if err != nil {
		return fmt.Errorf("delete from %s: %w", url, err)
	}
	return nil
}

// trigger is an SQS event source mapping with ReportBatchItemFailures:
// a batch goes to f; the messages it did not report failed are deleted; on
// a function error none is (each comes back after its visibility timeout).
func (p *poller) trigger(ctx context.Context, url string, f *function) error {
	attrs, err := p.sq.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(url),
		AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameQueueArn}})
	if err != nil {
		return fmt.Errorf("queue %s: %w", url, err)
	}
	arn := attrs.Attributes[string(sqstypes.QueueAttributeNameQueueArn)]
	return p.poll(ctx, url, func(msgs []sqstypes.Message) error {
		ev, err := json.Marshal(sqsEvent(arn, p.region, msgs))
		if err != nil {
			return err
		}
		resp, err := f.api.invoke(ctx, ev, f.timeout)
		if err != nil {
			p.log.Warn("invocation failed; the batch stays on the queue", "function", f.name, "messages", len(msgs), "err", err.Error())
			return nil
		}
		failed, err := failedIDs(resp)
		if err != nil {
			p.log.Warn("invalid batch response; the batch stays on the queue", "function", f.name, "err", err.Error())
			return nil
		}
		for _, m := range msgs {
			if !failed[aws.ToString(m.MessageId)] {
				if err := p.delete(ctx, url, m); err != nil {
					return err
				}
			}
		}
		p.log.Info("batch", "function", f.name, "messages", len(msgs), "failed", len(failed))
		return nil
	})
}

// sweep delivers each scheduled event on the sweep queue to the function
// whose rule fired (an asynchronous invocation: the message is deleted
// whatever the outcome; the next sweep comes with the next period).
func (p *poller) sweep(ctx context.Context, url string, fns map[string]*function) error {
	return p.poll(ctx, url, func(msgs []sqstypes.Message) error {
		for _, m := range msgs {
			body := []byte(aws.ToString(m.Body))
			name, err := sweepFunction(body, functionNames)
			if err != nil {
				p.log.Warn("dropped a message on the sweep queue", "err", err.Error())
			} else if _, err := fns[name].api.invoke(ctx, body, fns[name].timeout); err != nil {
				p.log.Warn("sweep failed", "function", name, "err", err.Error())
			} else {
				p.log.Info("sweep", "function", name)
			}
			if err := p.delete(ctx, url, m); err != nil {
				return err
			}
		}
		return nil
	})
}
