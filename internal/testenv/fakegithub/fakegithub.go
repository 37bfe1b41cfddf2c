package fakegithub

import (
	"bytes"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/routers"
)

// Defaults for the App a Server trusts.
const (
	DefaultAppID          int64 = 1001
	DefaultInstallationID int64 = 2002
	// enterprisePrefix is where GitHub Enterprise Server serves the REST API;
	// the fake answers under it as well as at its root.
	enterprisePrefix = "/api/v3"
	docsURL          = "https://docs.github.com/rest"
)

// Server is a running fake GitHub.
type Server struct {
	// AppID and InstallationID are the App and installation it trusts.
	AppID          int64
	InstallationID int64
	// PrivateKeyPEM is the App's private key (PKCS#1 PEM), as GitHub hands it out.
	PrivateKeyPEM []byte

	srv    *httptest.Server
	public *rsa.PublicKey

	mu       sync.Mutex
	now      func() time.Time
	tokenTTL time.Duration
	tokens   map[string]time.Time
	issued   int
	repos    map[string]*repository
	calls    []Call
	failWith int
	// nextID numbers deployments and their statuses, as GitHub's ids do.
	nextID int64

	// spec is GitHub's description every request and answer is held to;
	// operations are the routes' operations in it, by pattern.
	spec        *description
	operations  map[string]*routers.Route
	violations  []error
	onViolation func(error)
}

// Call is one request the fake answered.
type Call struct {
	Method string
	// Path is the request's path without an Enterprise prefix; Query its raw query.
	Path  string
	Query string
	// Auth says how the caller authenticated: "app" (App JWT),
	// "installation" (installation token) or "" (none or rejected).
	Auth   string
	Status int
}

func (c Call) String() string { return fmt.Sprintf("%s %s -> %d", c.Method, c.Path, c.Status) }

// Option changes a Server before it starts.
type Option func(*Server)

// WithClock makes the fake read time from now, for tests of token expiry.
func WithClock(now func() time.Time) Option { return func(s *Server) { s.now = now } }

// New starts a fake GitHub that trusts one App with a fresh 2048-bit key; it
// stops when the test ends. A request GitHub's description refuses, or an
// answer it does not allow, fails the test (OnViolation changes that).
func New(t testing.TB, opts ...Option) *Server {
	t.Helper()
	fail := OnViolation(func(err error) { t.Errorf("github double: %v", err) })
	s, err := Start("127.0.0.1:0", append([]Option{fail}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// Start starts a fake GitHub listening on addr, as New does, for a caller
// that outlives one test (a package's shared estate, whose pods reach it on
// the node's bridge); Close stops it. It keeps what disagrees with GitHub's
// description in Violations.
func Start(addr string, opts ...Option) (*Server, error) {
	spec, err := loadDescription()
	if err != nil {
		return nil, err
	}
	operations := map[string]*routers.Route{}
	for _, rt := range routes() {
		if operations[rt.pattern], err = spec.operation(rt.pattern, rt.operation); err != nil {
			return nil, err
		}
	}
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, fmt.Errorf("generate the App's key: %w", err)
	}
	s := &Server{
		AppID:          DefaultAppID,
		InstallationID: DefaultInstallationID,
		PrivateKeyPEM:  pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}),
		public:         &key.PublicKey,
		now:            time.Now,
		tokenTTL:       time.Hour,
		tokens:         map[string]time.Time{},
		repos:          map[string]*repository{},
		spec:           spec,
		operations:     operations,
	}
	for _, o := range opts {
		o(s)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen for the fake GitHub: %w", err)
	}
	s.srv = httptest.NewUnstartedServer(s.handler())
	_ = s.srv.Listener.Close()
	s.srv.Listener = ln
	s.srv.Start()
	return s, nil
}

// Close stops the server.
func (s *Server) Close() { s.srv.Close() }

// URL is the API root, as api.github.com would be.
func (s *Server) URL() string { return s.srv.URL }

// EnterpriseURL is the API root as GitHub Enterprise Server spells it.
func (s *Server) EnterpriseURL() string { return s.srv.URL + enterprisePrefix }

// Client is an HTTP client that reaches the fake.
func (s *Server) Client() *http.Client { return s.srv.Client() }

// SetTokenTTL sets how long installation tokens issued from now on live
// (GitHub: one hour).
func (s *Server) SetTokenTTL(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tokenTTL = d
}

// TokensIssued counts the installation tokens handed out.
func (s *Server) TokensIssued() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.issued
}

// FailWith makes every repository call answer status (for example 502) until
// it is called with 0. Token requests still succeed, so a test reaches the
// failure it means to.
func (s *Server) FailWith(status int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failWith = status
}

// Calls lists every call answered, in order.
func (s *Server) Calls() []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Call(nil), s.calls...)
}

// CallsMatching counts the calls with this method whose path contains fragment.
func (s *Server) CallsMatching(method, fragment string) int {
	n := 0
	for _, c := range s.Calls() {
		if c.Method == method && strings.Contains(c.Path, fragment) {
			n++
		}
	}
	return n
}

// ResetCalls forgets the calls recorded so far.
func (s *Server) ResetCalls() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = nil
}

// route is one endpoint: its pattern, spelt with the path parameters GitHub's
// description names, the operation it is there, and the credential it takes.
type route struct {
	pattern   string
	operation string
	auth      string
	handle    func(s *Server, w http.ResponseWriter, r *http.Request)
}

func routes() []route {
	return []route{
		{"POST /app/installations/{installation_id}/access_tokens", "apps/create-installation-access-token", "app", (*Server).createInstallationToken},
		{"GET /repos/{owner}/{repo}/contents/{path...}", "repos/get-content", "installation", (*Server).getContents},
		{"PUT /repos/{owner}/{repo}/contents/{path...}", "repos/create-or-update-file-contents", "installation", (*Server).putContents},
		{"GET /repos/{owner}/{repo}/git/blobs/{file_sha}", "git/get-blob", "installation", (*Server).getBlob},
		{"GET /repos/{owner}/{repo}/deployments", "repos/list-deployments", "installation", (*Server).listDeployments},
		{"GET /repos/{owner}/{repo}/deployments/{deployment_id}/statuses", "repos/list-deployment-statuses", "installation", (*Server).listStatuses},
		{"POST /repos/{owner}/{repo}/deployments/{deployment_id}/statuses", "repos/create-deployment-status", "installation", (*Server).createStatus},
	}
}

// handler serves the routes. Every request is held to its operation in
// GitHub's description before it is served, and every answer after, so a
// request GitHub would refuse and an answer GitHub would not give both show.
func (s *Server) handler() http.Handler {
	mux := http.NewServeMux()
	for _, rt := range routes() {
		op := s.operations[rt.pattern]
		mux.HandleFunc(rt.pattern, func(w http.ResponseWriter, r *http.Request) {
			rec := &recorder{ResponseWriter: w, status: http.StatusOK}
			auth := s.serve(rec, r, rt, op)
			s.checkAnswer(r, op, rec.status, rec.Header(), rec.body.Bytes())
			rec.send()
			s.record(r, auth, rec.status)
		})
	}
	// A call to an operation the double does not serve could not be held
	// to GitHub's description, and its 404 would read as GitHub's own
	// answer: it is reported, so the test that made it says what to add.
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		s.violate(fmt.Errorf("request %s %s: the double serves no such operation (add it to third_party/github/operations.txt and to the double's routes)", r.Method, r.URL.Path))
		writeError(w, http.StatusNotFound, "Not Found")
		s.record(r, "", http.StatusNotFound)
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if rest, ok := strings.CutPrefix(r.URL.Path, enterprisePrefix); ok {
			r2 := r.Clone(r.Context())
			r2.URL.Path = rest
			r2.URL.RawPath = ""
			r = r2
		}
		w.Header().Set("X-GitHub-Api-Version-Selected", "2022-11-28")
		mux.ServeHTTP(w, r)
	})
}

// serve answers one request on a route, in GitHub's order: the credential,
// then the request's validity, then the state the fake is put in (failing,
// archived), then the route's own answer. The request is held to GitHub's
// description first, whatever the answer, so a product's invalid request is
// reported even where its credential is refused too. It returns how the
// caller authenticated.
func (s *Server) serve(w *recorder, r *http.Request, rt route, op *routers.Route) string {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		writeError(w, http.StatusRequestEntityTooLarge, err.Error())
		return ""
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	refused := s.checkRequest(r, op, body)
	auth, ok := s.authenticate(w, r, rt.auth)
	if !ok {
		return auth
	}
	if rt.auth == "installation" {
		s.setRateHeaders(w)
	}
	if refused != nil {
		writeError(w, refused.status, refused.message)
		return auth
	}
	if rt.auth == "installation" && (s.failing(w) || s.readOnly(w, r)) {
		return auth
	}
	rt.handle(s, w, r)
	return auth
}

// ArchiveRepository makes repo read-only, as archiving it on GitHub does:
// every write to it is answered 403.
func (s *Server) ArchiveRepository(repo string) {
	s.AddRepository(repo)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.repos[repo].archived = true
}

// readOnly answers a write to an archived repository as GitHub does.
func (s *Server) readOnly(w http.ResponseWriter, r *http.Request) bool {
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		return false
	}
	s.mu.Lock()
	repo, ok := s.repos[r.PathValue("owner")+"/"+r.PathValue("repo")]
	archived := ok && repo.archived
	s.mu.Unlock()
	if archived {
		writeError(w, http.StatusForbidden, "Repository was archived so is read-only.")
	}
	return archived
}

func (s *Server) failing(w http.ResponseWriter) bool {
	s.mu.Lock()
	status := s.failWith
	s.mu.Unlock()
	if status == 0 {
		return false
	}
	writeError(w, status, http.StatusText(status))
	return true
}

func (s *Server) record(r *http.Request, auth string, status int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = append(s.calls, Call{Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery, Auth: auth, Status: status})
}

// errorBody is GitHub's client-error shape.
type errorBody struct {
	Message          string `json:"message"`
	DocumentationURL string `json:"documentation_url"`
	Status           string `json:"status"`
}

func writeError(w http.ResponseWriter, status int, message string) {
	writeJSON(w, status, errorBody{Message: message, DocumentationURL: docsURL, Status: fmt.Sprint(status)})
}

func writeJSON(w http.ResponseWriter, status int, body any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(body)
}

func randomToken() string {
	b := make([]byte, 18)
	_, _ = rand.Read(b)
	return "ghs_" + hex.EncodeToString(b)
}

// Repositories lists the repositories the fake holds, sorted.
func (s *Server) Repositories() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Sorted(maps.Keys(s.repos))
}
