package testenv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	vaultapi "github.com/hashicorp/vault/api"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// VaultVersion is the Vault scripts/test-binaries.sh builds.
const VaultVersion = "v1.21.0"

// VaultBuildCommand builds the Vault binary; every failure to find it names it.
const VaultBuildCommand = "scripts/test-binaries.sh vault (make test runs it)"

// VaultBinary is the cached Vault server: VAULT_BINARY when set, else the file
// scripts/test-binaries.sh writes.
func VaultBinary() (string, error) {
	return cachedBinary("VAULT_BINARY", "vault-"+VaultVersion, "vault", "Vault", VaultBuildCommand)
}

// Vault is a running Vault dev server on 127.0.0.1: in memory, unsealed, with
// kv v2 at secret/ and a known root token.
type Vault struct {
	// Addr is the server's address, http://127.0.0.1:<port>.
	Addr string
	// RootToken is the dev server's root token.
	RootToken string
	// Client acts as root; tests arrange Vault through it.
	Client *vaultapi.Client

	proc *process
	log  *LogBuffer
	stop sync.Once
}

// StartVault starts a Vault dev server; Stop ends it.
func StartVault(ctx context.Context) (*Vault, error) {
	bin, err := VaultBinary()
	if err != nil {
		return nil, err
	}
	return onFreePort(func() (*Vault, error) { return startVault(ctx, bin) })
}

func startVault(ctx context.Context, bin string) (*Vault, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	token := "root-" + randomHex(8)
	home, err := os.MkdirTemp("", "vault-home-")
	if err != nil {
		return nil, err
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	// Not tied to ctx: ctx bounds the start, the server lives until Stop.
	cmd := exec.Command(bin, "server", "-dev",
		"-dev-listen-address="+addr, "-dev-root-token-id="+token, "-dev-no-store-token")
	// A private HOME keeps the dev server from reading or writing a token
	// helper of whoever runs the tests.
	cmd.Env = []string{"HOME=" + home, "PATH=" + os.Getenv("PATH"), "VAULT_LOG_LEVEL=warn"}
	log := &LogBuffer{}
	cmd.Stdout, cmd.Stderr = log, log
	proc, err := startProcess(cmd)
	if err != nil {
		_ = os.RemoveAll(home)
		return nil, err
	}
	v := &Vault{Addr: "http://" + addr, RootToken: token, proc: proc, log: log}
	go func() {
		<-proc.exited()
		_ = os.RemoveAll(home)
	}()

	cfg := vaultapi.DefaultConfig()
	cfg.Address = v.Addr
	cfg.MaxRetries = 0
	if v.Client, err = vaultapi.NewClient(cfg); err != nil {
		_ = v.Stop()
		return nil, err
	}
	v.Client.SetToken(token)
	if err := v.waitReady(ctx); err != nil {
		_ = v.Stop()
		return nil, err
	}
	return v, nil
}

func (v *Vault) waitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		health, err := v.Client.Sys().HealthWithContext(ctx)
		if err == nil && health.Initialized && !health.Sealed {
			return nil
		}
		select {
		case <-v.proc.exited():
			return fmt.Errorf("vault server exited at start: %s", v.log.String())
		case <-ctx.Done():
			return fmt.Errorf("vault server at %s not ready (last health check: %w): %s", v.Addr, errors.Join(err), v.log.String())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Stop ends the server; its state, kept in memory, is gone.
func (v *Vault) Stop() error {
	v.stop.Do(func() {
		v.proc.terminate()
	})
	return nil
}

// NewVault starts a Vault dev server for this test and stops it when the test
// ends. A test that cannot have one fails, naming the command that builds it.
func NewVault(t testing.TB) *Vault {
	t.Helper()
	v := forTest(t, time.Minute, "no Vault server for this test", StartVault)
	t.Cleanup(func() { _ = v.Stop() })
	return v
}

// Token reviewer Vault's Kubernetes auth uses to call TokenReview.
const (
	reviewerNamespace = "vault-auth"
	reviewerName      = "vault-token-reviewer"
)

// EnableKubernetesAuth mounts the Kubernetes auth method at mount and points
// it at cp, so that a ServiceAccount token cp issues logs in through a real
// TokenReview. Vault reviews with the token of a ServiceAccount bound to
// system:auth-delegator, never with a token of its own pod
// (disable_local_ca_jwt), as an out-of-cluster Vault does.
func (v *Vault) EnableKubernetesAuth(t testing.TB, cp *ControlPlane, mount string) {
	t.Helper()
	ctx := context.Background()
	reviewer := cp.ServiceAccountToken(t, reviewerNamespace, reviewerName)
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: reviewerName},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "system:auth-delegator"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: reviewerNamespace, Name: reviewerName}},
	}
	if _, err := cp.Kube.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("bind the token reviewer to system:auth-delegator: %v", err)
	}
	if err := v.Client.Sys().EnableAuthWithOptionsWithContext(ctx, mount, &vaultapi.EnableAuthOptions{Type: "kubernetes"}); err != nil {
		t.Fatalf("enable Kubernetes auth at %s: %v", mount, err)
	}
	if _, err := v.Client.Logical().WriteWithContext(ctx, "auth/"+mount+"/config", map[string]any{
		"kubernetes_host":      cp.Config.Host,
		"kubernetes_ca_cert":   string(cp.Config.CAData),
		"token_reviewer_jwt":   reviewer,
		"disable_local_ca_jwt": true,
	}); err != nil {
		t.Fatalf("configure Kubernetes auth at %s: %v", mount, err)
	}
}

// GrantKubernetesRole writes the ACL policy policyName with the text policy
// and a role of the auth method at mount, also named role, that lets the
// ServiceAccount namespace/serviceAccount log in with that policy: the login a
// job under test uses.
func (v *Vault) GrantKubernetesRole(t testing.TB, mount, role, namespace, serviceAccount, policyName, policy string) {
	t.Helper()
	ctx := context.Background()
	if err := v.Client.Sys().PutPolicyWithContext(ctx, policyName, policy); err != nil {
		t.Fatalf("write policy %s: %v", policyName, err)
	}
	if _, err := v.Client.Logical().WriteWithContext(ctx, "auth/"+mount+"/role/"+role, map[string]any{
		"bound_service_account_names":      []string{serviceAccount},
		"bound_service_account_namespaces": []string{namespace},
		"token_policies":                   []string{policyName},
	}); err != nil {
		t.Fatalf("write role %s at %s: %v", role, mount, err)
	}
}

// JobLogin sets this Vault up as the platform does for a job that logs in
// with its ServiceAccount: Kubernetes auth at kubernetes/, reviewing tokens
// with cp, and a role named for the policy that gives it to
// namespace/serviceAccount. It returns the token file the job's pod mounts.
func (v *Vault) JobLogin(t testing.TB, cp *ControlPlane, namespace, serviceAccount, policyName, policy string) string {
	t.Helper()
	v.EnableKubernetesAuth(t, cp, "kubernetes")
	v.GrantKubernetesRole(t, "kubernetes", policyName, namespace, serviceAccount, policyName, policy)
	return cp.ServiceAccountTokenFile(t, namespace, serviceAccount)
}

// LoginClient returns a client for this Vault holding no token yet, as a job
// builds it.
func (v *Vault) LoginClient(t testing.TB) *vaultapi.Client {
	t.Helper()
	cfg := vaultapi.DefaultConfig()
	cfg.Address = v.Addr
	c, err := vaultapi.NewClient(cfg)
	if err != nil {
		t.Fatalf("vault client: %v", err)
	}
	c.ClearToken()
	return c
}

// ServiceAccountToken creates the namespace and ServiceAccount where absent
// and returns a fresh token for it from the TokenRequest API, the token a pod
// of that ServiceAccount would mount.
func (cp *ControlPlane) ServiceAccountToken(t testing.TB, namespace, name string) string {
	t.Helper()
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}
	if _, err := cp.Kube.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("create namespace %s: %v", namespace, err)
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace}}
	if _, err := cp.Kube.CoreV1().ServiceAccounts(namespace).Create(ctx, sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("create ServiceAccount %s/%s: %v", namespace, name, err)
	}
	expiry := int64(time.Hour / time.Second)
	req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &expiry}}
	got, err := cp.Kube.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, name, req, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("request a token for %s/%s: %v", namespace, name, err)
	}
	return got.Status.Token
}

// ServiceAccountTokenFile writes a fresh token for namespace/name to a file in
// the test's temporary folder, as the kubelet mounts it, and returns its path.
func (cp *ControlPlane) ServiceAccountTokenFile(t testing.TB, namespace, name string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(path, []byte(cp.ServiceAccountToken(t, namespace, name)), 0o600); err != nil {
		t.Fatalf("write the token file: %v", err)
	}
	return path
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
