package server

import "errors"

// ErrDeleteInProgress refuses a DeleteStream while another DeleteStream of
// the same stream is draining it (FailedPrecondition, not retriable: the
// other call deletes the stream, or fails and says why). It was Aborted
// before issue 31, which clients read as "outcome unknown".
var ErrDeleteInProgress = errors.New("server: delete in progress")
