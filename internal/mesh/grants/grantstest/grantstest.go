// Package grantstest runs what a test of the mesh on its own credentials
// needs: the built nats-server in operator mode with a full resolver, and a
// connection as any part on the user grants gives it.
package grantstest

import (
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"

	"github.com/JorisJonkers-dev/delivery/internal/mesh/grants"
	"github.com/JorisJonkers-dev/delivery/internal/testenv"
)

// Server is an operator-mode server and the keys it trusts.
type Server struct {
	URL  string
	Auth grants.Authority
}

// Start starts the built nats-server in operator mode with a full
// resolver, trusting a new operator, the mesh account and the system
// account, and removes it when the test ends.
func Start(t testing.TB) Server {
	t.Helper()
	keys := make([]nkeys.KeyPair, 3)
	for i, create := range []func() (nkeys.KeyPair, error){nkeys.CreateOperator, nkeys.CreateAccount, nkeys.CreateAccount} {
		kp, err := create()
		if err != nil {
			t.Fatal(err)
		}
		keys[i] = kp
	}
	auth := grants.Authority{Operator: keys[0], Account: keys[1], System: keys[2]}
	trust := testenv.NATSTrust{}
	var err error
	if trust.OperatorJWT, err = auth.OperatorJWT(); err != nil {
		t.Fatal(err)
	}
	trust.SystemAccount, _ = auth.System.PublicKey()
	sysJWT, err := auth.SystemJWT()
	if err != nil {
		t.Fatal(err)
	}
	accJWT, err := auth.AccountJWT(nil, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	trust.Accounts = []string{sysJWT, accJWT}
	return Server{URL: testenv.NewOperatorNATS(t, trust).URL, Auth: auth}
}

// Connect dials as part on node (the operator's own user for part ""),
// with a new user key and the permissions grants.For gives, on the part's
// own inbox.
func (s Server) Connect(part grants.Part, node string) (*nats.Conn, error) {
	kp, err := nkeys.CreateUser()
	if err != nil {
		return nil, err
	}
	pub, _ := kp.PublicKey()
	seed, _ := kp.Seed()
	var token string
	opts := []nats.Option{nats.MaxReconnects(-1), nats.ReconnectWait(100 * time.Millisecond)}
	if part == "" {
		token, err = s.Auth.OperatorUserJWT(pub)
	} else {
		var perms grants.Permissions
		if perms, err = grants.For(part, node); err != nil {
			return nil, err
		}
		name, _ := grants.UserName(part, node)
		token, err = s.Auth.UserJWT(name, pub, perms)
		inbox, _ := grants.InboxPrefix(part, node)
		opts = append(opts, nats.CustomInboxPrefix(inbox))
	}
	if err != nil {
		return nil, err
	}
	return nats.Connect(s.URL, append(opts, nats.UserJWTAndSeed(token, string(seed)))...)
}
