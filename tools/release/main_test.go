package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sigstore/cosign/v3/pkg/cosign"

	"github.com/JorisJonkers-dev/delivery/internal/cli/clitest"
)

func runRelease(args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	return run(context.Background(), args, getenv, stdout, stderr)
}

func TestTheCommandLineIsEveryBinarys(t *testing.T) {
	var names []string
	for _, v := range service.Variables {
		names = append(names, v.Name)
	}
	clitest.Conform(t, clitest.Binary{Name: "release", Variables: names, Run: runRelease})
}

// TestABadSettingStopsTheReleaseBeforeAnythingIsBuilt: each is exit 2 and
// one log line naming the variable, with nothing built or pushed (the
// registry named does not exist, so a push would fail with 1).
func TestABadSettingStopsTheReleaseBeforeAnythingIsBuilt(t *testing.T) {
	dir := t.TempDir()
	kb, err := cosign.GenerateKeyPair(func(bool) ([]byte, error) { return []byte("right"), nil })
	if err != nil {
		t.Fatal(err)
	}
	key := filepath.Join(dir, "cosign.key")
	if err := os.WriteFile(key, kb.PrivateBytes, 0o600); err != nil {
		t.Fatal(err)
	}
	good := map[string]string{"VERSION": "v1.0.0", "REGISTRY": "registry.invalid/delivery", "COSIGN_KEY": key, "COSIGN_PASSWORD": "right",
		"RELEASE_DIR": dir}
	for _, c := range []struct {
		name   string
		change map[string]string
		names  string
	}{
		{"no version", map[string]string{"VERSION": ""}, "VERSION"},
		{"a version that is no tag", map[string]string{"VERSION": "1.0"}, "VERSION"},
		{"no registry", map[string]string{"REGISTRY": ""}, "REGISTRY"},
		{"a registry with capitals", map[string]string{"REGISTRY": "ghcr.io/Org"}, "REGISTRY"},
		{"no key", map[string]string{"COSIGN_KEY": ""}, "COSIGN_KEY"},
		{"a key that is not there", map[string]string{"COSIGN_KEY": filepath.Join(dir, "none.key")}, "COSIGN_KEY"},
		{"a wrong password", map[string]string{"COSIGN_PASSWORD": "wrong"}, "COSIGN_KEY"},
		{"a public key", map[string]string{"COSIGN_KEY": writeFile(t, dir, "cosign.pub", kb.PublicBytes)}, "COSIGN_KEY"},
		{"a signing that is neither", map[string]string{"RELEASE_SIGNING": "keyless"}, "RELEASE_SIGNING"},
		{"insecure that is no boolean", map[string]string{"RELEASE_INSECURE": "maybe"}, "RELEASE_INSECURE"},
		{"a creation time that is no number", map[string]string{"SOURCE_DATE_EPOCH": "yesterday"}, "SOURCE_DATE_EPOCH"},
		{"no CA bundle", map[string]string{"IMAGES_CA_CERTIFICATES": filepath.Join(dir, "none.crt")}, "IMAGES_CA_CERTIFICATES"},
	} {
		t.Run(c.name, func(t *testing.T) {
			env := map[string]string{}
			for k, v := range good {
				env[k] = v
			}
			for k, v := range c.change {
				env[k] = v
			}
			var stdout, stderr bytes.Buffer
			code := run(context.Background(), nil, func(k string) string { return env[k] }, &stdout, &stderr)
			lines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
			if code != 2 || len(lines) != 1 || !strings.Contains(lines[0], "bad configuration") || !strings.Contains(lines[0], c.names) {
				t.Errorf("exit %d, stderr %q; want 2 and one line naming %s", code, stderr.String(), c.names)
			}
			if stdout.Len() != 0 {
				t.Errorf("printed %q on a bad setting", stdout.String())
			}
		})
	}
}

func writeFile(t *testing.T, dir, name string, raw []byte) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
