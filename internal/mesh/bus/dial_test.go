package bus_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nkeys"

	"github.com/JorisJonkers-dev/delivery/internal/mesh/bus"
	"github.com/JorisJonkers-dev/delivery/internal/testenv"
)

// serve starts an embedded server with opts on a free loopback port.
func serve(t *testing.T, opts *server.Options) string {
	t.Helper()
	opts.Host, opts.Port, opts.NoLog, opts.NoSigs = "127.0.0.1", server.RANDOM_PORT, true, true
	s, err := server.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	s.Start()
	if !s.ReadyForConnections(30 * time.Second) {
		s.Shutdown()
		t.Fatal("the server did not take connections within 30 s")
	}
	t.Cleanup(s.Shutdown)
	return s.ClientURL()
}

func file(t *testing.T, name string, content []byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, content, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestACredentialIsPresented: a server that knows one user's nkey lets in
// the client with its seed, and refuses one without it or with another's.
func TestACredentialIsPresented(t *testing.T) {
	user, _ := nkeys.CreateUser()
	public, _ := user.PublicKey()
	seed, _ := user.Seed()
	stranger, _ := nkeys.CreateUser()
	strangerSeed, _ := stranger.Seed()
	url := serve(t, &server.Options{Nkeys: []*server.NkeyUser{{Nkey: public}}})

	nc, err := bus.Connect(url, "test", bus.Credential{NkeyFile: file(t, "seed.nk", seed)})
	if err != nil {
		t.Fatalf("with the seed: %v", err)
	}
	nc.Close()
	for name, cred := range map[string]bus.Credential{
		"none":       {},
		"a stranger": {NkeyFile: file(t, "stranger.nk", strangerSeed)},
	} {
		if nc, err := bus.Connect(url, "test", cred); err == nil {
			nc.Close()
			t.Errorf("%s: let in", name)
		} else if !strings.Contains(strings.ToLower(err.Error()), "authorization") {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// TestACredentialsFileIsPresented: the built nats-server in operator mode
// lets in the user its account signed, from the file nsc writes, and no
// client without it.
func TestACredentialsFileIsPresented(t *testing.T) {
	operator, _ := nkeys.CreateOperator()
	operatorPublic, _ := operator.PublicKey()
	system, _ := nkeys.CreateAccount()
	systemPublic, _ := system.PublicKey()
	operatorClaims := jwt.NewOperatorClaims(operatorPublic)
	operatorClaims.SystemAccount = systemPublic
	operatorJWT, err := operatorClaims.Encode(operator)
	if err != nil {
		t.Fatal(err)
	}
	systemJWT, err := jwt.NewAccountClaims(systemPublic).Encode(operator)
	if err != nil {
		t.Fatal(err)
	}
	account, _ := nkeys.CreateAccount()
	accountPublic, _ := account.PublicKey()
	accountClaims := jwt.NewAccountClaims(accountPublic)
	accountClaims.Limits.JetStreamLimits = jwt.JetStreamLimits{MemoryStorage: -1, DiskStorage: -1, Streams: -1, Consumer: -1}
	accountJWT, err := accountClaims.Encode(operator)
	if err != nil {
		t.Fatal(err)
	}
	user, _ := nkeys.CreateUser()
	userPublic, _ := user.PublicKey()
	userJWT, err := jwt.NewUserClaims(userPublic).Encode(account)
	if err != nil {
		t.Fatal(err)
	}
	seed, _ := user.Seed()
	creds, err := jwt.FormatUserConfig(userJWT, seed)
	if err != nil {
		t.Fatal(err)
	}
	url := testenv.NewOperatorNATS(t, testenv.NATSTrust{OperatorJWT: operatorJWT, SystemAccount: systemPublic, Accounts: []string{systemJWT, accountJWT}}).URL

	nc, err := bus.Connect(url, "test", bus.Credential{CredsFile: file(t, "user.creds", creds)})
	if err != nil {
		t.Fatalf("with the credentials file: %v", err)
	}
	nc.Close()
	if nc, err := bus.Connect(url, "test", bus.Credential{}); err == nil {
		nc.Close()
		t.Error("let in without a credential")
	}
}

func TestACredentialIsOneOrTheOther(t *testing.T) {
	for name, c := range map[string]struct {
		cred bus.Credential
		want string
	}{
		"both":               {bus.Credential{CredsFile: "a.creds", NkeyFile: "a.nk"}, "both given"},
		"a seed not there":   {bus.Credential{NkeyFile: filepath.Join(t.TempDir(), "absent.nk")}, "nkey seed file"},
		"a seed that is not": {bus.Credential{NkeyFile: file(t, "bad.nk", []byte("not a seed"))}, "nkey seed file"},
	} {
		if _, err := bus.Connect("nats://127.0.0.1:1", "test", c.cred); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", name, err, c.want)
		}
		if _, _, err := bus.Dial("nats://127.0.0.1:1", "test", c.cred); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s, dialled: %v, want %q", name, err, c.want)
		}
	}
}
