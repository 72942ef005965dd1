package rpc

import (
	"encoding/binary"
	"errors"
	"log/slog"
	"strconv"

	"github.com/go-rpcrdma/rpcrdma/xdr"
)

// RPCVersion is the only ONC RPC protocol version (RFC 5531 section 9,
// rpcvers). A call carrying another version is answered with RPC_MISMATCH.
const RPCVersion = 2

// Decoding conditions of the message layer. The decoders record them through
// xdr.Decoder.Fail, so they arrive wrapped in an *xdr.DecodeError carrying the
// offset; test them with errors.Is.
var (
	// ErrRPCVersion: a call's rpcvers is not 2. CallHeader.Decode stops
	// after rpcvers, leaving XID and RPCVers set, because the rest of the
	// message may follow another grammar; a server answers RPC_MISMATCH.
	ErrRPCVersion = errors.New("rpcvers is not 2")
	// ErrMsgType: msg_type is not the one the decoder expects (CALL for
	// CallHeader, REPLY for ReplyHeader), or is neither.
	ErrMsgType = errors.New("unexpected msg_type")
	// ErrDiscriminant: a union discriminant without a default arm (reply_stat,
	// reject_stat) has a value the RFC does not define.
	ErrDiscriminant = errors.New("unknown union discriminant")
	// ErrFlavor: an opaque_auth has a flavor other than the one expected.
	ErrFlavor = errors.New("unexpected auth flavor")
)

// MsgType is msg_type (RFC 5531 section 9): whether a message is a call or a
// reply.
type MsgType int32

// The values of msg_type.
const (
	MsgCall  MsgType = 0 // CALL
	MsgReply MsgType = 1 // REPLY
)

func (t MsgType) String() string {
	switch t {
	case MsgCall:
		return "CALL"
	case MsgReply:
		return "REPLY"
	}
	return strconv.Itoa(int(t))
}

// ReplyStat is reply_stat (RFC 5531 section 9): whether the server accepted
// the call (authenticated it) or denied it.
type ReplyStat int32

// The values of reply_stat.
const (
	MsgAccepted ReplyStat = 0 // MSG_ACCEPTED
	MsgDenied   ReplyStat = 1 // MSG_DENIED
)

func (s ReplyStat) String() string {
	switch s {
	case MsgAccepted:
		return "MSG_ACCEPTED"
	case MsgDenied:
		return "MSG_DENIED"
	}
	return strconv.Itoa(int(s))
}

// AcceptStat is accept_stat (RFC 5531 section 9): the outcome of an accepted
// call.
type AcceptStat int32

// The values of accept_stat.
const (
	Success      AcceptStat = 0 // SUCCESS: the results follow
	ProgUnavail  AcceptStat = 1 // PROG_UNAVAIL: program not exported
	ProgMismatch AcceptStat = 2 // PROG_MISMATCH: version not supported; the range follows
	ProcUnavail  AcceptStat = 3 // PROC_UNAVAIL: procedure not supported
	GarbageArgs  AcceptStat = 4 // GARBAGE_ARGS: arguments could not be decoded
	SystemErr    AcceptStat = 5 // SYSTEM_ERR: e.g. memory allocation failure
)

var acceptStatNames = [...]string{
	Success:      "SUCCESS",
	ProgUnavail:  "PROG_UNAVAIL",
	ProgMismatch: "PROG_MISMATCH",
	ProcUnavail:  "PROC_UNAVAIL",
	GarbageArgs:  "GARBAGE_ARGS",
	SystemErr:    "SYSTEM_ERR",
}

func (s AcceptStat) String() string {
	if s >= 0 && int(s) < len(acceptStatNames) {
		return acceptStatNames[s]
	}
	return strconv.Itoa(int(s))
}

// RejectStat is reject_stat (RFC 5531 section 9): why a call was denied.
type RejectStat int32

// The values of reject_stat.
const (
	RPCMismatch RejectStat = 0 // RPC_MISMATCH: rpcvers not 2; the range follows
	AuthError   RejectStat = 1 // AUTH_ERROR: authentication failed; an auth_stat follows
)

func (s RejectStat) String() string {
	switch s {
	case RPCMismatch:
		return "RPC_MISMATCH"
	case AuthError:
		return "AUTH_ERROR"
	}
	return strconv.Itoa(int(s))
}

// AuthStat is auth_stat (RFC 5531 section 9): why authentication failed.
//
// AuthStat implements error so that an authenticator or a handler can deny a
// call by returning one (return rpc.Body{}, rpc.AuthTooWeak); the server then
// answers MSG_DENIED AUTH_ERROR with that status. On the client, a
// *RejectError matches the AuthStat it carries under errors.Is.
type AuthStat int32

// The values of auth_stat.
const (
	AuthOK               AuthStat = 0  // AUTH_OK: success
	AuthBadCred          AuthStat = 1  // AUTH_BADCRED: bad credential (seal broken)
	AuthRejectedCred     AuthStat = 2  // AUTH_REJECTEDCRED: client must begin new session
	AuthBadVerf          AuthStat = 3  // AUTH_BADVERF: bad verifier (seal broken)
	AuthRejectedVerf     AuthStat = 4  // AUTH_REJECTEDVERF: verifier expired or replayed
	AuthTooWeak          AuthStat = 5  // AUTH_TOOWEAK: rejected for security reasons
	AuthInvalidResp      AuthStat = 6  // AUTH_INVALIDRESP: bogus response verifier
	AuthFailed           AuthStat = 7  // AUTH_FAILED: reason unknown
	AuthKerbGeneric      AuthStat = 8  // AUTH_KERB_GENERIC: kerberos generic error
	AuthTimeExpire       AuthStat = 9  // AUTH_TIMEEXPIRE: time of credential expired
	AuthTktFile          AuthStat = 10 // AUTH_TKT_FILE: problem with ticket file
	AuthDecode           AuthStat = 11 // AUTH_DECODE: can't decode authenticator
	AuthNetAddr          AuthStat = 12 // AUTH_NET_ADDR: wrong net address in ticket
	RPCSECGSSCredProblem AuthStat = 13 // RPCSEC_GSS_CREDPROBLEM: no credentials for user
	RPCSECGSSCtxProblem  AuthStat = 14 // RPCSEC_GSS_CTXPROBLEM: problem with context
)

var authStatNames = [...]string{
	AuthOK:               "AUTH_OK",
	AuthBadCred:          "AUTH_BADCRED",
	AuthRejectedCred:     "AUTH_REJECTEDCRED",
	AuthBadVerf:          "AUTH_BADVERF",
	AuthRejectedVerf:     "AUTH_REJECTEDVERF",
	AuthTooWeak:          "AUTH_TOOWEAK",
	AuthInvalidResp:      "AUTH_INVALIDRESP",
	AuthFailed:           "AUTH_FAILED",
	AuthKerbGeneric:      "AUTH_KERB_GENERIC",
	AuthTimeExpire:       "AUTH_TIMEEXPIRE",
	AuthTktFile:          "AUTH_TKT_FILE",
	AuthDecode:           "AUTH_DECODE",
	AuthNetAddr:          "AUTH_NET_ADDR",
	RPCSECGSSCredProblem: "RPCSEC_GSS_CREDPROBLEM",
	RPCSECGSSCtxProblem:  "RPCSEC_GSS_CTXPROBLEM",
}

func (s AuthStat) String() string {
	if s >= 0 && int(s) < len(authStatNames) {
		return authStatNames[s]
	}
	return strconv.Itoa(int(s))
}

// Error makes an AuthStat usable as the error that denies a call.
func (s AuthStat) Error() string { return "rpc: authentication failed: " + s.String() }

// CallHeader is the call header of an ONC RPC message (RFC 5531 section 9):
// the xid, msg_type CALL and call_body up to and including the verifier.
// The procedure's arguments follow it in the message.
//
//	xid, CALL, rpcvers, prog, vers, proc, cred (opaque_auth), verf (opaque_auth)
type CallHeader struct {
	XID     uint32
	RPCVers uint32 // 2 (RPCVersion) except in calls a server must refuse
	Prog    uint32
	Vers    uint32
	Proc    uint32
	Cred    OpaqueAuth
	Verf    OpaqueAuth
}

// callFixedLen is the size of a call header before the credential.
const callFixedLen = 6 * 4

// EncodedLen returns the number of bytes Append adds.
func (h *CallHeader) EncodedLen() int {
	return callFixedLen + h.Cred.EncodedLen() + h.Verf.EncodedLen()
}

// Append appends the encoded header to b and returns the extended slice. It
// encodes the fields as they are; the credential and verifier bodies must not
// exceed MaxAuthBytes (Client.Call checks this before encoding).
func (h *CallHeader) Append(b []byte) []byte {
	b = xdr.AppendUint32(b, h.XID)
	b = xdr.AppendEnum(b, int32(MsgCall))
	b = xdr.AppendUint32(b, h.RPCVers)
	b = xdr.AppendUint32(b, h.Prog)
	b = xdr.AppendUint32(b, h.Vers)
	b = xdr.AppendUint32(b, h.Proc)
	b = h.Cred.Append(b)
	return h.Verf.Append(b)
}

// Decode decodes a call header from d, which must be positioned at the xid,
// and returns d's sticky error. On success d is positioned at the arguments.
// Cred.Body and Verf.Body alias d's buffer.
//
// A message that is not a CALL fails with ErrMsgType. A call whose rpcvers is
// not 2 fails with ErrRPCVersion after setting XID and RPCVers, which is all a
// server needs to answer RPC_MISMATCH. A credential or verifier body over
// MaxAuthBytes fails with xdr.ErrTooLong.
func (h *CallHeader) Decode(d *xdr.Decoder) error {
	if !h.decodeFixed(d) {
		return d.Err()
	}
	h.Cred.Decode(d)
	h.Verf.Decode(d)
	return d.Err()
}

// decodeFixed decodes the header up to proc and reports success; a server
// uses it apart from the credential and verifier to tell a malformed
// credential (AUTH_BADCRED) from a malformed message.
func (h *CallHeader) decodeFixed(d *xdr.Decoder) bool {
	h.XID = d.Uint32()
	if MsgType(d.Enum()) != MsgCall {
		d.Fail(ErrMsgType)
		return false
	}
	h.RPCVers = d.Uint32()
	if d.Err() == nil && h.RPCVers != RPCVersion {
		d.Fail(ErrRPCVersion)
	}
	h.Prog = d.Uint32()
	h.Vers = d.Uint32()
	h.Proc = d.Uint32()
	return d.Err() == nil
}

// ID returns the identity of the call for errors and logs.
func (h *CallHeader) ID() CallID {
	return CallID{XID: h.XID, Prog: h.Prog, Vers: h.Vers, Proc: h.Proc}
}

// String returns a compact one-line form, e.g.
// "call xid=0x1a2b prog=100003 vers=3 proc=6 cred=AUTH_SYS verf=AUTH_NONE".
func (h *CallHeader) String() string {
	b := make([]byte, 0, 96)
	b = append(b, "call xid=0x"...)
	b = strconv.AppendUint(b, uint64(h.XID), 16)
	if h.RPCVers != RPCVersion {
		b = append(b, " rpcvers="...)
		b = strconv.AppendUint(b, uint64(h.RPCVers), 10)
	}
	b = append(b, " prog="...)
	b = AppendProg(b, h.Prog)
	b = append(b, " vers="...)
	b = strconv.AppendUint(b, uint64(h.Vers), 10)
	b = append(b, " proc="...)
	b = strconv.AppendUint(b, uint64(h.Proc), 10)
	b = append(b, " cred="...)
	b = append(b, h.Cred.Flavor.String()...)
	b = append(b, " verf="...)
	b = append(b, h.Verf.Flavor.String()...)
	return string(b)
}

// LogValue returns the header as a group of attributes for log/slog.
func (h *CallHeader) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("xid", "0x"+strconv.FormatUint(uint64(h.XID), 16)),
		slog.Uint64("prog", uint64(h.Prog)),
		slog.Uint64("vers", uint64(h.Vers)),
		slog.Uint64("proc", uint64(h.Proc)),
		slog.String("cred", h.Cred.Flavor.String()),
		slog.String("verf", h.Verf.Flavor.String()),
	)
}

// ReplyHeader is the reply header of an ONC RPC message (RFC 5531 section 9):
// the xid, msg_type REPLY and reply_body up to the procedure's results, which
// follow it in the message when AcceptStat is Success.
//
//	xid, REPLY, MSG_ACCEPTED, verf (opaque_auth), accept_stat [, low, high if PROG_MISMATCH]
//	xid, REPLY, MSG_DENIED, RPC_MISMATCH, low, high
//	xid, REPLY, MSG_DENIED, AUTH_ERROR, auth_stat
//
// The fields are a flattened union: Stat selects which of the others are
// encoded, and those not selected are ignored by Append and left zero by
// Decode.
type ReplyHeader struct {
	XID  uint32
	Stat ReplyStat

	// MSG_ACCEPTED:
	Verf       OpaqueAuth
	AcceptStat AcceptStat

	// MSG_DENIED:
	RejectStat RejectStat
	AuthStat   AuthStat // AUTH_ERROR only

	// The supported version range: of the program for PROG_MISMATCH, of
	// the RPC protocol for RPC_MISMATCH.
	Low, High uint32
}

// hasRange reports whether the union arm selected by h carries Low and High.
func (h *ReplyHeader) hasRange() bool {
	if h.Stat == MsgAccepted {
		return h.AcceptStat == ProgMismatch
	}
	return h.RejectStat == RPCMismatch
}

// EncodedLen returns the number of bytes Append adds.
func (h *ReplyHeader) EncodedLen() int {
	n := 3 * 4 // xid, msg_type, reply_stat
	if h.Stat == MsgAccepted {
		n += h.Verf.EncodedLen() + 4
	} else {
		n += 4 + 4 // reject_stat, then auth_stat or low
	}
	if h.hasRange() {
		n += 4
		if h.Stat == MsgAccepted {
			n += 4
		}
	}
	return n
}

// Append appends the encoded header to b and returns the extended slice.
// Stat values other than MSG_ACCEPTED encode as MSG_DENIED, and RejectStat
// values other than RPC_MISMATCH as AUTH_ERROR, since those unions have no
// default arm; an unknown AcceptStat is encoded as is (void arm).
func (h *ReplyHeader) Append(b []byte) []byte {
	b = xdr.AppendUint32(b, h.XID)
	b = xdr.AppendEnum(b, int32(MsgReply))
	if h.Stat == MsgAccepted {
		b = xdr.AppendEnum(b, int32(MsgAccepted))
		b = h.Verf.Append(b)
		b = xdr.AppendEnum(b, int32(h.AcceptStat))
		if h.AcceptStat == ProgMismatch {
			b = xdr.AppendUint32(b, h.Low)
			b = xdr.AppendUint32(b, h.High)
		}
		return b
	}
	b = xdr.AppendEnum(b, int32(MsgDenied))
	if h.RejectStat == RPCMismatch {
		b = xdr.AppendEnum(b, int32(RPCMismatch))
		b = xdr.AppendUint32(b, h.Low)
		return xdr.AppendUint32(b, h.High)
	}
	b = xdr.AppendEnum(b, int32(AuthError))
	return xdr.AppendEnum(b, int32(h.AuthStat))
}

// Decode decodes a reply header from d, which must be positioned at the xid,
// and returns d's sticky error. On success d is positioned at the results.
// Verf.Body aliases d's buffer.
//
// A message that is not a REPLY fails with ErrMsgType; an undefined
// reply_stat or reject_stat fails with ErrDiscriminant. An undefined
// accept_stat is accepted (its arm is void), as RFC 5531 says.
func (h *ReplyHeader) Decode(d *xdr.Decoder) error {
	*h = ReplyHeader{XID: d.Uint32()}
	if MsgType(d.Enum()) != MsgReply {
		d.Fail(ErrMsgType)
		return d.Err()
	}
	h.Stat = ReplyStat(d.Enum())
	switch h.Stat {
	case MsgAccepted:
		h.Verf.Decode(d)
		h.AcceptStat = AcceptStat(d.Enum())
		if h.AcceptStat == ProgMismatch {
			h.Low = d.Uint32()
			h.High = d.Uint32()
		}
	case MsgDenied:
		h.RejectStat = RejectStat(d.Enum())
		switch h.RejectStat {
		case RPCMismatch:
			h.Low = d.Uint32()
			h.High = d.Uint32()
		case AuthError:
			h.AuthStat = AuthStat(d.Enum())
		default:
			d.Fail(ErrDiscriminant)
		}
	default:
		d.Fail(ErrDiscriminant)
	}
	return d.Err()
}

// String returns a compact one-line form, e.g.
// "reply xid=0x1a2b MSG_ACCEPTED PROG_MISMATCH 2..4 verf=AUTH_NONE".
func (h *ReplyHeader) String() string {
	b := make([]byte, 0, 80)
	b = append(b, "reply xid=0x"...)
	b = strconv.AppendUint(b, uint64(h.XID), 16)
	b = append(b, ' ')
	b = append(b, h.Stat.String()...)
	b = append(b, ' ')
	if h.Stat == MsgAccepted {
		b = append(b, h.AcceptStat.String()...)
	} else {
		b = append(b, h.RejectStat.String()...)
		if h.RejectStat != RPCMismatch {
			b = append(b, ' ')
			b = append(b, h.AuthStat.String()...)
		}
	}
	if h.hasRange() {
		b = append(b, ' ')
		b = strconv.AppendUint(b, uint64(h.Low), 10)
		b = append(b, ".."...)
		b = strconv.AppendUint(b, uint64(h.High), 10)
	}
	if h.Stat == MsgAccepted {
		b = append(b, " verf="...)
		b = append(b, h.Verf.Flavor.String()...)
	}
	return string(b)
}

// LogValue returns the header as a group of attributes for log/slog.
func (h *ReplyHeader) LogValue() slog.Value {
	attrs := make([]slog.Attr, 0, 6)
	attrs = append(attrs,
		slog.String("xid", "0x"+strconv.FormatUint(uint64(h.XID), 16)),
		slog.String("stat", h.Stat.String()))
	if h.Stat == MsgAccepted {
		attrs = append(attrs, slog.String("accept_stat", h.AcceptStat.String()))
	} else {
		attrs = append(attrs, slog.String("reject_stat", h.RejectStat.String()))
		if h.RejectStat != RPCMismatch {
			attrs = append(attrs, slog.String("auth_stat", h.AuthStat.String()))
		}
	}
	if h.hasRange() {
		attrs = append(attrs, slog.Uint64("low", uint64(h.Low)), slog.Uint64("high", uint64(h.High)))
	}
	return slog.GroupValue(attrs...)
}

// PeekHeader returns the xid and msg_type that start every RPC message, so
// that a receiver can route a message before decoding it. ok is false when
// msg is shorter than 8 bytes. The msg_type is returned as sent, which may
// be neither CALL nor REPLY.
func PeekHeader(msg []byte) (xid uint32, t MsgType, ok bool) {
	if len(msg) < 8 {
		return 0, 0, false
	}
	return binary.BigEndian.Uint32(msg), MsgType(binary.BigEndian.Uint32(msg[4:])), true
}

// AppendProg appends prog as program numbers are customarily written:
// in decimal in the range RFC 5531 section 8.2 leaves to IANA (below
// 0x20000000, NFS's 100003), in hexadecimal with 0x above it, where
// numbers are chosen by their users (0x20049001).
func AppendProg(b []byte, prog uint32) []byte {
	if prog < 0x20000000 {
		return strconv.AppendUint(b, uint64(prog), 10)
	}
	b = append(b, "0x"...)
	return strconv.AppendUint(b, uint64(prog), 16)
}

// CallID identifies a call in errors and logs.
type CallID struct {
	XID, Prog, Vers, Proc uint32
}

// String returns e.g. "call 0x1a2b prog 100003 vers 3 proc 6".
func (c CallID) String() string {
	b := make([]byte, 0, 64)
	b = append(b, "call 0x"...)
	b = strconv.AppendUint(b, uint64(c.XID), 16)
	b = append(b, " prog "...)
	b = AppendProg(b, c.Prog)
	b = append(b, " vers "...)
	b = strconv.AppendUint(b, uint64(c.Vers), 10)
	b = append(b, " proc "...)
	b = strconv.AppendUint(b, uint64(c.Proc), 10)
	return string(b)
}
