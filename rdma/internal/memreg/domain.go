package memreg

import (
	"fmt"
	"sync"

	"github.com/go-rpcrdma/rpcrdma/rdma"
)

// Domain is one owner's registrations, a protection domain's: the regions
// it holds in a provider's Table, and the verbs on them, which take the
// owner's lock. A software provider's connection, or shared receive
// queue, holds one; its MR type embeds Region and calls these, adding
// what the provider does beside (iwarp waits for placement into a region
// it has invalidated or released). Errors begin with DomainConfig.Name.
type Domain struct {
	cfg     DomainConfig
	regions map[*Region]struct{}
}

// DomainConfig is what a provider tells NewDomain of an owner.
type DomainConfig struct {
	Name  string      // the provider, "iwarp": errors begin with it
	Table *Table      // the provider's STag table
	Mu    sync.Locker // the owner's lock, under which region state is written
	// Dead, called under Mu, returns why the owner takes no more regions
	// (it has ended, or is closed), or nil.
	Dead func() error
	// NewMR returns the provider's MR over b, and its Region, with Owner
	// and Buf set.
	NewMR func(b []byte) (rdma.MR, *Region)
}

// NewDomain returns the registrations of an owner, empty.
func NewDomain(cfg DomainConfig) Domain {
	return Domain{cfg: cfg, regions: make(map[*Region]struct{})}
}

// Alloc registers size bytes of zeroed memory with access. Go memory does
// not move, so the region is an ordinary slice. The caller does not hold
// the owner's lock.
func (d *Domain) Alloc(size int, access rdma.Access) (rdma.MR, error) {
	if size < 0 {
		return nil, fmt.Errorf("%s: alloc %d bytes: %w", d.cfg.Name, size, rdma.ErrInvalid)
	}
	if !access.Valid() {
		return nil, fmt.Errorf("%s: alloc %d bytes: access %v: %w", d.cfg.Name, size, access, rdma.ErrInvalid)
	}
	return d.register(make([]byte, size), access, "alloc")
}

// Register registers b, used in place, with access. The caller does not
// hold the owner's lock.
func (d *Domain) Register(b []byte, access rdma.Access) (rdma.MR, error) {
	return d.register(b, access, "register")
}

// register registers b unless the owner is dead; verb names the call in
// errors.
func (d *Domain) register(b []byte, access rdma.Access, verb string) (rdma.MR, error) {
	if !access.Valid() {
		return nil, fmt.Errorf("%s: %s %d bytes: access %v: %w", d.cfg.Name, verb, len(b), access, rdma.ErrInvalid)
	}
	d.cfg.Mu.Lock()
	defer d.cfg.Mu.Unlock()
	if err := d.cfg.Dead(); err != nil {
		return nil, fmt.Errorf("%s: %s %d bytes: %w", d.cfg.Name, verb, len(b), err)
	}
	m, r := d.cfg.NewMR(b)
	if _, err := d.cfg.Table.Add(r, access); err != nil {
		return nil, fmt.Errorf("%s: %s %d bytes: %w", d.cfg.Name, verb, len(b), err)
	}
	d.regions[r] = struct{}{}
	return m, nil
}

// Invalidate makes r invalid (local invalidation).
func (d *Domain) Invalidate(r *Region) {
	d.cfg.Mu.Lock()
	defer d.cfg.Mu.Unlock()
	r.SetValid(false)
}

// Reregister gives r a new key and access, valid again, and returns its
// STag; a released region stays released.
func (d *Domain) Reregister(r *Region, access rdma.Access) (rdma.STag, error) {
	if !access.Valid() {
		return 0, fmt.Errorf("%s: reregister stag %v: access %v: %w", d.cfg.Name, r.STag(), access, rdma.ErrInvalid)
	}
	d.cfg.Mu.Lock()
	defer d.cfg.Mu.Unlock()
	if s := r.Load(); s.Released() {
		return 0, fmt.Errorf("%s: reregister stag %v: region released: %w", d.cfg.Name, s.STag(), rdma.ErrInvalid)
	}
	stag := d.cfg.Table.Rekey(r)
	r.Set(stag, access, true, false)
	return stag, nil
}

// Release deregisters r, if it is not already.
func (d *Domain) Release(r *Region) {
	d.cfg.Mu.Lock()
	defer d.cfg.Mu.Unlock()
	d.releaseLocked(r)
}

// ReleaseAllLocked deregisters every region the owner holds; the caller
// holds the owner's lock.
func (d *Domain) ReleaseAllLocked() {
	for r := range d.regions {
		d.releaseLocked(r)
	}
}

func (d *Domain) releaseLocked(r *Region) {
	if d.cfg.Table.Remove(r) {
		delete(d.regions, r)
	}
}
