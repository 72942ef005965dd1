package rpc

import (
	"errors"
	"log/slog"
	"strconv"

	"github.com/go-rpcrdma/rpcrdma/xdr"
)

// Limits of RFC 5531 on authentication data.
const (
	// MaxAuthBytes is the largest opaque_auth body (RFC 5531 section 8.2).
	MaxAuthBytes = 400
	// MaxMachineName is the largest AUTH_SYS machinename (RFC 5531
	// appendix A).
	MaxMachineName = 255
	// MaxAuthSysGIDs is the largest number of AUTH_SYS supplementary group
	// ids (RFC 5531 appendix A).
	MaxAuthSysGIDs = 16
)

// AuthFlavor is auth_flavor (RFC 5531 section 8.2): the kind of
// authentication a credential or verifier carries.
type AuthFlavor uint32

// Flavors with numbers assigned by RFC 5531 section 8.2.
const (
	AuthNone  AuthFlavor = 0 // AUTH_NONE
	AuthSys   AuthFlavor = 1 // AUTH_SYS (formerly AUTH_UNIX)
	AuthShort AuthFlavor = 2 // AUTH_SHORT
	AuthDH    AuthFlavor = 3 // AUTH_DH
	RPCSECGSS AuthFlavor = 6 // RPCSEC_GSS
)

func (f AuthFlavor) String() string {
	switch f {
	case AuthNone:
		return "AUTH_NONE"
	case AuthSys:
		return "AUTH_SYS"
	case AuthShort:
		return "AUTH_SHORT"
	case AuthDH:
		return "AUTH_DH"
	case RPCSECGSS:
		return "RPCSEC_GSS"
	}
	return strconv.FormatUint(uint64(f), 10)
}

// OpaqueAuth is opaque_auth (RFC 5531 section 8.2): a credential or
// verifier, a flavor and an opaque body of at most MaxAuthBytes.
//
//	flavor, body<400>
//
// The zero value is AUTH_NONE with an empty body, the null credential and
// verifier of RFC 5531 section 10.1.
type OpaqueAuth struct {
	Flavor AuthFlavor
	Body   []byte
}

// EncodedLen returns the number of bytes Append adds.
func (a *OpaqueAuth) EncodedLen() int { return 4 + xdr.OpaqueLen(len(a.Body)) }

// Append appends the encoded opaque_auth to b and returns the extended
// slice. A Body over MaxAuthBytes is encoded as is, and a peer will refuse
// it; callers that build credentials from outside data check the length.
func (a *OpaqueAuth) Append(b []byte) []byte {
	b = xdr.AppendUint32(b, uint32(a.Flavor))
	return xdr.AppendOpaque(b, a.Body)
}

// Decode decodes an opaque_auth from d and returns d's sticky error. Body
// aliases d's buffer. A body over MaxAuthBytes fails with xdr.ErrTooLong.
func (a *OpaqueAuth) Decode(d *xdr.Decoder) error {
	a.Flavor = AuthFlavor(d.Uint32())
	a.Body = d.Opaque(MaxAuthBytes)
	return d.Err()
}

// String returns the flavor and body length, e.g. "AUTH_SYS(32 bytes)".
func (a *OpaqueAuth) String() string {
	return a.Flavor.String() + "(" + strconv.Itoa(len(a.Body)) + " bytes)"
}

// LogValue returns the flavor and body length for log/slog.
func (a *OpaqueAuth) LogValue() slog.Value {
	return slog.GroupValue(slog.String("flavor", a.Flavor.String()), slog.Int("len", len(a.Body)))
}

// AuthSysParms is authsys_parms (RFC 5531 appendix A), the body of an
// AUTH_SYS credential.
//
//	stamp, machinename<255>, uid, gid, gids<16>
type AuthSysParms struct {
	Stamp       uint32
	MachineName string
	UID         uint32
	GID         uint32
	GIDs        []uint32
}

// EncodedLen returns the number of bytes Append adds.
func (p *AuthSysParms) EncodedLen() int {
	return 4 + xdr.OpaqueLen(len(p.MachineName)) + 4 + 4 + 4 + 4*len(p.GIDs)
}

// Append appends the encoded parameters to b and returns the extended slice.
// They are encoded as they are: a MachineName over MaxMachineName bytes or
// more than MaxAuthSysGIDs GIDs make a credential peers refuse (Cred checks).
func (p *AuthSysParms) Append(b []byte) []byte {
	b = xdr.AppendUint32(b, p.Stamp)
	b = xdr.AppendString(b, p.MachineName)
	b = xdr.AppendUint32(b, p.UID)
	b = xdr.AppendUint32(b, p.GID)
	b = xdr.AppendUint32(b, uint32(len(p.GIDs)))
	for _, g := range p.GIDs {
		b = xdr.AppendUint32(b, g)
	}
	return b
}

// Decode decodes authsys_parms from d and returns d's sticky error. A
// machinename over MaxMachineName bytes or more than MaxAuthSysGIDs gids
// fail with xdr.ErrTooLong. MachineName and GIDs are copies.
func (p *AuthSysParms) Decode(d *xdr.Decoder) error {
	p.Stamp = d.Uint32()
	p.MachineName = d.Str(MaxMachineName)
	p.UID = d.Uint32()
	p.GID = d.Uint32()
	n := d.Count(MaxAuthSysGIDs, 4)
	p.GIDs = nil
	if n > 0 {
		p.GIDs = make([]uint32, n)
		for i := range p.GIDs {
			p.GIDs[i] = d.Uint32()
		}
	}
	return d.Err()
}

// Cred returns p encoded as an AUTH_SYS credential, in a new buffer. It
// fails when MachineName or GIDs exceed the limits of appendix A, which no
// peer would accept; within them the body never exceeds MaxAuthBytes.
func (p *AuthSysParms) Cred() (OpaqueAuth, error) {
	if len(p.MachineName) > MaxMachineName {
		return OpaqueAuth{}, errors.New("rpc: AUTH_SYS machinename longer than 255 bytes")
	}
	if len(p.GIDs) > MaxAuthSysGIDs {
		return OpaqueAuth{}, errors.New("rpc: AUTH_SYS with more than 16 gids")
	}
	return OpaqueAuth{Flavor: AuthSys, Body: p.Append(make([]byte, 0, p.EncodedLen()))}, nil
}

// ParseAuthSys decodes the body of an AUTH_SYS credential; the result does
// not alias a.Body. It fails with an *xdr.DecodeError when the flavor is not
// AUTH_SYS (wrapping ErrFlavor), when the body is malformed or breaks the
// limits of appendix A (xdr.ErrTooLong), or when bytes remain after the
// parameters (xdr.ErrTrailing). A server answers all of these with
// AUTH_BADCRED.
func ParseAuthSys(a OpaqueAuth) (AuthSysParms, error) {
	var p AuthSysParms
	d := xdr.NewDecoder(a.Body)
	if a.Flavor != AuthSys {
		d.Fail(ErrFlavor)
		return p, d.Err()
	}
	p.Decode(&d)
	return p, d.Done()
}

// String returns a compact form, e.g. "host uid=1000 gid=100 gids=[100 1000]".
func (p *AuthSysParms) String() string {
	b := make([]byte, 0, 64)
	b = append(b, p.MachineName...)
	b = append(b, " uid="...)
	b = strconv.AppendUint(b, uint64(p.UID), 10)
	b = append(b, " gid="...)
	b = strconv.AppendUint(b, uint64(p.GID), 10)
	b = append(b, " gids=["...)
	for i, g := range p.GIDs {
		if i > 0 {
			b = append(b, ' ')
		}
		b = strconv.AppendUint(b, uint64(g), 10)
	}
	b = append(b, ']')
	return string(b)
}

// LogValue returns the parameters as a group of attributes for log/slog.
func (p *AuthSysParms) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("machinename", p.MachineName),
		slog.Uint64("uid", uint64(p.UID)),
		slog.Uint64("gid", uint64(p.GID)),
		slog.Int("ngids", len(p.GIDs)),
	)
}
