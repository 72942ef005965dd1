//go:build !(linux && cgo && verbs)

package verbs

import (
	"errors"

	"github.com/go-rpcrdma/rpcrdma/rdma"
)

// ErrNotBuilt is returned by New in a build without the verbs provider.
var ErrNotBuilt = errors.New("verbs: this binary was built without the verbs provider: " +
	"install libibverbs-dev and librdmacm-dev (rdma-core), and build on Linux with cgo " +
	"and -tags verbs")

// Provider is the verbs provider; in this build it cannot be created.
type Provider struct{ rdma.Provider }

// New returns ErrNotBuilt: this build has no verbs provider.
func New(opts Options) (*Provider, error) { return nil, ErrNotBuilt }

// Resources returns zero counts.
func (p *Provider) Resources() Resources { return Resources{} }

// Available reports whether this build has the verbs provider.
const Available = false
