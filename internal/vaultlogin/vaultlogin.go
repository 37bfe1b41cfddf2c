package vaultlogin

import (
	"context"
	"errors"
	"fmt"

	vaultapi "github.com/hashicorp/vault/api"
	kubernetesauth "github.com/hashicorp/vault/api/auth/kubernetes"

	"github.com/JorisJonkers-dev/delivery/internal/settings"
)

// DefaultTokenFile is the pod's own ServiceAccount token, as the kubelet mounts it.
const DefaultTokenFile = "/var/run/secrets/kubernetes.io/serviceaccount/token" //nolint:gosec // a path, not a credential

// Settings say where Vault is and as whom the job signs in.
type Settings struct {
	Addr      string // VAULT_ADDR, required
	Role      string // VAULT_ROLE
	AuthPath  string // VAULT_AUTH_PATH, default kubernetes
	TokenFile string // TOKEN_FILE, default DefaultTokenFile
}

// DefaultAuthPath is where the Kubernetes auth method is mounted unless
// VAULT_AUTH_PATH says otherwise.
const DefaultAuthPath = "kubernetes"

// Read reads the four variables; defaultRole is the job's own role name.
func Read(env *settings.Reader, defaultRole string) Settings {
	return Settings{
		Addr:      env.Required("VAULT_ADDR"),
		Role:      env.String("VAULT_ROLE", defaultRole),
		AuthPath:  env.String("VAULT_AUTH_PATH", DefaultAuthPath),
		TokenFile: env.String("TOKEN_FILE", DefaultTokenFile),
	}
}

// Variables are the variables Read reads, for a job's --help.
func Variables(defaultRole string) []settings.Variable {
	return []settings.Variable{
		{Name: "VAULT_ADDR", Default: settings.Required, Meaning: "Vault's address; Vault's client reads its other VAULT_* variables (TLS, retries) itself"},
		{Name: "VAULT_ROLE", Default: defaultRole, Meaning: "the Kubernetes-auth role it logs in as"},
		{Name: "VAULT_AUTH_PATH", Default: DefaultAuthPath, Meaning: "where that auth method is mounted"},
		{Name: "TOKEN_FILE", Default: DefaultTokenFile, Meaning: "the JWT it logs in with"},
	}
}

// NewClient builds Vault's client for s.Addr with no token: a token from the
// environment is never used, so the job acts only as the role it logs in as,
// and nor is an agent's address, so it speaks to s.Addr alone.
// Vault's client reads its other VAULT_* variables (TLS, retries) itself, and
// a malformed one is an error here.
func NewClient(s Settings) (*vaultapi.Client, error) {
	cfg := vaultapi.DefaultConfig()
	if cfg.Error != nil {
		return nil, fmt.Errorf("the VAULT_* variables Vault's client reads: %w", cfg.Error)
	}
	cfg.Address = s.Addr
	// Vault's client would send everything to VAULT_AGENT_ADDR instead,
	// the login's ServiceAccount token included, while errors name VAULT_ADDR.
	cfg.AgentAddress = ""
	client, err := vaultapi.NewClient(cfg)
	if err != nil {
		return nil, fmt.Errorf("vault client for %s: %w", s.Addr, err)
	}
	client.ClearToken()
	return client, nil
}

// Login signs client in through the Kubernetes auth method at s.AuthPath as
// s.Role with the token in s.TokenFile; the client then carries the token
// Vault issued, and nothing else sees it.
func Login(ctx context.Context, client *vaultapi.Client, s Settings) error {
	auth, err := kubernetesauth.NewKubernetesAuth(s.Role,
		kubernetesauth.WithMountPath(s.AuthPath), kubernetesauth.WithServiceAccountTokenPath(s.TokenFile))
	if err != nil {
		return fmt.Errorf("vault login as %s: %w", s.Role, err)
	}
	secret, err := client.Auth().Login(ctx, auth)
	if err != nil {
		return fmt.Errorf("vault login as %s at auth/%s: %w", s.Role, s.AuthPath, err)
	}
	if secret == nil || secret.Auth == nil || secret.Auth.ClientToken == "" {
		return errors.New("vault login as " + s.Role + ": Vault issued no token")
	}
	return nil
}
