package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/JorisJonkers-dev/delivery/internal/ociimage"
	"github.com/JorisJonkers-dev/delivery/internal/testenv"
	"github.com/JorisJonkers-dev/delivery/internal/testenv/fakegithub"
)

// kubeconfigMount is where a service's container finds its kubeconfig.
const kubeconfigMount = "/var/run/delivery/kubeconfig"

// TestImagesRunUnderPodman loads every archive into podman and runs it as a
// cluster would: each image answers --help and --version (the version its
// labels carry), and each service starts on the host's network with a
// read-only root filesystem, as uid 65532, reaches a real API server through
// a kubeconfig mounted read-only, answers /healthz and drains on SIGTERM.
func TestImagesRunUnderPodman(t *testing.T) {
	p := newPodman(t)
	dir, results := everyImage(t)
	secrets, err := os.MkdirTemp("", "s")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(secrets) })

	for _, target := range ociimage.Targets() {
		t.Run(target.Name, func(t *testing.T) {
			ref := ociimage.Repository + target.Name + ":latest"
			if out := p.must(t, "load", "--input", results[target.Name].archive); !strings.Contains(out, "Loaded image: "+ref) {
				t.Fatalf("podman load said %q", out)
			}
			labels := strings.Split(strings.TrimSpace(p.must(t, "image", "inspect", "--format",
				`{{.Config.User}}|{{index .Config.Labels "org.opencontainers.image.version"}}|{{index .Config.Labels "org.opencontainers.image.revision"}}`, ref)), "|")
			if len(labels) != 3 || labels[0] != ociimage.User {
				t.Fatalf("user and labels %q", labels)
			}
			checkCommandLine(t, p, target, ref, labels[1], labels[2])
			// The layout holds the same image, by name.
			if stdout, stderr, err := p.try("run", "--rm", "--network", "none", "--read-only",
				"oci:"+ociimage.LayoutDir(dir)+":"+target.Name, "--help"); err != nil || !strings.Contains(stdout, "Usage:") {
				t.Errorf("%s from the layout: --help %v\n%s%s", target.Name, err, stdout, stderr)
			}
			switch target.Name {
			case "release-gate", "collector", "reporter", "release-record":
				serve(t, p, secrets, target.Name, ref)
			case "backup-files":
				backupFiles(t, p, secrets, ref)
			case "backup-postgres":
				noPgDumpall(t, p, ref)
			default:
				// A job with nothing set stops at once naming what it lacks.
				_, stderr, err := p.try("run", "--rm", "--network", "none", "--read-only", ref)
				if exitCode(err) == 0 || !strings.Contains(stderr, "required") {
					t.Errorf("%s without its variables: exit %d\n%s", target.Name, exitCode(err), stderr)
				}
			}
		})
	}
}

// checkCommandLine runs the image with --help and with --version. backup's
// images start a method, whose command has no --version: the binary's own is
// asked through the entrypoint.
func checkCommandLine(t *testing.T, p *podman, target ociimage.Target, ref, version, revision string) {
	t.Helper()
	stdout, stderr, err := p.try("run", "--rm", "--network", "none", "--read-only", ref, "--help")
	if err != nil || !strings.Contains(stdout, "Usage:") {
		t.Errorf("--help: exit %d\n%s%s", exitCode(err), stdout, stderr)
	}
	args := []string{"run", "--rm", "--network", "none", "--read-only"}
	if len(target.Args) > 0 {
		args = append(args, "--entrypoint", ociimage.BinaryDir+"/"+target.Command)
	}
	stdout, stderr, err = p.try(append(args, ref, "--version")...)
	want := target.Command + " " + version + ", commit " + revision
	if err != nil || !strings.HasPrefix(stdout, want) {
		t.Errorf("--version: exit %d, printed %q, want the labels' %q\n%s", exitCode(err), stdout, want, stderr)
	}
	if version == "(devel)" || revision == "unknown" {
		t.Errorf("the image was built without the checkout's stamp: %s %s", version, revision)
	}
}

// serve starts a service's image with what its guide says it needs: a
// kubeconfig under the service's own grant and, for the Collector and the
// Reporter, a GitHub App (the fake). Nothing it would call but the API
// server and the fake answers: the services still serve.
func serve(t *testing.T, p *podman, secrets, name, ref string) {
	t.Helper()
	cp := testenv.Shared(t)
	addr, err := testenv.FreeAddress()
	if err != nil {
		t.Fatal(err)
	}
	rbac := "../../deploy/" + name + "/rbac.yaml"
	env := map[string]string{"ADDR": addr, "KUBECONFIG": kubeconfigMount}
	var kubeconfig string
	switch name {
	case "release-gate":
		flaggerNS := cp.Namespace(t)
		kubeconfig = cp.GrantKubeconfig(t, rbac, "delivery-system", name, "delivery-system # FLAGGER_NAMESPACE", flaggerNS)
		env["FLAGGER_NAMESPACE"] = flaggerNS
	case "release-record":
		recordNS := cp.Namespace(t)
		kubeconfig = cp.GrantKubeconfig(t, rbac, "delivery-system", name, "delivery-system # RECORD_NAMESPACE", recordNS+" # RECORD_NAMESPACE")
		for k, v := range map[string]string{"CLUSTER_NAME": "prod-eu", "ENVIRONMENT": "prod", "RECORD_NAMESPACE": recordNS,
			"CDEVENTS_SINK": "http://127.0.0.1:1/", "FLUX_NAMESPACE": cp.Namespace(t), "GATE_URL": "http://127.0.0.1:1", "INTERVAL": "1h"} {
			env[k] = v
		}
	default:
		kubeconfig = cp.GrantKubeconfig(t, rbac, "delivery-system", name)
		fake := fakegithub.New(t)
		fake.AddRepository("estate-org/estate")
		for k, v := range map[string]string{"GITHUB_APP_ID": "1001", "GITHUB_APP_INSTALLATION_ID": "2002",
			"GITHUB_APP_PRIVATE_KEY": string(fake.PrivateKeyPEM), "GITHUB_API_URL": fake.URL(), "INTERVAL": "1h"} {
			env[k] = v
		}
		if name == "collector" {
			env["CLUSTER_NAME"], env["ESTATE_REPOSITORY"] = "production", "estate-org/estate"
		} else {
			env["FLUX_NAMESPACE"], env["GATE_URL"] = cp.Namespace(t), "http://127.0.0.1:1"
		}
	}
	raw, err := os.ReadFile(kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	mounted := readableBy(t, secrets, name+".kubeconfig", raw)
	c := p.start(t, name, ref, env, mounted+":"+kubeconfigMount+":ro")
	c.waitHealthy(addr)
	c.checkUser()
	c.stop()
}

// backupFiles runs a files backup of a folder mounted read-only onto a claim
// only the image's user may write, as the CronJob runs it.
func backupFiles(t *testing.T, p *podman, secrets, ref string) {
	t.Helper()
	data, claim := filepath.Join(secrets, "data"), filepath.Join(secrets, "claim")
	for _, d := range []string{data, claim} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(d, 65532, 65532); err != nil {
			t.Fatal(err)
		}
	}
	readableBy(t, data, "notes.txt", []byte("kept\n"))
	stdout, stderr, err := p.try("run", "--rm", "--network", "none", "--read-only", "--env", "BACKUP_RETAIN=1",
		"--volume", data+":/data:ro", "--volume", claim+":/backup", ref)
	if err != nil || !strings.Contains(stderr, `"msg":"backup complete"`) {
		t.Fatalf("backup files: exit %d\n%s%s", exitCode(err), stdout, stderr)
	}
	names, err := os.ReadDir(claim)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(names, func(e os.DirEntry) bool {
		return strings.HasPrefix(e.Name(), "files-") && strings.HasSuffix(e.Name(), ".tar.gz")
	}) {
		t.Errorf("the claim holds %v, no generation", names)
	}
}

// noPgDumpall holds backup-postgres to what its documentation says: it
// carries no pg_dumpall, so a run fails and names it.
func noPgDumpall(t *testing.T, p *podman, ref string) {
	t.Helper()
	_, stderr, err := p.try("run", "--rm", "--network", "none", "--read-only", "--env", "BACKUP_RETAIN=1",
		"--env", "BACKUP_DIR=/tmp", "--env", "BACKUP_HOST=127.0.0.1", "--env", "PGUSER=backup", "--env", "PGPASSWORD=x", ref)
	if exitCode(err) != 1 || !strings.Contains(stderr, "pg_dumpall") || !strings.Contains(stderr, "not found") {
		t.Errorf("backup-postgres: exit %d, want 1 naming pg_dumpall:\n%s", exitCode(err), stderr)
	}
}
