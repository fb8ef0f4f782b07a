package s3obj

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/strandlog/strand/shared/objstore"
)

// ConflictAttempts bounds the PUT attempts PutIfAbsent makes while S3 answers
// 409 ConditionalRequestConflict; after the last it returns ErrUnavailable.
const ConflictAttempts = 5

// ConflictBackoff is the wait after the first 409; it doubles after each.
const ConflictBackoff = 20 * time.Millisecond

// Options configures NewClient.
type Options struct {
	// Region, e.g. "us-east-1". Empty: the SDK's default chain (AWS_REGION,
	// the shared config file).
	Region string
	// Endpoint overrides the service endpoint (LocalStack, moto, MinIO),
	// e.g. "http://localhost:4566". Empty: the AWS endpoint for the region
	// and bucket (including the zonal endpoint of a directory bucket).
	Endpoint string
	// PathStyle addresses buckets as <endpoint>/<bucket>/<key>, which
	// emulators and MinIO need. Leave it false for AWS: directory buckets
	// do not support path-style requests.
	PathStyle bool
	// Credentials overrides the SDK's default credential chain (tests use
	// static credentials). Optional.
	Credentials aws.CredentialsProvider
	// HTTPClient overrides the SDK's default HTTP client. Optional.
	HTTPClient aws.HTTPClient
	// ExpressSessionMode is the S3 Express session mode to ask
	// CreateSession for: "ReadOnly" for a principal allowed only ReadOnly
	// sessions, "ReadWrite", or empty: the environment's
	// STRAND_S3EXPRESS_SESSION_MODE, and if that is empty too the SDK's
	// default provider (which asks for no mode, i.e. ReadWrite).
	ExpressSessionMode string
}

// NewClient builds an S3 client from the SDK's default configuration chain
// and o.
func NewClient(ctx context.Context, o Options) (*s3.Client, error) {
	var opts []func(*config.LoadOptions) error
	if o.Region != "" {
		opts = append(opts, config.WithRegion(o.Region))
	}
	if o.Credentials != nil {
		opts = append(opts, config.WithCredentialsProvider(o.Credentials))
	}
	if o.HTTPClient != nil {
		opts = append(opts, config.WithHTTPClient(o.HTTPClient))
	}
	cfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("s3obj: load AWS config: %w", err)
	}
	if cfg.Region == "" {
		return nil, errors.New("s3obj: no region: set Options.Region or AWS_REGION")
	}
	mode, err := expressMode(o)
	if err != nil {
		return nil, err
	}
	opts3 := func(so *s3.Options) {
		if o.Endpoint != "" {
			so.BaseEndpoint = aws.String(o.Endpoint)
		}
		so.UsePathStyle = o.PathStyle
		// Ranged GETs cannot be checksum-validated (the checksum covers the
		// whole object); segments and envelopes carry their own CRC-32C.
		so.DisableLogOutputChecksumValidationSkipped = true
	}
	if mode == "" {
		return s3.NewFromConfig(cfg, opts3), nil
	}
	// Sessions of the requested mode, created through a client of the same
	// configuration (CreateSession is signed with the base credentials).
	sessions := newExpressSessions(s3.NewFromConfig(cfg, opts3), mode, time.Now)
	return s3.NewFromConfig(cfg, opts3, func(so *s3.Options) { so.ExpressCredentials = sessions }), nil
}

// Bucket is one S3 bucket (general purpose or directory) as an
// objstore.Bucket.
type Bucket struct {
	client *s3.Client
	name   string
	sleep  func(ctx context.Context, d time.Duration) error
	maxGet int64 // bytes one Get may return
}

// DefaultMaxGet bounds the bytes one Get returns: far above strand's
// largest objects (a flight of a few MiB, a settled object of 8 MiB by
// default), so that a foreign or damaged object cannot exhaust memory.
const DefaultMaxGet = 256 << 20

// ErrTooLarge: a Get would return more than the bucket's bound.
var ErrTooLarge = errors.New("objstore/s3obj: object larger than the read bound")

// WithMaxGet returns a copy of b whose Gets return at most n bytes (n <= 0:
// DefaultMaxGet); a larger one fails with ErrTooLarge.
func (b *Bucket) WithMaxGet(n int64) *Bucket {
	c := *b
	c.maxGet = n
	if n <= 0 {
		c.maxGet = DefaultMaxGet
	}
	return &c
}

var (
	_ objstore.Bucket     = (*Bucket)(nil)
	_ objstore.ReaderInto = (*Bucket)(nil)
)

// New returns the bucket named bucket, reached through client. It makes no
// request; a missing bucket shows on first use.
func New(client *s3.Client, bucket string) *Bucket {
	return &Bucket{client: client, name: bucket, sleep: sleepCtx, maxGet: DefaultMaxGet}
}

// Name returns the bucket's name.
func (b *Bucket) Name() string { return b.name }

// IsDirectoryBucket reports whether name is an S3 Express One Zone directory
// bucket name (<base>--<zone-id>--x-s3).
func IsDirectoryBucket(name string) bool { return strings.HasSuffix(name, "--x-s3") }

// noRetry makes one attempt only: see the package documentation.
func noRetry(o *s3.Options) { o.Retryer = retry.AddWithMaxAttempts(o.Retryer, 1) }

// PutIfAbsent creates key with body if no object exists at key, with
// PutObject If-None-Match: *. See the package documentation for the mapping
// of outcomes to errors.
func (b *Bucket) PutIfAbsent(ctx context.Context, key string, body []byte) error {
	if err := ctx.Err(); err != nil {
		// Nothing was sent.
		return fmt.Errorf("put s3://%s/%s: %w: %w", b.name, key, objstore.ErrUnavailable, err)
	}
	wait := ConflictBackoff
	for attempt := 1; ; attempt++ {
		lent := lend(body)
		_, err := b.client.PutObject(ctx, &s3.PutObjectInput{
			Bucket:        aws.String(b.name),
			Key:           aws.String(key),
			Body:          lent,
			ContentLength: aws.Int64(int64(len(body))),
			IfNoneMatch:   aws.String("*"),
		}, noRetry)
		lent.end() // body is the caller's again (objstore's contract)
		if err == nil {
			return nil
		}
		kind := classify(err, true)
		if kind != conflict {
			return b.wrap("put", key, kind, err)
		}
		if attempt >= ConflictAttempts {
			return fmt.Errorf("put s3://%s/%s: %d attempts met 409 ConditionalRequestConflict: %w: %w",
				b.name, key, attempt, objstore.ErrUnavailable, err)
		}
		if serr := b.sleep(ctx, wait); serr != nil {
			// The last attempt's answer was a definite 409: nothing written.
			return fmt.Errorf("put s3://%s/%s: waiting to retry a 409 conflict: %w: %w", b.name, key, objstore.ErrUnavailable, serr)
		}
		wait *= 2
	}
}

// Get reads n bytes of key from off (n < 0: to the end) with one ranged
// GetObject.
func (b *Bucket) Get(ctx context.Context, key string, off, n int64) ([]byte, error) {
	if off < 0 {
		return nil, fmt.Errorf("get s3://%s/%s at %d: negative offset: %w", b.name, key, off, objstore.ErrRange)
	}
	if n == 0 {
		// No byte range selects zero bytes; check the key and offset by Head.
		size, err := b.Head(ctx, key)
		if err != nil {
			return nil, err
		}
		if off > size || (off == size && size > 0) {
			return nil, fmt.Errorf("get s3://%s/%s at %d (size %d): %w", b.name, key, off, size, objstore.ErrRange)
		}
		return []byte{}, nil
	}
	in := &s3.GetObjectInput{Bucket: aws.String(b.name), Key: aws.String(key)}
	switch {
	case n < 0 && off == 0:
		// The whole object, with no Range: an empty object has no
		// satisfiable range.
	case n < 0 || n > math.MaxInt64-off:
		in.Range = aws.String("bytes=" + strconv.FormatInt(off, 10) + "-")
	default:
		in.Range = aws.String("bytes=" + strconv.FormatInt(off, 10) + "-" + strconv.FormatInt(off+n-1, 10))
	}
	out, err := b.client.GetObject(ctx, in)
	if err != nil {
		kind := classify(err, false)
		if kind == rangeErr && off == 0 {
			// bytes=0-x is satisfiable for every non-empty object, so the
			// object exists and is empty.
			return []byte{}, nil
		}
		return nil, b.wrap(fmt.Sprintf("get (range %s)", aws.ToString(in.Range)), key, kind, err)
	}
	defer out.Body.Close()
	if cl := aws.ToInt64(out.ContentLength); cl > b.maxGet {
		return nil, fmt.Errorf("get s3://%s/%s (range %s): %d bytes, more than the bound of %d: %w", b.name, key, aws.ToString(in.Range), cl, b.maxGet, ErrTooLarge)
	}
	var buf bytes.Buffer
	if cl := aws.ToInt64(out.ContentLength); cl > 0 {
		buf.Grow(int(cl))
	}
	if _, err := buf.ReadFrom(io.LimitReader(out.Body, b.maxGet+1)); err != nil {
		return nil, b.wrap("get: read body", key, unavailable, err)
	}
	if int64(buf.Len()) > b.maxGet {
		return nil, fmt.Errorf("get s3://%s/%s (range %s): more than the bound of %d bytes: %w", b.name, key, aws.ToString(in.Range), b.maxGet, ErrTooLarge)
	}
	if cl := out.ContentLength; cl != nil && *cl != int64(buf.Len()) {
		return nil, fmt.Errorf("get s3://%s/%s: body has %d bytes, Content-Length %d: %w",
			b.name, key, buf.Len(), *cl, objstore.ErrUnavailable)
	}
	return buf.Bytes(), nil
}

// GetInto reads up to len(dst) bytes of key at off into dst: one ranged
// GET whose body is read straight into dst (a settled location read in
// parts fills one buffer, not a buffer per part and a copy).
func (b *Bucket) GetInto(ctx context.Context, key string, off int64, dst []byte) (int, error) {
	if len(dst) == 0 || off < 0 {
		_, err := b.Get(ctx, key, off, 0)
		return 0, err
	}
	if int64(len(dst)) > b.maxGet {
		return 0, fmt.Errorf("get s3://%s/%s at %d: %d bytes, more than the bound of %d: %w", b.name, key, off, len(dst), b.maxGet, ErrTooLarge)
	}
	rng := "bytes=" + strconv.FormatInt(off, 10) + "-" + strconv.FormatInt(off+int64(len(dst))-1, 10)
	out, err := b.client.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(b.name), Key: aws.String(key), Range: aws.String(rng)})
	if err != nil {
		kind := classify(err, false)
		if kind == rangeErr && off == 0 {
			return 0, nil // an empty object (see Get)
		}
		return 0, b.wrap(fmt.Sprintf("get (range %s)", rng), key, kind, err)
	}
	defer out.Body.Close()
	cl := aws.ToInt64(out.ContentLength)
	if out.ContentLength == nil || cl > int64(len(dst)) {
		return 0, fmt.Errorf("get s3://%s/%s (range %s): Content-Length %d for %d bytes asked: %w", b.name, key, rng, cl, len(dst), objstore.ErrUnavailable)
	}
	got, err := io.ReadFull(out.Body, dst[:cl])
	if err != nil {
		return 0, b.wrap("get: read body", key, unavailable, err)
	}
	return got, nil
}

// Head returns the size of key (HeadObject's Content-Length).
func (b *Bucket) Head(ctx context.Context, key string) (int64, error) {
	out, err := b.client.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(b.name), Key: aws.String(key)})
	if err != nil {
		return 0, b.wrap("head", key, classify(err, false), err)
	}
	if out.ContentLength == nil {
		return 0, fmt.Errorf("head s3://%s/%s: no Content-Length in the answer: %w", b.name, key, objstore.ErrUnavailable)
	}
	return *out.ContentLength, nil
}

// Delete removes key. S3 answers 204 whether or not the key existed.
func (b *Bucket) Delete(ctx context.Context, key string) error {
	_, err := b.client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(b.name), Key: aws.String(key)})
	if err != nil {
		kind := classify(err, false)
		if kind == notFound {
			return nil
		}
		return b.wrap("delete", key, kind, err)
	}
	return nil
}

// List returns every key under prefix in byte order, following
// ListObjectsV2 continuation tokens. Tools and tests only.
func (b *Bucket) List(ctx context.Context, prefix string) ([]string, error) {
	// Directory buckets accept only prefixes that end in "/" and list in no
	// particular order: list the enclosing "directory" and filter and sort
	// here.
	listPrefix := prefix
	if IsDirectoryBucket(b.name) {
		listPrefix = prefix[:strings.LastIndex(prefix, "/")+1]
	}
	in := &s3.ListObjectsV2Input{Bucket: aws.String(b.name)}
	if listPrefix != "" {
		in.Prefix = aws.String(listPrefix)
	}
	var keys []string
	p := s3.NewListObjectsV2Paginator(b.client, in)
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, b.wrap("list", prefix+"*", classify(err, false), err)
		}
		for _, o := range page.Contents {
			if k := aws.ToString(o.Key); strings.HasPrefix(k, prefix) {
				keys = append(keys, k)
			}
		}
	}
	slices.Sort(keys)
	return keys, nil
}

// kind is an error's meaning for the objstore contract.
type kind int

const (
	other       kind = iota // a definite refusal with no sentinel (access denied, no such bucket, bad request)
	exists                  // 412 on a conditional PUT
	conflict                // 409 ConditionalRequestConflict
	notFound                // 404 NoSuchKey / NotFound
	rangeErr                // 416 InvalidRange
	unavailable             // throttled, 5xx on a read, transport failure on a read, nothing sent
	ambiguous               // a write whose outcome is unknown
)

func (b *Bucket) wrap(op, key string, k kind, err error) error {
	var sentinel error
	switch k {
	case exists:
		sentinel = objstore.ErrExists
	case notFound:
		sentinel = objstore.ErrNotFound
	case rangeErr:
		sentinel = objstore.ErrRange
	case unavailable, conflict:
		sentinel = objstore.ErrUnavailable
	case ambiguous:
		sentinel = objstore.ErrAmbiguous
	default:
		return fmt.Errorf("%s s3://%s/%s: %w", op, b.name, key, err)
	}
	return fmt.Errorf("%s s3://%s/%s: %w: %w", op, b.name, key, sentinel, err)
}

// throttleCodes are the error codes S3 and the SDK use for throttling.
var throttleCodes = map[string]bool{
	"SlowDown": true, "Throttling": true, "ThrottlingException": true, "ThrottledException": true,
	"RequestThrottled": true, "RequestThrottledException": true, "TooManyRequestsException": true,
	"RequestLimitExceeded": true, "ProvisionedThroughputExceededException": true,
	"BandwidthLimitExceeded": true,
}

// classify maps an SDK error to its meaning. write is true for PutIfAbsent,
// where any failure after the request may have reached S3 is ambiguous.
func classify(err error, write bool) kind {
	var status int
	var re interface{ HTTPStatusCode() int }
	if errors.As(err, &re) {
		status = re.HTTPStatusCode()
	}
	code := ""
	var ae smithy.APIError
	if errors.As(err, &ae) {
		code = ae.ErrorCode()
	}
	if status != 0 || code != "" {
		switch {
		case code == "PreconditionFailed" || status == 412:
			if write {
				return exists
			}
			return other
		case code == "ConditionalRequestConflict" || (write && status == 409):
			return conflict
		case code == "NoSuchKey" || code == "NotFound" || (status == 404 && code != "NoSuchBucket"):
			return notFound
		case code == "InvalidRange" || status == 416:
			return rangeErr
		case throttleCodes[code] || status == 429 || status == 503:
			// A refusal: S3 did not process the request.
			return unavailable
		case status >= 500:
			// 500/502/504: S3 or a proxy failed somewhere along the way; a
			// write may have been applied before the failure.
			if write {
				return ambiguous
			}
			return unavailable
		case status >= 400 || code != "":
			return other
		}
		// A 2xx or 3xx whose body could not be read or parsed.
		if write {
			return ambiguous
		}
		return unavailable
	}
	if write && mayHaveBeenSent(err) {
		return ambiguous
	}
	return unavailable
}

// mayHaveBeenSent reports whether a failed call without an HTTP answer may
// have delivered its request. Only failures known to happen before the request
// leaves count as not sent: dialing (connection refused, no route, DNS) and
// serializing the input. Everything else (timeouts, resets, a context that
// ended during the call, errors reading the answer, unknown errors) may have
// been applied by S3.
func mayHaveBeenSent(err error) bool {
	var ser *smithy.SerializationError
	if errors.As(err, &ser) {
		return false
	}
	var send *smithyhttp.RequestSendError
	if errors.As(err, &send) {
		var op *net.OpError
		if errors.As(send.Err, &op) && op.Op == "dial" {
			return false
		}
		var dns *net.DNSError
		if errors.As(send.Err, &dns) {
			return false
		}
	}
	return true
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
