package server

import (
	"fmt"

	"connectrpc.com/connect"

	"github.com/strandlog/strand/shared/star"
)

// unknownStream is the answer when the star no longer has a stream the
// call found in the metastore: it was deleted (or is being deleted) since.
// The star's error names the stream by its internal id, which means
// nothing to the caller; the caller knows the name it asked for.
func unknownStream() error {
	return connect.NewError(connect.CodeNotFound, fmt.Errorf("%w: the stream was deleted, or is being deleted", star.ErrUnknownStream))
}
