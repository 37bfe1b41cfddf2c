package grants

import (
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nkeys"
)

// Authority is the keys the bus's trust is made of: the operator signs the
// accounts, the account signs each part's user, and the system account is
// the server's own, through which a changed account is pushed to it.
type Authority struct {
	Operator, Account, System nkeys.KeyPair
}

// AccountName is the one account the mesh's parts share: its buckets are
// one JetStream, and the users' permissions, not accounts, keep parts apart.
const AccountName = "mesh"

func (a Authority) public(kp nkeys.KeyPair, what string) (string, error) {
	if kp == nil {
		return "", fmt.Errorf("no %s key", what)
	}
	pub, err := kp.PublicKey()
	if err != nil {
		return "", fmt.Errorf("the %s key: %w", what, err)
	}
	return pub, nil
}

// OperatorJWT is the operator's claims, naming the system account; the
// server is configured to trust it.
func (a Authority) OperatorJWT() (string, error) {
	op, err := a.public(a.Operator, "operator")
	if err != nil {
		return "", err
	}
	sys, err := a.public(a.System, "system account")
	if err != nil {
		return "", err
	}
	claims := jwt.NewOperatorClaims(op)
	claims.Name = "mesh"
	claims.SystemAccount = sys
	return claims.Encode(a.Operator)
}

// SystemJWT is the system account's claims, signed by the operator.
func (a Authority) SystemJWT() (string, error) {
	sys, err := a.public(a.System, "system account")
	if err != nil {
		return "", err
	}
	claims := jwt.NewAccountClaims(sys)
	claims.Name = "SYS"
	return claims.Encode(a.Operator)
}

// AccountJWT is the mesh account's claims: JetStream without limits, and
// every user key in revoked refused from at on, so a node taken out of the
// fleet is refused the moment the server has the account.
func (a Authority) AccountJWT(revoked []string, at time.Time) (string, error) {
	acc, err := a.public(a.Account, "account")
	if err != nil {
		return "", err
	}
	claims := jwt.NewAccountClaims(acc)
	claims.Name = AccountName
	claims.Limits.JetStreamLimits = jwt.JetStreamLimits{MemoryStorage: -1, DiskStorage: -1, Streams: -1, Consumer: -1}
	for _, user := range revoked {
		if !nkeys.IsValidPublicUserKey(user) {
			return "", fmt.Errorf("revoke %q: not a user's public key", user)
		}
		claims.RevokeAt(user, at)
	}
	return claims.Encode(a.Operator)
}

// UserJWT is a part's user, named name, with user as its public key and
// perms as all it may do; signed by the account.
func (a Authority) UserJWT(name, user string, perms Permissions) (string, error) {
	if !nkeys.IsValidPublicUserKey(user) {
		return "", fmt.Errorf("user %s: %q is not a user's public key", name, user)
	}
	if len(perms.Pub) == 0 && len(perms.Sub) == 0 {
		// A user with no permissions listed may do anything: fail closed.
		return "", errors.New("user " + name + ": no permissions, which the server reads as all")
	}
	claims := jwt.NewUserClaims(user)
	claims.Name = name
	claims.Pub.Allow.Add(perms.Pub...)
	claims.Sub.Allow.Add(perms.Sub...)
	if len(perms.Pub) == 0 {
		claims.Pub.Deny.Add(">")
	}
	if perms.Respond {
		claims.Resp = &jwt.ResponsePermission{MaxMsgs: 1, Expires: time.Hour}
	}
	return claims.Encode(a.Account)
}

// OperatorUserJWT is the operator's own user in the mesh account: a put, a
// hand want, compose and grants use it, and it may do anything there.
func (a Authority) OperatorUserJWT(user string) (string, error) {
	if !nkeys.IsValidPublicUserKey(user) {
		return "", fmt.Errorf("the operator's user: %q is not a user's public key", user)
	}
	claims := jwt.NewUserClaims(user)
	claims.Name = "operator"
	return claims.Encode(a.Account)
}

// SystemUserJWT is a user of the system account, which pushes a changed
// account to the server's resolver.
func (a Authority) SystemUserJWT(user string) (string, error) {
	if !nkeys.IsValidPublicUserKey(user) {
		return "", fmt.Errorf("the system user: %q is not a user's public key", user)
	}
	claims := jwt.NewUserClaims(user)
	claims.Name = "system"
	return claims.Encode(a.System)
}

// Creds is the credentials file of a user: its JWT and its nkey seed, as
// NATS_CREDS reads it.
func Creds(userJWT string, seed []byte) ([]byte, error) {
	return jwt.FormatUserConfig(userJWT, seed)
}

// FromCreds reads back a credentials file's user: its name, public key and
// permissions, as Plan compares them with the ones wanted. A file that is
// not a user's credentials is refused.
func FromCreds(creds []byte) (name, user string, perms Permissions, err error) {
	token, err := jwt.ParseDecoratedJWT(creds)
	if err != nil {
		return "", "", Permissions{}, fmt.Errorf("not a credentials file: %w", err)
	}
	claims, err := jwt.DecodeUserClaims(token)
	if err != nil {
		return "", "", Permissions{}, fmt.Errorf("not a user's JWT: %w", err)
	}
	perms = Permissions{Pub: claims.Pub.Allow, Sub: claims.Sub.Allow, Respond: claims.Resp != nil}
	return claims.Name, claims.Subject, perms, nil
}
