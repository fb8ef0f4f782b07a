package metastore_test

import (
	"testing"

	"github.com/strandlog/strand/shared/metastore"
	"github.com/strandlog/strand/shared/metastore/metastoretest"
)

func TestMemConformance(t *testing.T) {
	metastoretest.Run(t, func(t *testing.T) metastore.Store { return metastore.NewMem() })
}
