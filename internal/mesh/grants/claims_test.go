package grants

import (
	"testing"
	"time"

	"github.com/nats-io/nkeys"
)

// TestCredsRoundTrip: a user's credentials read back as the permissions it
// was made with, so Plan finds nothing to change.
func TestCredsRoundTrip(t *testing.T) {
	op, _ := nkeys.CreateOperator()
	acc, _ := nkeys.CreateAccount()
	auth := Authority{Operator: op, Account: acc}
	for _, p := range []Part{Agent, BackupWorker, Assigner} {
		kp, _ := nkeys.CreateUser()
		pub, _ := kp.PublicKey()
		seed, _ := kp.Seed()
		perms, err := For(p, "n1")
		if err != nil {
			t.Fatal(err)
		}
		name, _ := UserName(p, "n1")
		token, err := auth.UserJWT(name, pub, perms)
		if err != nil {
			t.Fatal(err)
		}
		creds, err := Creds(token, seed)
		if err != nil {
			t.Fatal(err)
		}
		gotName, gotUser, got, err := FromCreds(creds)
		if err != nil {
			t.Fatal(err)
		}
		if gotName != name || gotUser != pub || !same(got, perms) {
			t.Errorf("%s read back as %s %s %+v", p, gotName, gotUser, got)
		}
	}
	if _, err := auth.AccountJWT([]string{"not a key"}, time.Now()); err == nil {
		t.Error("revoking a string that is no user's key was taken")
	}
	kp, _ := nkeys.CreateUser()
	pub, _ := kp.PublicKey()
	if _, err := auth.UserJWT("x", pub, Permissions{}); err == nil {
		t.Error("a user with no permissions, which the server reads as all, was made")
	}
}

func FuzzFromCreds(f *testing.F) {
	f.Add([]byte("-----BEGIN NATS USER JWT-----\neyJ0eXAiOiJKV1QifQ.e30.x\n------END NATS USER JWT------\n"))
	f.Add([]byte("garbage"))
	f.Fuzz(func(t *testing.T, creds []byte) {
		_, _, _, _ = FromCreds(creds)
	})
}
