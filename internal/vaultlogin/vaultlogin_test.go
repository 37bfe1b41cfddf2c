package vaultlogin_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/JorisJonkers-dev/delivery/internal/settings"
	"github.com/JorisJonkers-dev/delivery/internal/vaultlogin"
)

func TestReadDefaults(t *testing.T) {
	env := settings.New(func(k string) string {
		return map[string]string{"VAULT_ADDR": "http://vault.secrets-system.svc.cluster.local:8200"}[k]
	})
	got := vaultlogin.Read(env, "policy-admin")
	want := vaultlogin.Settings{Addr: "http://vault.secrets-system.svc.cluster.local:8200", Role: "policy-admin",
		AuthPath: "kubernetes", TokenFile: vaultlogin.DefaultTokenFile}
	if got != want || env.Err() != nil {
		t.Fatalf("Read = %+v, %v; want %+v", got, env.Err(), want)
	}
}

func TestReadRequiresTheAddress(t *testing.T) {
	env := settings.New(func(string) string { return "" })
	vaultlogin.Read(env, "garage-catalog")
	if env.Err() == nil || !strings.HasPrefix(env.Err().Error(), "VAULT_ADDR") {
		t.Fatalf("Err = %v, want VAULT_ADDR named", env.Err())
	}
}

// A token in the environment never reaches the client: the job acts only as
// the role it signs in as.
func TestNewClientIgnoresAnEnvironmentToken(t *testing.T) {
	t.Setenv("VAULT_TOKEN", "s.root-from-the-environment")
	client, err := vaultlogin.NewClient(vaultlogin.Settings{Addr: "http://127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	if client.Token() != "" {
		t.Fatal("the client carries the environment's token")
	}
	if client.Address() != "http://127.0.0.1:1" {
		t.Fatalf("address = %s", client.Address())
	}
}

// An agent's address in the environment never takes the place of VAULT_ADDR.
func TestNewClientSpeaksToVaultAddrAlone(t *testing.T) {
	t.Setenv("VAULT_AGENT_ADDR", "http://127.0.0.1:2")
	client, err := vaultlogin.NewClient(vaultlogin.Settings{Addr: "http://127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	if client.Address() != "http://127.0.0.1:1" {
		t.Fatalf("address = %s, want VAULT_ADDR's", client.Address())
	}
}

func TestNewClientRefusesMalformedVaultVariables(t *testing.T) {
	t.Setenv("VAULT_SKIP_VERIFY", "perhaps")
	if _, err := vaultlogin.NewClient(vaultlogin.Settings{Addr: "http://127.0.0.1:1"}); err == nil || !strings.Contains(err.Error(), "VAULT_*") {
		t.Fatalf("NewClient = %v, want the VAULT_* variables named", err)
	}
}

func TestLoginFailsWithoutATokenFile(t *testing.T) {
	client, err := vaultlogin.NewClient(vaultlogin.Settings{Addr: "http://127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(t.TempDir(), "token")
	err = vaultlogin.Login(context.Background(), client, vaultlogin.Settings{Role: "policy-admin", AuthPath: "kubernetes", TokenFile: missing})
	if err == nil || !strings.Contains(err.Error(), "policy-admin") || !strings.Contains(err.Error(), missing) {
		t.Fatalf("Login = %v, want the role and the token file named", err)
	}
}
