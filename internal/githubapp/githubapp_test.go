package githubapp_test

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/JorisJonkers-dev/delivery/internal/githubapp"
	"github.com/JorisJonkers-dev/delivery/internal/testenv/fakegithub"
)

var estate = githubapp.Repository{Owner: "estate-org", Name: "estate"}

func newClient(t *testing.T, fake *fakegithub.Server, apiURL string) *githubapp.Client {
	t.Helper()
	c, err := githubapp.New(githubapp.Config{
		AppID: fake.AppID, InstallationID: fake.InstallationID, PrivateKey: fake.PrivateKeyPEM, APIURL: apiURL,
	})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestReadAndWriteOneFile(t *testing.T) {
	for _, enterprise := range []bool{false, true} {
		t.Run(map[bool]string{false: "github.com", true: "enterprise"}[enterprise], func(t *testing.T) {
			ctx := context.Background()
			fake := fakegithub.New(t)
			fake.AddRepository(estate.String())
			root := fake.URL()
			if enterprise {
				root = fake.EnterpriseURL()
			}
			file := newClient(t, fake, root).File(estate, "/clusters/cluster-state.yml", "")
			if file.String() != "estate-org/estate:clusters/cluster-state.yml" {
				t.Fatalf("file is %s", file)
			}

			if _, err := file.Read(ctx); !errors.Is(err, githubapp.ErrNotFound) {
				t.Fatalf("missing file read: %v", err)
			}
			created, err := file.Write(ctx, []byte("one\n"), "", "production: first capture")
			if err != nil || created.SHA != fakegithub.BlobSHA([]byte("one\n")) {
				t.Fatalf("create: %+v %v", created, err)
			}
			read, err := file.Read(ctx)
			if err != nil || string(read.Data) != "one\n" || read.SHA != created.SHA {
				t.Fatalf("read: %+v %v", read, err)
			}
			if _, err := file.Write(ctx, []byte("two\n"), read.SHA, "production: one placement moved"); err != nil {
				t.Fatal(err)
			}

			// A write naming the sha read before the last write conflicts.
			_, err = file.Write(ctx, []byte("three\n"), read.SHA, "production: stale")
			var conflict *githubapp.ConflictError
			if !errors.As(err, &conflict) || conflict.SHA != read.SHA || !strings.Contains(err.Error(), "changed since it was read") {
				t.Fatalf("stale write: %v", err)
			}
			// So does a create where a file appeared.
			_, err = file.Write(ctx, []byte("four\n"), "", "production: again")
			if !errors.As(err, &conflict) || conflict.SHA != "" || !strings.Contains(err.Error(), "expected no file") {
				t.Fatalf("create over a file: %v", err)
			}
			commits := fake.Commits(estate.String())
			if len(commits) != 2 || commits[1].Message != "production: one placement moved" || string(commits[1].Content) != "two\n" {
				t.Fatalf("commits: %+v", commits)
			}
			if enterprise && !strings.HasPrefix(fake.Calls()[0].Path, "/app/installations/") {
				t.Fatalf("calls: %v", fake.Calls())
			}
		})
	}
}

func TestBranchLargeFilesAndFailures(t *testing.T) {
	ctx := context.Background()
	fake := fakegithub.New(t)
	big := bytes.Repeat([]byte("- {process: api, node: node-a}\n"), 40_000)
	sha := fake.PutFile(estate.String(), "cluster-state.yml", big)
	c := newClient(t, fake, fake.URL())

	read, err := c.File(estate, "cluster-state.yml", "main").Read(ctx)
	if err != nil || !bytes.Equal(read.Data, big) || read.SHA != sha {
		t.Fatalf("large file: %v (%d bytes)", err, len(read.Data))
	}
	if fake.CallsMatching(http.MethodGet, "/git/blobs/"+sha) != 1 {
		t.Fatalf("calls: %v", fake.Calls())
	}
	if _, err := c.File(estate, "cluster-state.yml", "main").Write(ctx, []byte("x"), sha, "m"); err != nil {
		t.Fatalf("write on the named branch: %v", err)
	}
	if _, err := c.File(estate, "cluster-state.yml", "other").Read(ctx); !errors.Is(err, githubapp.ErrNotFound) {
		t.Fatalf("unknown branch: %v", err)
	}
	if _, err := c.File(estate, "cluster-state.yml", "other").Write(ctx, []byte("x"), "", "m"); !errors.Is(err, githubapp.ErrNotFound) {
		t.Fatalf("write to an unknown branch: %v", err)
	}
	fake.PutFile(estate.String(), "dir/file", []byte("x"))
	if _, err := c.File(estate, "dir", "").Read(ctx); err == nil || !strings.Contains(err.Error(), "not a file") {
		t.Fatalf("directory read: %v", err)
	}
	fake.FailWith(http.StatusBadGateway)
	if _, err := c.File(estate, "cluster-state.yml", "").Read(ctx); err == nil || errors.Is(err, githubapp.ErrNotFound) {
		t.Fatalf("502 read: %v", err)
	}
	if _, err := c.File(estate, "cluster-state.yml", "").Write(ctx, []byte("y"), "abc", "m"); err == nil {
		t.Fatal("502 write succeeded")
	}
	if c.GitHub() == nil {
		t.Fatal("no go-github client")
	}
}

func TestTokensAreRefreshedBeforeTheyExpire(t *testing.T) {
	ctx := context.Background()
	fake := fakegithub.New(t)
	fake.PutFile(estate.String(), "f", []byte("x"))
	c := newClient(t, fake, fake.URL())
	file := c.File(estate, "f", "")
	reads := func(n int) {
		t.Helper()
		for range n {
			if _, err := file.Read(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Tokens that live under a minute are inside ghinstallation's refresh
	// margin: every request asks for a new one instead of using one near expiry.
	fake.SetTokenTTL(50 * time.Second)
	reads(3)
	if n := fake.TokensIssued(); n != 3 {
		t.Fatalf("tokens issued for three reads with short-lived tokens: %d, want 3", n)
	}
	// An hour-long token is fetched once and used until near its expiry.
	fake.SetTokenTTL(time.Hour)
	reads(3)
	if n := fake.TokensIssued(); n != 4 {
		t.Fatalf("tokens issued: %d, want 4", n)
	}
}

func TestNewRefusesBadConfig(t *testing.T) {
	fake := fakegithub.New(t)
	if _, err := githubapp.New(githubapp.Config{AppID: 1, InstallationID: 2, PrivateKey: []byte("not a key")}); err == nil {
		t.Error("a bad key was accepted")
	}
	for _, u := range []string{"ftp://x", "://", "https://"} {
		if _, err := githubapp.New(githubapp.Config{AppID: 1, InstallationID: 2, PrivateKey: fake.PrivateKeyPEM, APIURL: u}); err == nil {
			t.Errorf("API URL %q was accepted", u)
		}
	}
	if _, err := githubapp.New(githubapp.Config{AppID: 1, InstallationID: 2, PrivateKey: fake.PrivateKeyPEM}); err != nil {
		t.Errorf("default API URL: %v", err)
	}
}

func TestParseRepository(t *testing.T) {
	for in, ok := range map[string]bool{
		"owner/name": true, "\towner/name\n": true, "owner": false, "/name": false, "owner/": false, "a/b/c": false, "": false,
	} {
		r, err := githubapp.ParseRepository(in)
		if (err == nil) != ok {
			t.Errorf("ParseRepository(%q) = %v, %v", in, r, err)
		}
		if ok && r.String() != "owner/name" {
			t.Errorf("ParseRepository(%q) = %s", in, r)
		}
	}
}

func TestFromEnv(t *testing.T) {
	fake := fakegithub.New(t)
	keyFile := filepath.Join(t.TempDir(), "key.pem")
	if err := os.WriteFile(keyFile, fake.PrivateKeyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	base := map[string]string{"GITHUB_APP_ID": "7", "GITHUB_APP_INSTALLATION_ID": "8", "GITHUB_APP_PRIVATE_KEY": string(fake.PrivateKeyPEM)}
	with := func(changes map[string]string) func(string) string {
		env := map[string]string{}
		for k, v := range base {
			env[k] = v
		}
		for k, v := range changes {
			env[k] = v
		}
		return func(k string) string { return env[k] }
	}
	cases := []struct {
		name    string
		env     map[string]string
		wantErr string
	}{
		{"inline key", nil, ""},
		{"key file", map[string]string{"GITHUB_APP_PRIVATE_KEY": "", "GITHUB_APP_PRIVATE_KEY_FILE": keyFile}, ""},
		{"enterprise", map[string]string{"GITHUB_API_URL": "https://github.example.com/api/v3"}, ""},
		{"no app id", map[string]string{"GITHUB_APP_ID": ""}, "GITHUB_APP_ID"},
		{"app id not a number", map[string]string{"GITHUB_APP_ID": "seven"}, "GITHUB_APP_ID"},
		{"no installation", map[string]string{"GITHUB_APP_INSTALLATION_ID": ""}, "GITHUB_APP_INSTALLATION_ID"},
		{"no key", map[string]string{"GITHUB_APP_PRIVATE_KEY": ""}, "GITHUB_APP_PRIVATE_KEY: required"},
		{"both keys", map[string]string{"GITHUB_APP_PRIVATE_KEY_FILE": keyFile}, "not both"},
		{"key file missing", map[string]string{"GITHUB_APP_PRIVATE_KEY": "", "GITHUB_APP_PRIVATE_KEY_FILE": keyFile + ".gone"}, "GITHUB_APP_PRIVATE_KEY_FILE"},
		{"key not a key", map[string]string{"GITHUB_APP_PRIVATE_KEY": "hello"}, "GITHUB_APP_PRIVATE_KEY:"},
		{"bad API URL", map[string]string{"GITHUB_API_URL": "github.example.com"}, "GITHUB_API_URL"},
		{"API URL with a password", map[string]string{"GITHUB_API_URL": "https://app:hunter2@github.example.com/api/v3"}, "carries credentials"},
		{"API URL that does not parse", map[string]string{"GITHUB_API_URL": "https://app:hunter2@github.example.com:port/"}, "does not parse"},
		{"a key where its file's path goes", map[string]string{"GITHUB_APP_PRIVATE_KEY": "", "GITHUB_APP_PRIVATE_KEY_FILE": string(fake.PrivateKeyPEM)}, "holds a key"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := githubapp.FromEnv(with(tc.env), os.ReadFile)
			if tc.wantErr == "" {
				if err != nil || cfg.AppID != 7 || cfg.InstallationID != 8 || len(cfg.PrivateKey) == 0 {
					t.Fatalf("%+v %v", cfg, err)
				}
				return
			}
			if err == nil || !strings.HasPrefix(err.Error(), tc.wantErr) && !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("error %v, want one naming %s", err, tc.wantErr)
			}
			// The error goes to the log: no secret of the environment in it.
			for _, secret := range []string{"hunter2", "PRIVATE KEY", string(fake.PrivateKeyPEM[40:80])} {
				if strings.Contains(err.Error(), secret) {
					t.Fatalf("the error quotes a secret: %v", err)
				}
			}
		})
	}
}

func TestUnchangedReadsAreConditionalAndFree(t *testing.T) {
	ctx := context.Background()
	fake := fakegithub.New(t)
	fake.PutFile(estate.String(), "cluster-state.yml", []byte("one\n"))
	file := newClient(t, fake, fake.URL()).File(estate, "cluster-state.yml", "")
	for range 3 {
		got, err := file.Read(ctx)
		if err != nil || string(got.Data) != "one\n" {
			t.Fatalf("read %q %v", got.Data, err)
		}
	}
	if used := fake.RateLimitUsed(); used != 1 {
		t.Fatalf("three reads of an unchanged file spent %d units, want 1", used)
	}
	if n := fake.CallsMatching(http.MethodGet, "/contents/"); n != 3 {
		t.Fatalf("%d reads reached GitHub", n)
	}
	sha := fake.PutFile(estate.String(), "cluster-state.yml", []byte("two\n"))
	got, err := file.Read(ctx)
	if err != nil || string(got.Data) != "two\n" || got.SHA != sha {
		t.Fatalf("a changed file read as %q %s %v", got.Data, got.SHA, err)
	}
	if used := fake.RateLimitUsed(); used != 2 {
		t.Fatalf("units spent %d, want 2", used)
	}
}
