package fakegithub_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/bradleyfalzon/ghinstallation/v2"

	"github.com/JorisJonkers-dev/delivery/internal/testenv/fakegithub"
	githubapi "github.com/JorisJonkers-dev/delivery/third_party/github"
)

// TestTheDescriptionCoversEveryRoute holds the vendored cut to the double:
// it loads as a valid OpenAPI document, it holds exactly the operations the
// double serves (no more, so the cut stays small; no fewer, so no route goes
// unvalidated), and the one correction the double makes to it is still needed.
func TestTheDescriptionCoversEveryRoute(t *testing.T) {
	doc, corrected, err := fakegithub.LoadDocument(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var inDoc []string
	for _, item := range doc.Paths.Map() {
		for _, op := range item.Operations() {
			inDoc = append(inDoc, op.OperationID)
		}
	}
	served := fakegithub.ServedOperations()
	listed := strings.Fields(strings.Join(slices.DeleteFunc(strings.Split(githubapi.Operations, "\n"),
		func(l string) bool { return strings.HasPrefix(l, "#") }), "\n"))
	for _, ids := range [][]string{inDoc, served, listed} {
		slices.Sort(ids)
	}
	if !slices.Equal(served, inDoc) || !slices.Equal(listed, inDoc) {
		t.Fatalf("the double serves %v, operations.txt lists %v, the cut holds %v", served, listed, inDoc)
	}
	if want := []string{"PUT /repos/{owner}/{repo}/contents/{path} 409"}; !slices.Equal(corrected, want) {
		t.Errorf("corrected %v, want %v: the defect LoadDocument corrects has changed", corrected, want)
	}
	// New starts only when every route's pattern is its operation's path.
	fakegithub.New(t)
}

// failureTB is a test that keeps its failures, to see the double fail one.
type failureTB struct {
	testing.TB
	mu     sync.Mutex
	errors []string
}

func (f *failureTB) Helper() {}

func (f *failureTB) Errorf(format string, args ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.errors = append(f.errors, fmt.Sprintf(format, args...))
}

func (f *failureTB) failures() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.errors)
}

func TestAnInvalidRequestIsRefusedAndReported(t *testing.T) {
	ctx := context.Background()
	tb := &failureTB{TB: t}
	fake := fakegithub.New(tb)
	id := fake.AddDeployment(repo, fakegithub.NewDeployment{Ref: "v1"})
	token := installationToken(t, fake)
	statuses := "/repos/" + repo + "/deployments/" + strconv.FormatInt(id, 10) + "/statuses"
	do := func(method, path, body string) (int, string) {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx, method, fake.URL()+path, strings.NewReader(body))
		req.Header.Set("Authorization", "token "+token)
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		text, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(text)
	}
	cases := []struct {
		name, method, path, body string
		status                   int
		violation                string
	}{
		{"a state GitHub does not have", http.MethodPost, statuses, `{"state":"done"}`, http.StatusUnprocessableEntity, "not one of the allowed values"},
		{"a status without its state", http.MethodPost, statuses, `{"description":"x"}`, http.StatusUnprocessableEntity, `"state" is missing`},
		{"a body that is not JSON", http.MethodPost, statuses, `{"state":`, http.StatusBadRequest, "create-deployment-status"},
		{"a deployment id that is not a number", http.MethodGet, "/repos/" + repo + "/deployments/latest/statuses", "", http.StatusNotFound, "deployment_id"},
		{"a page that is not a number", http.MethodGet, "/repos/" + repo + "/deployments?page=two", "", http.StatusUnprocessableEntity, `"page"`},
		// Two refusals GitHub states in prose, not in the schema.
		{"a description over 140 characters", http.MethodPost, statuses, `{"state":"success","description":"` + strings.Repeat("x", 141) + `"}`, http.StatusUnprocessableEntity, "141 characters"},
		{"content that is not Base64", http.MethodPut, "/repos/" + repo + "/contents/a.yml", `{"message":"m","content":"not base64!"}`, http.StatusUnprocessableEntity, "not Base64"},
		// GitHub ignores a query parameter it does not know, so the double
		// serves it, but a misspelt filter would silently list everything.
		{"an undeclared query parameter", http.MethodGet, "/repos/" + repo + "/deployments?env=production", "", http.StatusOK, `"env" is not declared`},
	}
	for _, tc := range cases {
		before := len(fake.Violations())
		status, body := do(tc.method, tc.path, tc.body)
		if status != tc.status {
			t.Errorf("%s: answered %d %s, want %d", tc.name, status, body, tc.status)
		}
		got := fake.Violations()[before:]
		if len(got) != 1 || !strings.Contains(got[0].Error(), tc.violation) {
			t.Errorf("%s: reported %v, want one violation naming %s", tc.name, got, tc.violation)
		}
	}
	if n := len(tb.failures()); n != len(cases) {
		t.Errorf("the test using the double failed %d times, want once per refused request (%d): %v", n, len(cases), tb.failures())
	}
	// A request the description allows is served and reported nowhere.
	before := len(fake.Violations())
	if status, body := do(http.MethodPost, statuses, `{"state":"success","description":"done"}`); status != http.StatusCreated {
		t.Fatalf("a valid status answered %d %s", status, body)
	}
	if got := fake.Violations()[before:]; len(got) != 0 {
		t.Errorf("a valid request reported %v", got)
	}
}

// installationToken asks the double for a token as ghinstallation does,
// with an App JWT.
func installationToken(t *testing.T, fake *fakegithub.Server) string {
	t.Helper()
	tr, err := ghinstallation.New(http.DefaultTransport, fake.AppID, fake.InstallationID, fake.PrivateKeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	tr.BaseURL = fake.URL()
	token, err := tr.Token(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return token
}
