package s3obj

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// EnvExpressSessionMode names the environment variable NewClient reads when
// Options.ExpressSessionMode is empty: "ReadOnly" or "ReadWrite" (empty:
// the SDK's own session provider, which asks for no mode, that is
// ReadWrite). The CDK stack sets it to ReadOnly for the functions whose
// role may only create ReadOnly sessions (absorb, settle).
const EnvExpressSessionMode = "STRAND_S3EXPRESS_SESSION_MODE"

// ErrSessionMode is returned (wrapped) for a session mode other than
// ReadOnly or ReadWrite.
var ErrSessionMode = errors.New("s3obj: invalid S3 Express session mode")

// expressRefresh is how long before its expiry a session is renewed
// (sessions last 5 minutes).
const expressRefresh = time.Minute

// maxExpressSessions bounds the sessions kept (one per directory bucket).
const maxExpressSessions = 64

// sessionMode parses a session mode; "" is the SDK default (no mode).
func sessionMode(s string) (types.SessionMode, error) {
	switch m := types.SessionMode(s); m {
	case "", types.SessionModeReadOnly, types.SessionModeReadWrite:
		return m, nil
	}
	return "", fmt.Errorf("%w: %q (want %s or %s)", ErrSessionMode, s, types.SessionModeReadOnly, types.SessionModeReadWrite)
}

// sessionAPI is the one call the provider makes.
type sessionAPI interface {
	CreateSession(context.Context, *s3.CreateSessionInput, ...func(*s3.Options)) (*s3.CreateSessionOutput, error)
}

// expressSessions is an s3.ExpressCredentialsProvider that asks
// CreateSession for one session mode. The SDK's default provider sends no
// x-amz-create-session-mode, which S3 takes as ReadWrite, so a role granted
// s3express:CreateSession only with s3express:SessionMode = ReadOnly is
// refused. Sessions are cached per bucket and renewed expressRefresh
// before they expire; concurrent callers for one bucket wait for one
// CreateSession.
type expressSessions struct {
	api  sessionAPI
	mode types.SessionMode
	now  func() time.Time

	mu       sync.Mutex
	sessions map[string]*expressSession
}

type expressSession struct {
	mu    sync.Mutex
	creds aws.Credentials
}

var _ s3.ExpressCredentialsProvider = (*expressSessions)(nil)

func newExpressSessions(api sessionAPI, mode types.SessionMode, now func() time.Time) *expressSessions {
	return &expressSessions{api: api, mode: mode, now: now, sessions: map[string]*expressSession{}}
}

// Retrieve returns session credentials for bucket in the provider's mode.
func (p *expressSessions) Retrieve(ctx context.Context, bucket string) (aws.Credentials, error) {
	p.mu.Lock()
	s, ok := p.sessions[bucket]
	if !ok {
		if len(p.sessions) >= maxExpressSessions {
			p.sessions = map[string]*expressSession{}
		}
		s = &expressSession{}
		p.sessions[bucket] = s
	}
	p.mu.Unlock()

	s.mu.Lock()
	defer s.mu.Unlock()
	if s.creds.HasKeys() && p.now().Add(expressRefresh).Before(s.creds.Expires) {
		return s.creds, nil
	}
	out, err := p.api.CreateSession(ctx, &s3.CreateSessionInput{Bucket: aws.String(bucket), SessionMode: p.mode})
	if err != nil {
		return aws.Credentials{}, fmt.Errorf("s3obj: create %s session on %s: %w", p.mode, bucket, err)
	}
	c := out.Credentials
	if c == nil || c.AccessKeyId == nil || c.SecretAccessKey == nil || c.SessionToken == nil || c.Expiration == nil {
		return aws.Credentials{}, fmt.Errorf("s3obj: create %s session on %s: answer without complete credentials", p.mode, bucket)
	}
	s.creds = aws.Credentials{
		AccessKeyID: *c.AccessKeyId, SecretAccessKey: *c.SecretAccessKey, SessionToken: *c.SessionToken,
		CanExpire: true, Expires: *c.Expiration, Source: "s3obj.expressSessions",
	}
	return s.creds, nil
}

// expressMode is Options.ExpressSessionMode, else the environment's.
func expressMode(o Options) (types.SessionMode, error) {
	m := o.ExpressSessionMode
	if m == "" {
		m = os.Getenv(EnvExpressSessionMode)
	}
	mode, err := sessionMode(m)
	if err != nil && o.ExpressSessionMode == "" {
		return "", fmt.Errorf("%s: %w", EnvExpressSessionMode, err)
	}
	return mode, err
}
