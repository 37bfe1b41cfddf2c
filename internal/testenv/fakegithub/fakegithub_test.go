package fakegithub_test

// These tests hold the fake to go-github's types, so a drift between what the
// fake answers and what the client library decodes shows here first.

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"errors"
	"net/http"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/bradleyfalzon/ghinstallation/v2"
	"github.com/golang-jwt/jwt/v4"
	"github.com/google/go-github/v75/github"

	"github.com/JorisJonkers-dev/delivery/internal/testenv/fakegithub"
)

const repo = "estate-org/estate"

func client(t *testing.T, fake *fakegithub.Server, root string) *github.Client {
	t.Helper()
	tr, err := ghinstallation.New(http.DefaultTransport, fake.AppID, fake.InstallationID, fake.PrivateKeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	tr.BaseURL = root
	gh, err := github.NewClient(&http.Client{Transport: tr}).WithEnterpriseURLs(root+"/", root+"/")
	if err != nil {
		t.Fatal(err)
	}
	return gh
}

func TestBlobSHAIsGitsObjectID(t *testing.T) {
	for _, content := range []string{"", "hello\n", "bindings: []\nplacements: []\n"} {
		cmd := exec.Command("git", "hash-object", "--stdin")
		cmd.Stdin = strings.NewReader(content)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("git is needed to check blob ids: %v", err)
		}
		want := strings.TrimSpace(string(out))
		if got := fakegithub.BlobSHA([]byte(content)); got != want {
			t.Errorf("BlobSHA(%q) = %s, git says %s", content, got, want)
		}
	}
	// The well-known id of the empty blob.
	if got := fakegithub.BlobSHA(nil); got != "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391" {
		t.Errorf("empty blob = %s", got)
	}
}

func TestContentsAPIThroughGoGitHub(t *testing.T) {
	ctx := context.Background()
	// The write without a message below is a request GitHub's description
	// refuses: kept, and checked, rather than failing the test.
	fake := fakegithub.New(t, fakegithub.OnViolation(func(error) {}))
	fake.AddRepository(repo)
	gh := client(t, fake, fake.EnterpriseURL())

	// Missing file: 404 as go-github's ErrorResponse.
	_, _, resp, err := gh.Repositories.GetContents(ctx, "estate-org", "estate", "cluster-state.yml", nil)
	var ghErr *github.ErrorResponse
	if !errors.As(err, &ghErr) || resp.StatusCode != http.StatusNotFound || ghErr.Message != "Not Found" {
		t.Fatalf("missing file: %v (%v)", err, resp)
	}

	// Create: 201 with the blob's sha and a commit carrying the message.
	created, resp, err := gh.Repositories.CreateFile(ctx, "estate-org", "estate", "state/cluster-state.yml",
		&github.RepositoryContentFileOptions{Message: github.Ptr("first"), Content: []byte("one\n")})
	if err != nil || resp.StatusCode != http.StatusCreated {
		t.Fatalf("create: %v %v", err, resp)
	}
	if created.Content.GetSHA() != fakegithub.BlobSHA([]byte("one\n")) || created.GetMessage() != "first" || created.GetSHA() == "" {
		t.Fatalf("create answered %+v", created)
	}

	// Read back: type, encoding, size, path, name, content, sha.
	file, dir, _, err := gh.Repositories.GetContents(ctx, "estate-org", "estate", "state/cluster-state.yml", &github.RepositoryContentGetOptions{Ref: "main"})
	if err != nil || dir != nil {
		t.Fatalf("get: %v %v", err, dir)
	}
	text, err := file.GetContent()
	if err != nil || text != "one\n" || file.GetType() != "file" || file.GetEncoding() != "base64" ||
		file.GetSize() != 4 || file.GetName() != "cluster-state.yml" || file.GetPath() != "state/cluster-state.yml" ||
		file.GetSHA() != created.Content.GetSHA() || file.GetGitURL() == "" || file.GetDownloadURL() == "" {
		t.Fatalf("get answered %+v (%q, %v)", file, text, err)
	}

	// A directory answers an array.
	_, dir, _, err = gh.Repositories.GetContents(ctx, "estate-org", "estate", "state", nil)
	if err != nil || len(dir) != 1 || dir[0].GetName() != "cluster-state.yml" {
		t.Fatalf("dir: %v %+v", err, dir)
	}

	// Update with the sha read: 200.
	updated, resp, err := gh.Repositories.UpdateFile(ctx, "estate-org", "estate", "state/cluster-state.yml",
		&github.RepositoryContentFileOptions{Message: github.Ptr("second"), Content: []byte("two\n"), SHA: file.SHA})
	if err != nil || resp.StatusCode != http.StatusOK || updated.Content.GetSHA() != fakegithub.BlobSHA([]byte("two\n")) || len(updated.Parents) != 1 {
		t.Fatalf("update: %v %+v", err, updated)
	}

	// Update with the stale sha: 409, nothing written.
	_, resp, err = gh.Repositories.UpdateFile(ctx, "estate-org", "estate", "state/cluster-state.yml",
		&github.RepositoryContentFileOptions{Message: github.Ptr("stale"), Content: []byte("three\n"), SHA: file.SHA})
	if !errors.As(err, &ghErr) || resp.StatusCode != http.StatusConflict {
		t.Fatalf("stale sha: %v", err)
	}
	// Create over an existing file: 422, "sha" wasn't supplied.
	_, resp, err = gh.Repositories.CreateFile(ctx, "estate-org", "estate", "state/cluster-state.yml",
		&github.RepositoryContentFileOptions{Message: github.Ptr("again"), Content: []byte("four\n")})
	if err == nil || resp.StatusCode != http.StatusUnprocessableEntity {
		t.Fatalf("create over a file: %v", err)
	}
	if content, _, _ := fake.File(repo, "state/cluster-state.yml"); string(content) != "two\n" {
		t.Fatalf("refused writes changed the file: %q", content)
	}
	commits := fake.Commits(repo)
	if len(commits) != 2 || commits[0].Message != "first" || commits[1].Message != "second" || commits[1].Committer != "api" {
		t.Fatalf("commits: %+v", commits)
	}

	// Another branch, another repository: 404.
	if _, _, resp, _ = gh.Repositories.GetContents(ctx, "estate-org", "estate", "state/cluster-state.yml", &github.RepositoryContentGetOptions{Ref: "other"}); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("unknown ref answered %d", resp.StatusCode)
	}
	if _, _, resp, _ = gh.Repositories.GetContents(ctx, "estate-org", "elsewhere", "x", nil); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("unknown repository answered %d", resp.StatusCode)
	}
	if _, resp, _ = gh.Repositories.CreateFile(ctx, "estate-org", "estate", "x", &github.RepositoryContentFileOptions{Content: []byte("x")}); resp.StatusCode != http.StatusUnprocessableEntity {
		t.Fatalf("a write without a message answered %d", resp.StatusCode)
	}
	if v := fake.Violations(); len(v) != 1 || !strings.Contains(v[0].Error(), `"message" is missing`) {
		t.Fatalf("violations %v, want the write without a message", v)
	}

	calls := fake.Calls()
	if calls[0].Method != http.MethodPost || calls[0].Auth != "app" || !strings.HasPrefix(calls[0].Path, "/app/installations/") {
		t.Fatalf("first call %+v, want the token request", calls[0])
	}
	for _, c := range calls[1:] {
		if c.Auth != "installation" {
			t.Errorf("%v authenticated as %q", c, c.Auth)
		}
	}
	if fake.CallsMatching(http.MethodPut, "/contents/") != 5 {
		t.Errorf("PUT calls: %v", calls)
	}
	fake.ResetCalls()
	if len(fake.Calls()) != 0 {
		t.Error("ResetCalls kept calls")
	}
	if got := fake.Repositories(); len(got) != 1 || got[0] != repo {
		t.Errorf("repositories %v", got)
	}
}

func TestLargeFilesComeFromTheBlob(t *testing.T) {
	ctx := context.Background()
	fake := fakegithub.New(t)
	big := bytes.Repeat([]byte("placements: []\n"), 80_000)
	sha := fake.PutFile(repo, "big.yml", big)
	gh := client(t, fake, fake.URL())
	file, _, _, err := gh.Repositories.GetContents(ctx, "estate-org", "estate", "big.yml", nil)
	if err != nil || file.GetEncoding() != "none" || file.GetSHA() != sha {
		t.Fatalf("large file: %v %+v", err, file)
	}
	raw, _, err := gh.Git.GetBlobRaw(ctx, "estate-org", "estate", sha)
	if err != nil || !bytes.Equal(raw, big) {
		t.Fatalf("raw blob: %v (%d bytes)", err, len(raw))
	}
	blob, _, err := gh.Git.GetBlob(ctx, "estate-org", "estate", sha)
	if err != nil || blob.GetSize() != len(big) || blob.GetEncoding() != "base64" {
		t.Fatalf("blob: %v %+v", err, blob)
	}
	if _, resp, _ := gh.Git.GetBlob(ctx, "estate-org", "estate", strings.Repeat("0", 40)); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("unknown blob answered %d", resp.StatusCode)
	}
}

func TestInstallationTokens(t *testing.T) {
	ctx := context.Background()
	now := time.Now()
	fake := fakegithub.New(t, fakegithub.WithClock(func() time.Time { return now }))
	fake.AddRepository(repo)
	tr, err := ghinstallation.New(http.DefaultTransport, fake.AppID, fake.InstallationID, fake.PrivateKeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	tr.BaseURL = fake.URL()
	token, err := tr.Token(ctx)
	if err != nil || !strings.HasPrefix(token, "ghs_") {
		t.Fatalf("token: %q %v", token, err)
	}
	expires, _, _ := tr.Expiry()
	if d := expires.Sub(now); d < 59*time.Minute || d > time.Hour {
		t.Fatalf("token lives %v, GitHub's live an hour", d)
	}
	get := func(tok string) int {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, fake.URL()+"/repos/"+repo+"/contents/cluster-state.yml", nil)
		req.Header.Set("Authorization", "token "+tok)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := get(token); code != http.StatusNotFound { // empty repository: no such file
		t.Fatalf("valid token answered %d", code)
	}
	if code := get("ghs_forged"); code != http.StatusUnauthorized {
		t.Fatalf("forged token answered %d", code)
	}
	now = now.Add(61 * time.Minute)
	if code := get(token); code != http.StatusUnauthorized {
		t.Fatalf("expired token answered %d", code)
	}
	// An installation the App does not have.
	other, _ := ghinstallation.New(http.DefaultTransport, fake.AppID, fake.InstallationID+1, fake.PrivateKeyPEM)
	other.BaseURL = fake.URL()
	if _, err := other.Token(ctx); err == nil {
		t.Fatal("a token for another installation was issued")
	}
	if fake.TokensIssued() != 1 {
		t.Fatalf("issued %d tokens", fake.TokensIssued())
	}
}

func TestAppJWTIsHeldToGitHubsRules(t *testing.T) {
	fake := fakegithub.New(t)
	key, err := jwt.ParseRSAPrivateKeyFromPEM(fake.PrivateKeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	strange, _ := rsa.GenerateKey(rand.Reader, 2048)
	now := time.Now().Truncate(time.Second)
	app := strconv.FormatInt(fake.AppID, 10)
	claims := func(iss string, iat, exp time.Time) jwt.RegisteredClaims {
		return jwt.RegisteredClaims{Issuer: iss, IssuedAt: jwt.NewNumericDate(iat), ExpiresAt: jwt.NewNumericDate(exp)}
	}
	sign := func(method jwt.SigningMethod, k any, c jwt.Claims) string {
		s, err := jwt.NewWithClaims(method, c).SignedString(k)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	cases := []struct {
		name  string
		token string
		want  int
	}{
		{"a good JWT", sign(jwt.SigningMethodRS256, key, claims(app, now.Add(-30*time.Second), now.Add(9*time.Minute))), http.StatusCreated},
		{"another App's id", sign(jwt.SigningMethodRS256, key, claims("999", now, now.Add(time.Minute))), http.StatusUnauthorized},
		{"expiring after ten minutes", sign(jwt.SigningMethodRS256, key, claims(app, now, now.Add(11*time.Minute))), http.StatusUnauthorized},
		{"expired", sign(jwt.SigningMethodRS256, key, claims(app, now.Add(-5*time.Minute), now.Add(-time.Minute))), http.StatusUnauthorized},
		{"issued in the future", sign(jwt.SigningMethodRS256, key, claims(app, now.Add(5*time.Minute), now.Add(6*time.Minute))), http.StatusUnauthorized},
		{"no iat", sign(jwt.SigningMethodRS256, key, jwt.RegisteredClaims{Issuer: app, ExpiresAt: jwt.NewNumericDate(now.Add(time.Minute))}), http.StatusUnauthorized},
		{"no exp", sign(jwt.SigningMethodRS256, key, jwt.RegisteredClaims{Issuer: app, IssuedAt: jwt.NewNumericDate(now)}), http.StatusUnauthorized},
		{"signed by another key", sign(jwt.SigningMethodRS256, strange, claims(app, now, now.Add(time.Minute))), http.StatusUnauthorized},
		{"RS512", sign(jwt.SigningMethodRS512, key, claims(app, now, now.Add(time.Minute))), http.StatusUnauthorized},
		{"HS256", sign(jwt.SigningMethodHS256, []byte("secret"), claims(app, now, now.Add(time.Minute))), http.StatusUnauthorized},
		{"none", "", http.StatusUnauthorized},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequestWithContext(context.Background(), http.MethodPost,
				fake.URL()+"/app/installations/"+strconv.FormatInt(fake.InstallationID, 10)+"/access_tokens", nil)
			if tc.token != "" {
				req.Header.Set("Authorization", "Bearer "+tc.token)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tc.want {
				t.Fatalf("answered %d, want %d", resp.StatusCode, tc.want)
			}
		})
	}
}

func TestFailWithAndUnknownRoutes(t *testing.T) {
	ctx := context.Background()
	// The unserved route below is reported: kept, and checked, here.
	fake := fakegithub.New(t, fakegithub.OnViolation(func(error) {}))
	fake.PutFile(repo, "a", []byte("a"))
	gh := client(t, fake, fake.URL())
	fake.FailWith(http.StatusBadGateway)
	if _, _, resp, _ := gh.Repositories.GetContents(ctx, "estate-org", "estate", "a", nil); resp.StatusCode != http.StatusBadGateway {
		t.Fatalf("failing fake answered %d", resp.StatusCode)
	}
	fake.FailWith(0)
	if _, _, _, err := gh.Repositories.GetContents(ctx, "estate-org", "estate", "a", nil); err != nil {
		t.Fatal(err)
	}
	if _, resp, _ := gh.Repositories.Get(ctx, "estate-org", "estate"); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("an unserved route answered %d", resp.StatusCode)
	}
	if v := fake.Violations(); len(v) != 1 || !strings.Contains(v[0].Error(), "no such operation") {
		t.Fatalf("violations %v, want the unserved route's", v)
	}
	if c := fake.Calls()[len(fake.Calls())-1]; c.String() != "GET /repos/estate-org/estate -> 404" {
		t.Fatalf("last call %v", c)
	}
}

func TestConditionalReadsCostNothing(t *testing.T) {
	ctx := context.Background()
	fake := fakegithub.New(t)
	fake.PutFile(repo, "cluster-state.yml", []byte("one\n"))
	gh := client(t, fake, fake.URL())
	_, _, resp, err := gh.Repositories.GetContents(ctx, "estate-org", "estate", "cluster-state.yml", nil)
	if err != nil {
		t.Fatal(err)
	}
	etag := resp.Header.Get("ETag")
	if etag == "" || resp.Rate.Limit != 5000 || resp.Rate.Remaining != 4999 {
		t.Fatalf("ETag %q, rate %+v", etag, resp.Rate)
	}
	token, err := gh.Client().Transport.(*ghinstallation.Transport).Token(ctx)
	if err != nil {
		t.Fatal(err)
	}
	conditional := func() int {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, fake.URL()+"/repos/"+repo+"/contents/cluster-state.yml", nil)
		req.Header.Set("Authorization", "token "+token)
		req.Header.Set("If-None-Match", etag)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := conditional(); code != http.StatusNotModified {
		t.Fatalf("an unchanged file answered %d", code)
	}
	if used := fake.RateLimitUsed(); used != 1 {
		t.Fatalf("rate limit used %d after one read and one 304", used)
	}
	// The ETag belongs to the token that read it: under the next token the
	// same unchanged file is read, and paid for, again.
	renewed, err := ghinstallation.New(http.DefaultTransport, fake.AppID, fake.InstallationID, fake.PrivateKeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	renewed.BaseURL = fake.URL()
	first := token
	if token, err = renewed.Token(ctx); err != nil || token == first {
		t.Fatalf("a second token %q: %v", token, err)
	}
	if code := conditional(); code != http.StatusOK {
		t.Fatalf("another token's ETag answered %d, want the file again", code)
	}
	if used := fake.RateLimitUsed(); used != 2 {
		t.Fatalf("rate limit used %d", used)
	}
	token = first
	fake.PutFile(repo, "cluster-state.yml", []byte("two\n"))
	if code := conditional(); code != http.StatusOK {
		t.Fatalf("a changed file answered %d", code)
	}
	if used := fake.RateLimitUsed(); used != 3 {
		t.Fatalf("rate limit used %d", used)
	}
}
