package testenv

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	flaggerv1 "github.com/fluxcd/flagger/pkg/apis/flagger/v1beta1"
	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// The versions scripts/test-binaries.sh builds; the cache folder is keyed by both.
const (
	EtcdVersion = "v3.6.8"
	KubeVersion = "v1.35.4"
)

// BuildCommand is what a developer runs to get the binaries; every failure to
// find them names it.
const BuildCommand = "scripts/test-binaries.sh envtest (make test runs it)"

// crdSources names each CRD file by the module version that publishes it.
// Flux's Kustomization CRD is read from the root module v1.9.0 because the
// proxy does not serve the v1.8.x root; its v1 schema matches the v1.8.0 API.
var crdSources = []struct{ module, file string }{
	{"github.com/fluxcd/flagger@v1.41.0", "artifacts/flagger/crd.yaml"},
	{"github.com/fluxcd/source-controller@v1.8.0", "config/crd/bases/source.toolkit.fluxcd.io_ocirepositories.yaml"},
	{"github.com/fluxcd/kustomize-controller@v1.9.0", "config/crd/bases/kustomize.toolkit.fluxcd.io_kustomizations.yaml"},
}

// Scheme knows the built-in kinds and the Flagger and Flux kinds the services read.
func Scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		clientgoscheme.AddToScheme, flaggerv1.AddToScheme, kustomizev1.AddToScheme, sourcev1.AddToScheme,
	} {
		if err := add(s); err != nil {
			panic(err) // the schemes are static; failing here is a programming error
		}
	}
	return s
}

// AssetsDir is the folder holding etcd and kube-apiserver: KUBEBUILDER_ASSETS
// when set, else the cache folder scripts/test-binaries.sh fills.
func AssetsDir() (string, error) {
	dir := os.Getenv("KUBEBUILDER_ASSETS")
	if dir == "" {
		cache, err := CacheDir()
		if err != nil {
			return "", err
		}
		dir = filepath.Join(cache, "envtest-etcd-"+EtcdVersion+"-kube-"+KubeVersion)
	}
	for _, bin := range []string{"etcd", "kube-apiserver"} {
		if _, err := os.Stat(filepath.Join(dir, bin)); err != nil {
			return "", fmt.Errorf("no %s in %s: build it with %s", bin, dir, BuildCommand)
		}
	}
	return dir, nil
}

// cachedBinary is a built test server: the file the variable env names when
// set, else name under folder in the cache. A missing one is an error naming
// the command that builds it.
func cachedBinary(env, folder, name, what, buildCommand string) (string, error) {
	bin := os.Getenv(env)
	if bin == "" {
		cache, err := CacheDir()
		if err != nil {
			return "", err
		}
		bin = filepath.Join(cache, folder, name)
	}
	if _, err := os.Stat(bin); err != nil {
		return "", fmt.Errorf("no %s at %s: build it with %s", what, bin, buildCommand)
	}
	return bin, nil
}

// CacheDir is where the built test servers are kept, shared with the script.
func CacheDir() (string, error) {
	if dir := os.Getenv("DELIVERY_CACHE"); dir != "" {
		return dir, nil
	}
	base, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("find the cache folder: %w", err)
	}
	return filepath.Join(base, "delivery"), nil
}

// CRDFiles finds each CRD in the module cache, downloading the module when it
// is not there yet; the CRDs are never copied into the project.
func CRDFiles(ctx context.Context) ([]string, error) {
	files := make([]string, 0, len(crdSources))
	for _, src := range crdSources {
		dir, err := moduleDir(ctx, src.module)
		if err != nil {
			return nil, err
		}
		files = append(files, filepath.Join(dir, src.file))
	}
	return files, nil
}

func moduleDir(ctx context.Context, module string) (string, error) {
	cmd := exec.CommandContext(ctx, "go", "mod", "download", "-json", module)
	// Outside the module, so that the download never edits go.mod or go.sum.
	cmd.Dir = os.TempDir()
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var info struct{ Dir, Error string }
	if jsonErr := json.Unmarshal(out, &info); jsonErr == nil && info.Error != "" {
		return "", fmt.Errorf("go mod download %s: %s", module, info.Error)
	}
	if err != nil {
		return "", fmt.Errorf("go mod download %s: %w: %s", module, err, stderr.String())
	}
	if info.Dir == "" {
		return "", fmt.Errorf("go mod download %s named no folder", module)
	}
	return info.Dir, nil
}

// ControlPlane is a running kube-apiserver and etcd with the CRDs installed.
type ControlPlane struct {
	// Config reaches the API server as its administrator.
	Config *rest.Config
	Kube   kubernetes.Interface
	// Client reads and writes the Flagger and Flux kinds as typed objects.
	Client client.Client
	env    *envtest.Environment
}

// Start starts a control plane; Stop ends it.
func Start(ctx context.Context) (*ControlPlane, error) { return StartWith(ctx, ControlPlaneOptions{}) }

// ControlPlaneOptions shape a control plane whose API server a node's pods
// reach: at an address on the node's bridge, under certificates that name
// the address and the kubernetes Service's, with ServiceAccount tokens
// mounted into pods. The zero value is the loopback control plane the unit
// tests share.
type ControlPlaneOptions struct {
	// Address is where the API server listens and what it advertises;
	// 127.0.0.1 when empty.
	Address string
	// Port is its secure port; one free on Address when 0.
	Port int
	// ServiceRange is its --service-cluster-ip-range; envtest's when empty.
	ServiceRange string
	// CertDir holds the API server's serving certificate and the
	// ServiceAccount signer (apiserver.crt/.key, sa-signer.crt/.key), made
	// by the caller; envtest makes its own when empty.
	CertDir string
	// CA is the certificate that signed CertDir's serving certificate.
	CA []byte
	// ServiceAccounts admits pods with their ServiceAccount's token, which
	// envtest turns off since nothing else of a cluster runs beside it.
	ServiceAccounts bool
	// Args are more of the API server's flags, by name.
	Args map[string]string
}

// StartWith starts a control plane shaped by opts; Stop ends it.
func StartWith(ctx context.Context, opts ControlPlaneOptions) (*ControlPlane, error) {
	assets, err := AssetsDir()
	if err != nil {
		return nil, err
	}
	crds, err := CRDFiles(ctx)
	if err != nil {
		return nil, err
	}
	scheme := Scheme()
	env := &envtest.Environment{
		BinaryAssetsDirectory: assets,
		CRDDirectoryPaths:     crds,
		ErrorIfCRDPathMissing: true,
		Scheme:                scheme,
		// envtest's own 20 s is short for a 2-core machine that is also
		// compiling the test binaries of other packages.
		ControlPlaneStartTimeout: time.Minute,
	}
	api := env.ControlPlane.GetAPIServer()
	if opts.CertDir != "" {
		// envtest keeps certificates it finds in its folder and then knows
		// no CA of its own: it is told the one that signed them.
		api.CertDir, api.CA = opts.CertDir, opts.CA
	}
	if opts.Address != "" {
		port := opts.Port
		if port == 0 {
			if port, err = freePortOn(opts.Address); err != nil {
				return nil, err
			}
		}
		api.Address, api.Port = opts.Address, strconv.Itoa(port)
		api.Configure().Set("advertise-address", opts.Address)
	}
	if opts.ServiceRange != "" {
		api.Configure().Set("service-cluster-ip-range", opts.ServiceRange)
	}
	if opts.ServiceAccounts {
		api.Configure().Disable("disable-admission-plugins")
	}
	for name, value := range opts.Args {
		api.Configure().Set(name, value)
	}
	// A service under test may hold a watch open when its API server is
	// stopped; without a grace period for watches the API server waits for
	// them to end on their own, well past the stop's timeout.
	api.Configure().Set("shutdown-watch-termination-grace-period", "1s")
	cfg, err := env.Start()
	if err != nil {
		// envtest can fail after etcd and the API server are up (waiting for
		// the default namespace, installing the CRDs): stop what it started,
		// or both outlive the test binary with their ports.
		return nil, errors.Join(fmt.Errorf("start kube-apiserver and etcd from %s: %w", assets, err), env.Stop())
	}
	cp := &ControlPlane{Config: cfg, env: env}
	if cp.Kube, err = kubernetes.NewForConfig(cfg); err == nil {
		cp.Client, err = client.New(cfg, client.Options{Scheme: scheme})
	}
	if err != nil {
		return nil, errors.Join(fmt.Errorf("connect to the control plane: %w", err), env.Stop())
	}
	return cp, nil
}

// CertDir is the folder of the API server's certificates, the
// ServiceAccount signer's key among them.
func (cp *ControlPlane) CertDir() string { return cp.env.ControlPlane.GetAPIServer().CertDir }

// Stop ends the API server and etcd and removes their data.
func (cp *ControlPlane) Stop() error { return cp.env.Stop() }

// StopAPIServer ends only the API server, so a test can watch a service meet
// an API server that no longer answers.
func (cp *ControlPlane) StopAPIServer() error {
	return cp.env.ControlPlane.GetAPIServer().Stop()
}

// Kubeconfig returns a kubeconfig file's bytes for an administrator of this
// control plane, for a binary started with KUBECONFIG.
func (cp *ControlPlane) Kubeconfig() ([]byte, error) {
	user, err := cp.env.AddUser(envtest.User{Name: "delivery-admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return nil, fmt.Errorf("add a user to the control plane: %w", err)
	}
	return user.KubeConfig()
}

// As returns a config that acts as the ServiceAccount namespace/name, so a test
// runs a service under exactly the grant its RBAC file gives it.
func (cp *ControlPlane) As(namespace, name string) *rest.Config {
	cfg := rest.CopyConfig(cp.Config)
	cfg.Impersonate = serviceAccount(namespace, name)
	return cfg
}

func serviceAccount(namespace, name string) rest.ImpersonationConfig {
	return rest.ImpersonationConfig{
		UserName: "system:serviceaccount:" + namespace + ":" + name,
		Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace, "system:authenticated"},
	}
}

// KubeconfigAs writes a kubeconfig file into dir that acts as the
// ServiceAccount namespace/name, As for a binary started with KUBECONFIG,
// and returns its path.
func (cp *ControlPlane) KubeconfigAs(dir, namespace, name string) (string, error) {
	raw, err := cp.Kubeconfig()
	if err != nil {
		return "", err
	}
	cfg, err := clientcmd.Load(raw)
	if err != nil {
		return "", fmt.Errorf("read the kubeconfig: %w", err)
	}
	as := serviceAccount(namespace, name)
	for _, user := range cfg.AuthInfos {
		user.Impersonate, user.ImpersonateGroups = as.UserName, as.Groups
	}
	path := filepath.Join(dir, name+".kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		return "", fmt.Errorf("write the kubeconfig of %s/%s: %w", namespace, name, err)
	}
	return path, nil
}
