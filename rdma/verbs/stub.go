//go:build !(linux && cgo && verbs)

package verbs

import "github.com/go-rpcrdma/rpcrdma/rdma"

// Provider is the verbs provider; in this build it cannot be created.
type Provider struct{ rdma.Provider }

// New returns ErrNotBuilt: this build has no verbs provider.
func New(opts Options) (*Provider, error) { return nil, ErrNotBuilt }

// Options returns the zero Options.
func (p *Provider) Options() Options { return Options{} }

// Resources returns zero counts.
func (p *Provider) Resources() Resources { return Resources{} }

// Available reports whether this build has the verbs provider.
const Available = false
